#!/usr/bin/env python3
"""Fashion-MNIST with PyTorch on hora, in Horovod's style.

    PYTHONPATH=build/python build/cli/horarun -np 4 /usr/bin/python3 examples/pytorch_fashion_mnist.py
    PYTHONPATH=build/python /usr/bin/python3 examples/pytorch_fashion_mnist.py --epochs 1

A Horovod script changes one line to run on hora: `import horovod.torch as hvd` becomes
`import hora.torch as hvd`. The data are Debian's dataset-fashion-mnist files, read with the
standard library. Every rank prints its per-epoch loss, the averaged test accuracy, and a
checksum of its final parameters (equal on every rank: they apply the same averaged gradients).
"""

import argparse
import gzip
import os
import struct
import zlib

import torch
import torch.nn as nn
import torch.nn.functional as F

import hora.torch as hvd

DATA_DIR = '/usr/share/datasets/fashion-mnist'


def read_idx(path):
    """An IDX file (gzip-compressed) as a uint8 tensor of its shape."""
    with gzip.open(path, 'rb') as f:
        data = f.read()
    magic, = struct.unpack('>I', data[:4])
    ndim = magic & 0xff
    shape = struct.unpack('>' + 'I' * ndim, data[4:4 + 4 * ndim])
    return torch.frombuffer(bytearray(data[4 + 4 * ndim:]), dtype=torch.uint8).reshape(shape)


def load(data_dir, kind):
    images = read_idx(os.path.join(data_dir, '%s-images-idx3-ubyte.gz' % kind))
    labels = read_idx(os.path.join(data_dir, '%s-labels-idx1-ubyte.gz' % kind))
    return (images.float() / 255.0 - 0.2860) / 0.3530, labels.long()


class Net(nn.Module):
    def __init__(self, hidden=256):
        super().__init__()
        self.fc1 = nn.Linear(28 * 28, hidden)
        self.fc2 = nn.Linear(hidden, hidden // 2)
        self.fc3 = nn.Linear(hidden // 2, 10)

    def forward(self, x):
        x = x.flatten(1)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


def metric_average(value, name):
    return hvd.allreduce(torch.tensor(value, dtype=torch.float64), name=name).item()


def main():
    parser = argparse.ArgumentParser(description='Fashion-MNIST on hora.torch')
    parser.add_argument('--epochs', type=int, default=3)
    parser.add_argument('--batch-size', type=int, default=32, help='per rank')
    parser.add_argument('--lr', type=float, default=0.001, help='per rank; scaled by size()')
    parser.add_argument('--lr-decay', type=float, default=0.35, help='factor applied each epoch')
    parser.add_argument('--data', default=DATA_DIR)
    parser.add_argument('--fp16-allreduce', action='store_true')
    parser.add_argument('--seed', type=int, default=42)
    args = parser.parse_args()

    hvd.init()
    torch.set_num_threads(1)  # one core per rank
    torch.manual_seed(args.seed + hvd.rank())  # different on purpose: broadcast fixes it

    x_train, y_train = load(args.data, 'train')
    x_test, y_test = load(args.data, 't10k')
    # Each rank trains and tests on its own shard.
    x_train, y_train = x_train[hvd.rank()::hvd.size()], y_train[hvd.rank()::hvd.size()]
    x_test, y_test = x_test[hvd.rank()::hvd.size()], y_test[hvd.rank()::hvd.size()]

    model = Net()
    # Horovod's rule: scale the learning rate by the number of ranks (the global batch grows).
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr * hvd.size())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    compression = hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(),
                                         compression=compression)

    # Every rank takes the same number of steps (the shards may differ by one image).
    steps = len(x_train) // args.batch_size
    for epoch in range(1, args.epochs + 1):
        for group in optimizer.param_groups:
            group['lr'] = args.lr * hvd.size() * args.lr_decay ** (epoch - 1)
        model.train()
        g = torch.Generator().manual_seed(args.seed * 1000 + epoch * 10 + hvd.rank())
        order = torch.randperm(len(x_train), generator=g)
        total = 0.0
        for step in range(steps):
            idx = order[step * args.batch_size:(step + 1) * args.batch_size]
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x_train[idx]), y_train[idx])
            loss.backward()
            optimizer.step()
            total += loss.item()
        train_loss = metric_average(total / steps, 'avg_train_loss')

        model.eval()
        with torch.no_grad():
            out = model(x_test)
            test_loss = F.cross_entropy(out, y_test).item()
            accuracy = (out.argmax(1) == y_test).double().mean().item()
        test_loss = metric_average(test_loss, 'avg_test_loss')
        accuracy = metric_average(accuracy, 'avg_accuracy')
        print('rank %d epoch %d: train loss %.4f, test loss %.4f, test accuracy %.2f%%'
              % (hvd.rank(), epoch, train_loss, test_loss, 100.0 * accuracy), flush=True)

    blob = b''.join(p.detach().contiguous().numpy().tobytes() for p in model.parameters())
    print('rank %d parameter checksum crc32 %08x sum %.10f'
          % (hvd.rank(), zlib.crc32(blob), sum(p.double().sum().item()
                                               for p in model.parameters())), flush=True)
    hvd.shutdown()


if __name__ == '__main__':
    main()
