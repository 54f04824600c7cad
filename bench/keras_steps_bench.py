#!/usr/bin/env python3
"""Keras 3 model.fit steps per second on a communication-heavy model, one contender per run
(bench/keras_steps.sh runs them side by side; scripts/bench.sh keras_steps):

  --framework hora   hora.keras.DistributedOptimizer, the job launched by horarun;
  --framework mwms   tf.distribute.MultiWorkerMirroredStrategy (TF's collective ops over gRPC),
                     also started by horarun, each rank building its TF_CONFIG from its rank
                     and --workers (host:port of every rank, in rank order).

The model: a wide MLP, 1024 -> 2048 -> 2048 -> 2048 -> 10 (10.5 M parameters, 42 MB of fp32
gradients a step), batch 16 per rank of synthetic data, plain SGD, so a step is mostly the
gradients' allreduce. Rank 0 prints `steps_per_sec=<x>` over --steps steps after --warmup.

  --allreduce        instead: the time of one allreduce of 4 B and of 16 MiB from a TF tensor,
                     hora.tensorflow's op against tf.distribute's CollectiveAllReduce (the
                     mwms framework), printing `allreduce_us bytes=<n> us=<median> op_us=<m>`:
                     us from the call to the result in numpy (`.numpy()`, which copies), op_us
                     to the result tensor (an eager op returns once it has completed).
"""

import argparse
import json
import os
import time

import numpy as np

if os.environ.get('KERAS_TRACEBACK') == '1':
    import keras
    keras.config.disable_traceback_filtering()

RANK = int(os.environ.get('HORA_RANK', '0'))
SIZE = int(os.environ.get('HORA_SIZE', '1'))


def tf_config(workers):
    hosts = workers.split(',')
    assert len(hosts) == SIZE, 'need one --workers entry per rank'
    os.environ['TF_CONFIG'] = json.dumps({'cluster': {'worker': hosts},
                                          'task': {'type': 'worker', 'index': RANK}})


def build(keras):
    return keras.Sequential([
        keras.Input((1024,)),
        keras.layers.Dense(2048, activation='relu'),
        keras.layers.Dense(2048, activation='relu'),
        keras.layers.Dense(2048, activation='relu'),
        keras.layers.Dense(10),
    ])


def data(tf, batch):
    g = np.random.default_rng(RANK)
    x = g.normal(size=(batch * 8, 1024)).astype(np.float32)
    y = g.integers(0, 10, size=(batch * 8,)).astype(np.int32)
    return tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(batch, drop_remainder=True)


class Timer(object):
    """Times the batches after the warm-up ones (the first traces the train function)."""

    def __init__(self, keras, warmup):
        timer = self

        class Callback(keras.callbacks.Callback):
            def on_train_batch_end(self, batch, logs=None):
                if batch + 1 == warmup:
                    timer.start = time.perf_counter()

            def on_train_end(self, logs=None):
                timer.end = time.perf_counter()
        self.callback = Callback()
        self.start = self.end = None


def fit(args):
    """model.fit (hora), or a custom loop: the same step as a tf.function over --steps
    batches (hora: DistributedGradientTape; mwms: strategy.run, whose optimizer sums the
    replicas' gradients with TF's collective all-reduce)."""
    import tensorflow as tf
    import keras
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    if args.framework == 'hora':
        import hora.keras as hvd
        hvd.init()
        model = build(keras)
        ds = data(tf, args.batch)
        if args.loop == 'fit':
            timer = Timer(keras, args.warmup)
            model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.01)),
                          loss=loss)
            model.fit(ds, steps_per_epoch=args.warmup + args.steps, epochs=1, verbose=0,
                      callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0),
                                 timer.callback])
            seconds = timer.end - timer.start
        else:
            import hora.tensorflow as hvd_tf
            opt = keras.optimizers.SGD(0.01)
            hvd_tf.broadcast_variables(model.variables, root_rank=0)

            @tf.function
            def step(x, y):
                with tf.GradientTape() as tape:
                    value = loss(y, model(x, training=True))
                tape = hvd_tf.DistributedGradientTape(tape)
                opt.apply(tape.gradient(value, model.trainable_variables),
                          model.trainable_variables)
            seconds = run_loop(ds, step, args)
    else:
        if args.loop == 'fit':
            raise SystemExit('mwms: Keras 3.15\'s model.fit fails under '
                             'MultiWorkerMirroredStrategy on CPU workers (docs/'
                             'benchmarks-tensorflow.md); use --loop custom')
        tf_config(args.workers)
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
        with strategy.scope():
            model = build(keras)
            opt = keras.optimizers.SGD(0.01)
            opt.build(model.trainable_variables)
        # Each worker feeds its own batches: the global batch is batch x workers.
        ds = data(tf, args.batch * SIZE)
        options = tf.data.Options()
        options.experimental_distribute.auto_shard_policy = \
            tf.data.experimental.AutoShardPolicy.OFF
        ds = strategy.experimental_distribute_dataset(ds.with_options(options))

        def replica_step(x, y):
            with tf.GradientTape() as tape:
                value = loss(y, model(x, training=True)) / strategy.num_replicas_in_sync
            opt.apply(tape.gradient(value, model.trainable_variables),
                      model.trainable_variables)

        @tf.function
        def step(x, y):
            strategy.run(replica_step, args=(x, y))
        seconds = run_loop(ds, step, args)
    if RANK == 0:
        print('steps_per_sec=%.3f' % (args.steps / seconds), flush=True)


def run_loop(ds, step, args):
    it = iter(ds)
    for _ in range(args.warmup):
        step(*next(it))
    start = time.perf_counter()
    for _ in range(args.steps):
        step(*next(it))
    return time.perf_counter() - start


def allreduce(args):
    import tensorflow as tf
    sizes = [1, 4 * 1024 * 1024]  # float32 elements: 4 B and 16 MiB
    if args.framework == 'hora':
        import hora.tensorflow as hvd
        hvd.init()

        def reducer(n):
            x = tf.ones([n])
            return lambda: hvd.allreduce(x, op=hvd.Sum, name='bench.%d' % n)
    else:
        tf_config(args.workers)
        strategy = tf.distribute.MultiWorkerMirroredStrategy()

        def reducer(n):
            x = tf.ones([n])

            @tf.function
            def step():
                return strategy.reduce(tf.distribute.ReduceOp.SUM,
                                       strategy.run(lambda: tf.identity(x)), axis=None)
            return step
    for n in sizes:
        run = reducer(n)
        for _ in range(3):
            run().numpy()
        times, op_times = [], []
        for _ in range(args.iters):
            t = time.perf_counter()
            run().numpy()
            times.append(time.perf_counter() - t)
        for _ in range(args.iters):
            t = time.perf_counter()
            run()
            op_times.append(time.perf_counter() - t)
        if RANK == 0:
            print('allreduce_us bytes=%d us=%.1f op_us=%.1f' % (
                4 * n, 1e6 * float(np.median(times)), 1e6 * float(np.median(op_times))),
                flush=True)
        if args.framework == 'hora':
            interleaved_with_c(hvd, run, n, args.iters)


def interleaved_with_c(hvd, run, n, iters):
    """The op against the same allreduce called from C in the same process, one after the
    other on every iteration, so both meet the same load: libhora's async API with
    synchronize() on numpy buffers allocated once (as the C++ bench's), through hora.mxnet's C
    library (hora_mx_ops.so, which needs no MXNet), when the build has it. Prints
    `allreduce_c_us bytes=<n> op_us=<median> c_us=<median> ratio=<median of op/c>`."""
    import ctypes
    import hora
    lib = os.path.join(os.path.dirname(hora.__file__), 'mxnet', 'hora_mx_ops.so')
    if not os.path.exists(lib):
        return
    c = ctypes.CDLL(lib)
    send = np.ones(n, np.float32)
    recv = np.empty_like(send)
    dims = (ctypes.c_int64 * 1)(n)
    op_t, c_t = [], []
    for i in range(iters + 3):
        t0 = time.perf_counter()
        run()
        t1 = time.perf_counter()
        rc = c.hora_mx_allreduce(b'bench.c.%d' % n, send.ctypes.data_as(ctypes.c_void_p),
                                 recv.ctypes.data_as(ctypes.c_void_p), dims, 1, 6, 0, 0)
        t2 = time.perf_counter()
        assert rc == 0 and recv[0] == hvd.size(), rc
        if i >= 3:
            op_t.append(t1 - t0)
            c_t.append(t2 - t1)
    if RANK == 0:
        print('allreduce_c_us bytes=%d op_us=%.1f c_us=%.1f ratio=%.2f' % (
            4 * n, 1e6 * float(np.median(op_t)), 1e6 * float(np.median(c_t)),
            float(np.median(np.array(op_t) / np.array(c_t)))), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--framework', choices=['hora', 'mwms'], required=True)
    parser.add_argument('--workers', default='', help='mwms: host:port of every rank')
    parser.add_argument('--steps', type=int, default=30)
    parser.add_argument('--warmup', type=int, default=5)
    parser.add_argument('--batch', type=int, default=16, help='per rank')
    parser.add_argument('--loop', choices=['fit', 'custom'], default='fit')
    parser.add_argument('--allreduce', action='store_true')
    parser.add_argument('--iters', type=int, default=20)
    args = parser.parse_args()
    allreduce(args) if args.allreduce else fit(args)


if __name__ == '__main__':
    main()
