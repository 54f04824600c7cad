#!/usr/bin/env python3
"""Fashion-MNIST with Keras 3 (TensorFlow backend) on hora: model.fit and hora.keras's callbacks,
in Horovod's style (its tensorflow2_keras_mnist.py example).

    PYTHONPATH=build/python build/cli/horarun -np 2 .venv-tf/bin/python examples/tensorflow2_keras_fashion_mnist.py
    PYTHONPATH=build/python .venv-tf/bin/python examples/tensorflow2_keras_fashion_mnist.py --epochs 1

A Horovod Keras script changes one line to run on hora: `import horovod.tensorflow.keras as hvd`
becomes `import hora.keras as hvd`. The data are Debian's dataset-fashion-mnist files, read with
the standard library. Every rank prints the averaged metrics of every epoch, the test accuracy
and a checksum of its final weights (equal on every rank: they apply the same averaged
gradients from the same broadcast start).
"""

import argparse
import gzip
import os
import struct
import zlib

import numpy as np
import keras

import hora.keras as hvd

DATA_DIR = '/usr/share/datasets/fashion-mnist'


def read_idx(path):
    """An IDX file (gzip-compressed) as a uint8 array of its shape."""
    with gzip.open(path, 'rb') as f:
        data = f.read()
    magic, = struct.unpack('>I', data[:4])
    ndim = magic & 0xff
    shape = struct.unpack('>' + 'I' * ndim, data[4:4 + 4 * ndim])
    return np.frombuffer(data[4 + 4 * ndim:], dtype=np.uint8).reshape(shape)


def load(data_dir, kind):
    images = read_idx(os.path.join(data_dir, '%s-images-idx3-ubyte.gz' % kind))
    labels = read_idx(os.path.join(data_dir, '%s-labels-idx1-ubyte.gz' % kind))
    return ((images.astype(np.float32) / 255.0 - 0.2860) / 0.3530), labels.astype(np.int32)


def main():
    parser = argparse.ArgumentParser(description='Fashion-MNIST on hora.keras')
    parser.add_argument('--epochs', type=int, default=3)
    parser.add_argument('--batch-size', type=int, default=32, help='per rank')
    parser.add_argument('--lr', type=float, default=0.001, help='per rank; scaled by size()')
    parser.add_argument('--data', default=DATA_DIR)
    parser.add_argument('--seed', type=int, default=42)
    args = parser.parse_args()

    hvd.init()
    keras.utils.set_random_seed(args.seed + hvd.rank())  # different: the callback fixes it

    x_train, y_train = load(args.data, 'train')
    x_test, y_test = load(args.data, 't10k')
    # Each rank trains on its own shard, the same number of steps everywhere.
    x_train, y_train = x_train[hvd.rank()::hvd.size()], y_train[hvd.rank()::hvd.size()]
    steps = len(x_train) // args.batch_size
    x_train, y_train = x_train[:steps * args.batch_size], y_train[:steps * args.batch_size]

    model = keras.Sequential([
        keras.Input((28, 28)),
        keras.layers.Flatten(),
        keras.layers.Dense(256, activation='relu'),
        keras.layers.Dense(128, activation='relu'),
        keras.layers.Dense(10),
    ])
    # Horovod's rule: scale the learning rate by the number of ranks (the global batch grows).
    optimizer = hvd.DistributedOptimizer(keras.optimizers.Adam(args.lr * hvd.size()))
    model.compile(optimizer=optimizer,
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=['accuracy'])
    callbacks = [
        # Rank 0's initial weights everywhere.
        hvd.callbacks.BroadcastGlobalVariablesCallback(0),
        # The epoch's metrics averaged over the ranks.
        hvd.callbacks.MetricAverageCallback(),
        # Goyal et al.: from lr to lr * size() over the first epoch.
        hvd.callbacks.LearningRateWarmupCallback(initial_lr=args.lr * hvd.size(),
                                                 warmup_epochs=1),
    ]
    model.fit(x_train, y_train, batch_size=args.batch_size, epochs=args.epochs,
              callbacks=callbacks, verbose=2 if hvd.rank() == 0 else 0)

    # Every rank evaluates its shard of the test set; the accuracies are averaged.
    x_test, y_test = x_test[hvd.rank()::hvd.size()], y_test[hvd.rank()::hvd.size()]
    loss, accuracy = model.evaluate(x_test, y_test, batch_size=1000, verbose=0)
    accuracy = float(hvd.allreduce(accuracy, name='test_accuracy'))
    loss = float(hvd.allreduce(loss, name='test_loss'))
    print('rank %d: test loss %.4f, test accuracy %.2f%%' % (hvd.rank(), loss, 100 * accuracy),
          flush=True)
    weights = model.get_weights()
    blob = b''.join(np.ascontiguousarray(w).tobytes() for w in weights)
    print('rank %d weights checksum crc32 %08x sum %.10f'
          % (hvd.rank(), zlib.crc32(blob), sum(float(w.astype(np.float64).sum())
                                               for w in weights)), flush=True)
    hvd.shutdown()


if __name__ == '__main__':
    main()
