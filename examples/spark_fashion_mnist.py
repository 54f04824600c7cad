#!/usr/bin/env python3
"""Fashion-MNIST with hora.torch on Spark, the Databricks way: ``HoraRunner(np=2).run(train)``.

    PYSPARK_PYTHON=$PWD/.venv-engines/bin/python PYTHONPATH=build/python \\
        .venv-engines/bin/python examples/spark_fashion_mnist.py --master 'local-cluster[2,1,1024]'

(``scripts/venv.sh engines`` makes the venv; ``--master spark://HOST:7077`` runs it on a standalone
cluster, ``--np -2`` on this machine through horarun.) The model, data and averaging come from
examples/pytorch_fashion_mnist.py; ``train`` is what a notebook cell would hold: it trains on the
rank's shard, rank 0 writes the checkpoint, and every rank returns the averaged test accuracy,
of which HoraRunner.run() returns rank 0's.
"""

import argparse
import os
import sys

import cloudpickle

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pytorch_fashion_mnist as fm  # noqa: E402

# The executors cannot import this folder: the module travels by value in the closure.
cloudpickle.register_pickle_by_value(fm)


def train(epochs=1, batch_size=64, lr=0.001, checkpoint='/tmp/spark_fashion_mnist.pt'):
    import torch
    import torch.nn.functional as F
    import hora.torch as hvd

    hvd.init()
    torch.set_num_threads(1)
    torch.manual_seed(42)
    x_train, y_train = fm.load(fm.DATA_DIR, 'train')
    x_test, y_test = fm.load(fm.DATA_DIR, 't10k')
    x_train, y_train = x_train[hvd.rank()::hvd.size()], y_train[hvd.rank()::hvd.size()]
    x_test, y_test = x_test[hvd.rank()::hvd.size()], y_test[hvd.rank()::hvd.size()]
    model = fm.Net()
    optimizer = torch.optim.Adam(model.parameters(), lr=lr * hvd.size())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    steps = len(x_train) // batch_size
    for epoch in range(1, epochs + 1):
        model.train()
        order = torch.randperm(len(x_train), generator=torch.Generator().manual_seed(epoch))
        for step in range(steps):
            idx = order[step * batch_size:(step + 1) * batch_size]
            optimizer.zero_grad()
            F.cross_entropy(model(x_train[idx]), y_train[idx]).backward()
            optimizer.step()
        model.eval()
        with torch.no_grad():
            accuracy = (model(x_test).argmax(1) == y_test).double().mean().item()
        accuracy = fm.metric_average(accuracy, 'accuracy')
        print('rank %d epoch %d: test accuracy %.2f%%' % (hvd.rank(), epoch, 100 * accuracy))
    if hvd.rank() == 0:
        torch.save(model.state_dict(), checkpoint)
    hvd.shutdown()
    return accuracy


def main():
    parser = argparse.ArgumentParser(description='Fashion-MNIST on hora.spark')
    parser.add_argument('--master', default=None, help='Spark master (default: the session\'s)')
    parser.add_argument('--np', type=int, default=2, help='HoraRunner np: >0 executors, <0 local')
    parser.add_argument('--epochs', type=int, default=1)
    parser.add_argument('--checkpoint', default='/tmp/spark_fashion_mnist.pt')
    args = parser.parse_args()

    from pyspark.sql import SparkSession
    from hora.spark import HoraRunner

    builder = SparkSession.builder.appName('hora-fashion-mnist')
    if args.master:
        builder = builder.master(args.master)
    if os.environ.get('PYTHONPATH'):
        builder = builder.config('spark.executorEnv.PYTHONPATH', os.environ['PYTHONPATH'])
    spark = builder.config('spark.executor.memory', '1g').getOrCreate()
    try:
        accuracy = HoraRunner(np=args.np).run(train, epochs=args.epochs,
                                              checkpoint=args.checkpoint)
        print('test accuracy %.2f%%, checkpoint %s' % (100 * accuracy, args.checkpoint))
    finally:
        spark.stop()


if __name__ == '__main__':
    main()
