#!/usr/bin/env python3
"""Fashion-MNIST with hora.torch on Ray: ``RayExecutor(num_workers=2)``.

    PYTHONPATH=build/python .venv-engines/bin/python examples/ray_fashion_mnist.py

(``scripts/venv.sh engines`` makes the venv; ``--address HOST:6379`` joins a running cluster from
one of its nodes, default: a Ray instance of this process.) The training function is
examples/spark_fashion_mnist.py's: the same code runs on both engines.
"""

import argparse
import os
import sys

import cloudpickle

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pytorch_fashion_mnist  # noqa: E402
import spark_fashion_mnist  # noqa: E402

for module in (pytorch_fashion_mnist, spark_fashion_mnist):
    cloudpickle.register_pickle_by_value(module)  # the actors cannot import this folder


def main():
    parser = argparse.ArgumentParser(description='Fashion-MNIST on hora.ray')
    parser.add_argument('--address', default=None)
    parser.add_argument('--workers', type=int, default=2)
    parser.add_argument('--epochs', type=int, default=1)
    parser.add_argument('--checkpoint', default='/tmp/ray_fashion_mnist.pt')
    args = parser.parse_args()

    import ray
    from hora.ray import RayExecutor

    env = {'PYTHONPATH': os.environ['PYTHONPATH']} if os.environ.get('PYTHONPATH') else {}
    if args.address:
        ray.init(address=args.address, runtime_env={'env_vars': env})
    else:
        ray.init(num_cpus=args.workers, include_dashboard=False, runtime_env={'env_vars': env})
    executor = RayExecutor(num_workers=args.workers, cpus_per_worker=1)
    executor.start()
    try:
        accuracy = executor.run(spark_fashion_mnist.train,
                                kwargs=dict(epochs=args.epochs, checkpoint=args.checkpoint))
        print('test accuracy by rank: %s, checkpoint %s'
              % (', '.join('%.2f%%' % (100 * a) for a in accuracy), args.checkpoint))
    finally:
        executor.shutdown()
        ray.shutdown()


if __name__ == '__main__':
    main()
