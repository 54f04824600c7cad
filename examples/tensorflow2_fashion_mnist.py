#!/usr/bin/env python3
"""Fashion-MNIST with a TensorFlow 2 training loop on hora: tf.GradientTape wrapped in
DistributedGradientTape, in Horovod's style (its tensorflow2_mnist.py example).

    PYTHONPATH=build/python build/cli/horarun -np 2 .venv-tf/bin/python examples/tensorflow2_fashion_mnist.py
    PYTHONPATH=build/python .venv-tf/bin/python examples/tensorflow2_fashion_mnist.py --epochs 1

A Horovod script changes one line to run on hora: `import horovod.tensorflow as hvd` becomes
`import hora.tensorflow as hvd`. The data are Debian's dataset-fashion-mnist files. Every rank
prints its averaged loss per epoch, the test accuracy and a checksum of its final weights
(equal on every rank).
"""

import argparse
import gzip
import os
import struct
import zlib

import numpy as np
import tensorflow as tf
import keras

import hora.tensorflow as hvd

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
    return ((images.astype(np.float32) / 255.0 - 0.2860) / 0.3530), labels.astype(np.int64)


def main():
    parser = argparse.ArgumentParser(description='Fashion-MNIST on hora.tensorflow')
    parser.add_argument('--epochs', type=int, default=3)
    parser.add_argument('--batch-size', type=int, default=32, help='per rank')
    parser.add_argument('--lr', type=float, default=0.001, help='per rank; scaled by size()')
    parser.add_argument('--lr-decay', type=float, default=0.35, help='factor applied each epoch')
    parser.add_argument('--data', default=DATA_DIR)
    parser.add_argument('--seed', type=int, default=42)
    args = parser.parse_args()

    hvd.init()
    keras.utils.set_random_seed(args.seed + hvd.rank())  # different: the broadcast fixes it

    x_train, y_train = load(args.data, 'train')
    x_test, y_test = load(args.data, 't10k')
    x_train, y_train = x_train[hvd.rank()::hvd.size()], y_train[hvd.rank()::hvd.size()]
    steps = len(x_train) // args.batch_size  # the same on every rank

    model = keras.Sequential([
        keras.Input((28, 28)),
        keras.layers.Flatten(),
        keras.layers.Dense(256, activation='relu'),
        keras.layers.Dense(128, activation='relu'),
        keras.layers.Dense(10),
    ])
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    # Horovod's rule: scale the learning rate by the number of ranks.
    optimizer = keras.optimizers.Adam(args.lr * hvd.size())

    @tf.function
    def training_step(images, labels, first_batch):
        with tf.GradientTape() as tape:
            loss = loss_fn(labels, model(images, training=True))
        # The gradients averaged over the ranks.
        tape = hvd.DistributedGradientTape(tape)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        # Horovod: broadcast the variables after the first step, when the optimizer's exist.
        if first_batch:
            hvd.broadcast_variables(model.variables, root_rank=0)
            hvd.broadcast_variables(optimizer.variables, root_rank=0)
        return loss

    # Rank 0's initial weights before the first step, so every rank's first gradients agree.
    hvd.broadcast_variables(model.variables, root_rank=0)
    rng = np.random.default_rng(args.seed * 1000 + hvd.rank())
    for epoch in range(1, args.epochs + 1):
        optimizer.learning_rate = args.lr * hvd.size() * args.lr_decay ** (epoch - 1)
        order = rng.permutation(len(x_train))
        total = 0.0
        for step in range(steps):
            idx = order[step * args.batch_size:(step + 1) * args.batch_size]
            loss = training_step(tf.constant(x_train[idx]), tf.constant(y_train[idx]),
                                 epoch == 1 and step == 0)
            total += float(loss)
        train_loss = float(hvd.allreduce(tf.constant(total / steps), name='avg_train_loss'))
        xt, yt = x_test[hvd.rank()::hvd.size()], y_test[hvd.rank()::hvd.size()]
        logits = model(xt, training=False)
        accuracy = float(np.mean(np.argmax(logits, 1) == yt))
        accuracy = float(hvd.allreduce(tf.constant(accuracy), name='avg_accuracy'))
        print('rank %d epoch %d: train loss %.4f, test accuracy %.2f%%'
              % (hvd.rank(), epoch, train_loss, 100 * accuracy), flush=True)

    weights = model.get_weights()
    blob = b''.join(np.ascontiguousarray(w).tobytes() for w in weights)
    print('rank %d weights checksum crc32 %08x sum %.10f'
          % (hvd.rank(), zlib.crc32(blob), sum(float(w.astype(np.float64).sum())
                                               for w in weights)), flush=True)
    hvd.shutdown()


if __name__ == '__main__':
    main()
