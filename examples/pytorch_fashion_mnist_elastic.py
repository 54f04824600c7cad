#!/usr/bin/env python3
"""Fashion-MNIST with PyTorch on hora, in Horovod's elastic style (docs/elastic.md).

    # elastic: 2 to 4 ranks on the hosts that discover_hosts.sh prints (host:slots lines)
    PYTHONPATH=build/python build/cli/horarun -np 2 --min-np 2 --max-np 4 \\
        --host-discovery-script ./discover_hosts.sh /usr/bin/python3 \\
        examples/pytorch_fashion_mnist_elastic.py
    # the same program in a fixed-size job
    PYTHONPATH=build/python build/cli/horarun -np 2 /usr/bin/python3 \\
        examples/pytorch_fashion_mnist_elastic.py --epochs 1

A Horovod elastic script changes one line to run on hora: `import horovod.torch as hvd` becomes
`import hora.torch as hvd`. The training state (model, optimizer, sampler position, epoch and
batch) lives in a TorchState; the training function runs under @hvd.elastic.run and commits
every --batches-per-commit batches. When a rank is lost, the others go back to the last commit
and carry on at the new size; when hosts are added, every rank stops at its next commit and the
new ranks join. The learning rate follows size() through a reset callback. Every rank prints its
per-epoch loss, the averaged test accuracy and a checksum of its final parameters (equal on
every rank). The data, the model and the metric averaging come from pytorch_fashion_mnist.py,
next to this file.
"""

import argparse
import os
import sys
import zlib

import torch
import torch.nn.functional as F
import torch.utils.data

import hora.torch as hvd

# The data, the model and the metric averaging are those of the non-elastic example.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pytorch_fashion_mnist import DATA_DIR, Net, load, metric_average  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description='Elastic Fashion-MNIST on hora.torch')
    parser.add_argument('--epochs', type=int, default=3)
    parser.add_argument('--batch-size', type=int, default=32, help='per rank')
    parser.add_argument('--lr', type=float, default=0.001, help='per rank; scaled by size()')
    parser.add_argument('--lr-decay', type=float, default=0.35, help='factor applied each epoch')
    parser.add_argument('--batches-per-commit', type=int, default=50,
                        help='commit the state every N batches (a failure loses at most N)')
    parser.add_argument('--batches-per-host-check', type=int, default=10,
                        help='between commits, check for new hosts every N batches')
    parser.add_argument('--batches-per-epoch', type=int, default=0,
                        help='stop each epoch after N batches (0: the whole training set)')
    parser.add_argument('--data', default=DATA_DIR)
    parser.add_argument('--seed', type=int, default=42)
    args = parser.parse_args()

    # Nothing collective between init() and the elastic function but state.sync(): a rank
    # that joins in a reset goes straight to sync().
    hvd.init()
    torch.set_num_threads(1)  # one core per rank
    torch.manual_seed(args.seed + hvd.rank())  # different on purpose: sync() fixes it

    x_train, y_train = load(args.data, 'train')
    x_test, y_test = load(args.data, 't10k')
    train_set = torch.utils.data.TensorDataset(x_train, y_train)
    # The sampler partitions the epoch's samples not yet processed over the current ranks,
    # again after every reset.
    train_sampler = hvd.elastic.ElasticSampler(train_set, shuffle=True, seed=args.seed)
    train_loader = torch.utils.data.DataLoader(train_set, batch_size=args.batch_size,
                                               sampler=train_sampler)

    model = Net()
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr * hvd.size())
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())

    def set_lr(epoch):
        # Horovod's rule: the learning rate grows with the number of ranks (the global batch).
        for group in optimizer.param_groups:
            group['lr'] = args.lr * hvd.size() * args.lr_decay ** (epoch - 1)

    def train_epoch(state):
        model.train()
        set_lr(state.epoch)
        first = state.batch  # batches of this epoch done before the last reset
        total, count = 0.0, 0
        for i, (x, y) in enumerate(train_loader):
            state.batch = first + i
            if args.batches_per_epoch and state.batch >= args.batches_per_epoch:
                break
            if state.batch % args.batches_per_commit == 0:
                state.commit()
            elif state.batch % args.batches_per_host_check == 0:
                state.check_host_updates()
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            total += loss.item()
            count += 1
            state.train_sampler.record_batch(i, args.batch_size)
        return metric_average(total / max(count, 1), 'avg_train_loss')

    def evaluate():
        # Each rank tests its own shard of the current round.
        model.eval()
        with torch.no_grad():
            x, y = x_test[hvd.rank()::hvd.size()], y_test[hvd.rank()::hvd.size()]
            out = model(x)
            test_loss = F.cross_entropy(out, y).item()
            accuracy = (out.argmax(1) == y).double().mean().item()
        return metric_average(test_loss, 'avg_test_loss'), metric_average(accuracy,
                                                                          'avg_accuracy')

    @hvd.elastic.run
    def train(state):
        while state.epoch <= args.epochs:
            train_loss = train_epoch(state)
            test_loss, accuracy = evaluate()
            print('rank %d epoch %d (size %d): train loss %.4f, test loss %.4f, '
                  'test accuracy %.2f%%' % (hvd.rank(), state.epoch, hvd.size(), train_loss,
                                            test_loss, 100.0 * accuracy), flush=True)
            state.epoch += 1
            state.batch = 0
            state.train_sampler.set_epoch(state.epoch)
            state.commit()

    def on_reset():
        set_lr(state.epoch)
        print('rank %d: reset, now %d ranks' % (hvd.rank(), hvd.size()), flush=True)

    state = hvd.elastic.TorchState(model, optimizer, train_sampler=train_sampler, epoch=1,
                                   batch=0)
    state.register_reset_callbacks([on_reset])
    train(state)

    blob = b''.join(p.detach().contiguous().numpy().tobytes() for p in model.parameters())
    print('rank %d parameter checksum crc32 %08x sum %.10f'
          % (hvd.rank(), zlib.crc32(blob), sum(p.double().sum().item()
                                               for p in model.parameters())), flush=True)
    hvd.shutdown()


if __name__ == '__main__':
    main()
