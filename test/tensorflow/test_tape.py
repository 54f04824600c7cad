"""DistributedGradientTape, PartialDistributedGradientTape and SyncBatchNormalization at the
job's size: the gradients every rank gets are checked against the analytic gradient of the
loss over all ranks' batches (each rank computes every rank's batch, which depends on the rank
only), in eager mode and inside tf.function."""

import numpy as np
import tensorflow as tf
import keras

import hora.tensorflow as hvd
from harness import run

hvd.init()
R, N = hvd.rank(), hvd.size()


def batch(r, rows=4):
    g = np.random.default_rng(100 + r)
    return (g.normal(size=(rows, 3)).astype(np.float32),
            g.normal(size=(rows, 2)).astype(np.float32))


W0 = np.arange(6, dtype=np.float32).reshape(3, 2) / 10
B0 = np.array([0.5, -0.5], np.float32)


def analytic(ranks):
    """d/dW and d/db of the mean over ``ranks`` of each rank's mean squared error."""
    gw, gb = np.zeros_like(W0), np.zeros_like(B0)
    for r in ranks:
        x, y = batch(r)
        e = x @ W0 + B0 - y
        gw += 2 * x.T @ e / e.size / len(ranks)
        gb += 2 * e.sum(0) / e.size / len(ranks)
    return gw, gb


def tape_grads(w, b, x, y, **kwargs):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(tf.matmul(x, w) + b - y))
    tape = hvd.DistributedGradientTape(tape, **kwargs)
    return tape.gradient(loss, [w, b])


def test_tape_average_eager_and_function():
    w, b = tf.Variable(W0), tf.Variable(B0)
    x, y = batch(R)
    want = analytic(range(N))
    for kwargs in ({}, {'groups': 2}, {'groups': [[w], [b]]}, {'op': hvd.Average},
                   {'compression': hvd.Compression.fp16}):
        tol = 1e-2 if 'compression' in kwargs else 1e-5
        got = [g.numpy() for g in tape_grads(w, b, x, y, **kwargs)]
        assert all(np.allclose(g, v, atol=tol) for g, v in zip(got, want)), (kwargs, got, want)
        fn = tf.function(lambda: tape_grads(w, b, x, y, **kwargs))
        got = [g.numpy() for g in fn()]
        assert all(np.allclose(g, v, atol=tol) for g, v in zip(got, want)), (kwargs, got)


def test_tape_sum_and_predivide():
    w, b = tf.Variable(W0), tf.Variable(B0)
    x, y = batch(R)
    want = [N * g for g in analytic(range(N))]
    got = [g.numpy() for g in tape_grads(w, b, x, y, op=hvd.Sum)]
    assert all(np.allclose(g, v, atol=1e-5) for g, v in zip(got, want))
    want = analytic(range(N))
    got = [g.numpy() for g in tape_grads(w, b, x, y, gradient_predivide_factor=2.0)]
    assert all(np.allclose(g, v, atol=1e-5) for g, v in zip(got, want))


def test_tape_sparse_gradients():
    table = tf.Variable(np.arange(12, dtype=np.float32).reshape(6, 2))
    ids = tf.constant([R % 6, (R + 1) % 6])
    want = np.zeros((6, 2), np.float32)
    for r in range(N):
        for i in (r % 6, (r + 1) % 6):
            want[i] += (r + 1) / N
    for sparse_as_dense in (False, True):
        with tf.GradientTape() as tape:
            loss = float(R + 1) * tf.reduce_sum(tf.nn.embedding_lookup(table, ids))
        tape = hvd.DistributedGradientTape(tape, sparse_as_dense=sparse_as_dense)
        g, = tape.gradient(loss, [table])
        assert isinstance(g, tf.IndexedSlices) != sparse_as_dense
        assert np.allclose(tf.convert_to_tensor(g).numpy(), want), (sparse_as_dense, g)


def test_tape_backward_passes_per_step():
    w, b = tf.Variable(W0), tf.Variable(B0)
    x, y = batch(R)
    with tf.GradientTape(persistent=True) as tape:
        loss = tf.reduce_mean(tf.square(tf.matmul(x, w) + b - y))
    tape = hvd.DistributedGradientTape(tape, backward_passes_per_step=2)
    local = analytic([R])
    first = [g.numpy() for g in tape.gradient(loss, [w, b])]
    # The first pass returns the local running sum; the second the allreduced sums.
    assert all(np.allclose(g, v, atol=1e-5) for g, v in zip(first, local)), first
    second = [g.numpy() for g in tape.gradient(loss, [w, b])]
    want = [2 * g for g in analytic(range(N))]
    assert all(np.allclose(g, v, atol=1e-5) for g, v in zip(second, want)), second


def test_partial_tape_local_layer():
    shared = keras.layers.Dense(2, kernel_initializer=keras.initializers.Constant(0.1))
    local = keras.layers.Dense(1, kernel_initializer=keras.initializers.Constant(0.2))
    x = tf.constant(batch(R)[0])
    with tf.GradientTape() as tape:
        loss = float(R + 1) * tf.reduce_sum(local(shared(x)))
    tape = hvd.PartialDistributedGradientTape(tape, local_layers=[local])
    variables = shared.trainable_weights + local.trainable_weights
    grads = tape.gradient(loss, variables)
    # The local layer's gradients stay this rank's, divided by size (scale_local_gradients).
    with tf.GradientTape() as plain:
        loss = float(R + 1) * tf.reduce_sum(local(shared(x)))
    mine = plain.gradient(loss, variables)
    for g, m in zip(grads[2:], mine[2:]):
        assert np.allclose(g.numpy(), m.numpy() / N, atol=1e-5)
    # The shared layer's are the average over the ranks.
    gathered = hvd.allgather(tf.expand_dims(mine[0], 0)).numpy()
    assert np.allclose(grads[0].numpy(), gathered.mean(0), atol=1e-5)


def test_sync_batch_normalization():
    layer = hvd.SyncBatchNormalization(epsilon=1e-3, momentum=0.0)
    x = batch(R, rows=5)[0] * (R + 1)
    out = layer(tf.constant(x), training=True).numpy()
    everything = np.concatenate([batch(r, rows=5)[0] * (r + 1) for r in range(N)])
    mean, var = everything.mean(0), everything.var(0)
    assert np.allclose(out, (x - mean) / np.sqrt(var + 1e-3), atol=1e-4), (out, x)
    # momentum 0: the moving statistics are the global batch's.
    assert np.allclose(layer.moving_mean.numpy(), mean, atol=1e-4)


run(globals())
