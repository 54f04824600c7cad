"""op=hvd.Adasum in hora.tensorflow (run by run_tf.sh under horarun -np 2 and 4): allreduce,
grouped_allreduce, the allreduce's gradient and DistributedGradientTape, eagerly and inside
tf.function, against a NumPy Adasum of every rank's inputs written here from Horovod's
definition (each rank computes the others' inputs, which depend on the rank only); and the
refusals: a process set of 3 ranks, integer tensors."""

import numpy as np
import tensorflow as tf

import hora.tensorflow as hvd
from harness import run

hvd.init(process_sets='dynamic')
R, N = hvd.rank(), hvd.size()


def np_adasum(vectors):
    """Horovod's Adasum of one float64 vector per rank: pairs (0, 1), (2, 3), ... are combined
    as (1 - a.b / 2|a|^2) a + (1 - a.b / 2|b|^2) b (a coefficient is 1 where the squared norm
    is below 1e-8), then the pairs' results, the lower ranks' vector being a."""
    vs = [np.asarray(v, np.float64).ravel() for v in vectors]
    while len(vs) > 1:
        nxt = []
        for a, b in zip(vs[0::2], vs[1::2]):
            dot, aa, bb = a @ b, a @ a, b @ b
            ca = 1.0 - dot / (2 * aa) if aa >= 1e-8 else 1.0
            cb = 1.0 - dot / (2 * bb) if bb >= 1e-8 else 1.0
            nxt.append(ca * a + cb * b)
        vs = nxt
    return vs[0].reshape(np.shape(vectors[0]))


def value(r, shape, seed=0):
    return np.random.default_rng(1000 * seed + r).normal(size=shape)


def both(fn):
    eager = fn()
    graph = tf.function(fn)()
    return tf.nest.map_structure(lambda t: t.numpy(), (eager, graph))


def test_the_reference():
    # Adasum's two cases that need no arithmetic: equal vectors average, orthogonal ones add.
    a = np.array([3.0, 4.0])
    assert np.allclose(np_adasum([a, a]), a)
    assert np.allclose(np_adasum([np.array([1.0, 0]), np.array([0, 2.0])]), [1.0, 2.0])


def test_allreduce():
    for dtype, tol in ((np.float64, 1e-12), (np.float32, 1e-5), (np.float16, 2e-3)):
        inputs = [value(r, (3, 5)).astype(dtype) for r in range(N)]
        want = np_adasum(inputs)
        x = tf.constant(inputs[R])
        for got in both(lambda: hvd.allreduce(x, op=hvd.Adasum)):
            assert got.dtype == dtype and got.shape == (3, 5)
            assert np.allclose(got, want, rtol=tol, atol=tol), (dtype, got, want)
    # The scale factors: before the tree and after it.
    inputs = [value(r, (7,), seed=1) for r in range(N)]
    want = np_adasum([v * 0.5 for v in inputs]) * 3.0
    got = hvd.allreduce(tf.constant(inputs[R]), op=hvd.Adasum, prescale_factor=0.5,
                        postscale_factor=3.0, name='adasum.scaled')
    assert np.allclose(got.numpy(), want, rtol=1e-12)
    # Equal inputs on every rank: their average, which is themselves.
    same = tf.constant(value(0, (4,), seed=2))
    assert np.allclose(hvd.allreduce(same, op=hvd.Adasum).numpy(), same.numpy(), rtol=1e-12)


def test_grouped_allreduce_combines_each_tensor_apart():
    shapes = [(2, 3), (5,), (1, 1, 4)]
    inputs = [[value(r, s, seed=10 + i) for i, s in enumerate(shapes)] for r in range(N)]
    want = [np_adasum([inputs[r][i] for r in range(N)]) for i in range(len(shapes))]
    xs = [tf.constant(v) for v in inputs[R]]
    for got in both(lambda: hvd.grouped_allreduce(xs, op=hvd.Adasum)):
        for g, w in zip(got, want):
            assert g.shape == w.shape and np.allclose(g, w, rtol=1e-12), (g, w)
    # One flat Adasum of the concatenation would differ: the test tells them apart.
    flat = np_adasum([np.concatenate([v.ravel() for v in inputs[r]]) for r in range(N)])
    assert not np.allclose(flat[:6], want[0].ravel())


def test_gradients():
    # d/dx of sum(allreduce(x, Adasum) * c_r) is, as in Horovod, the Adasum of the ranks' c_r.
    x = tf.constant(value(R, (6,), seed=20))
    c = tf.constant(value(R, (6,), seed=21))
    want = np_adasum([value(r, (6,), seed=21) for r in range(N)])

    def grad():
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = tf.reduce_sum(hvd.allreduce(x, op=hvd.Adasum) * c)
        return tape.gradient(loss, x)
    for got in both(grad):
        assert np.allclose(got, want, rtol=1e-12), (got, want)

    # DistributedGradientTape(op=Adasum): the loss sum(w * x_r) has the local gradient x_r.
    w = tf.Variable(tf.zeros([2, 3], tf.float64))
    xr = tf.constant(value(R, (2, 3), seed=22))
    want = np_adasum([value(r, (2, 3), seed=22) for r in range(N)])

    def tape_grad():
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(w * xr)
        return hvd.DistributedGradientTape(tape, op=hvd.Adasum).gradient(loss, [w])[0]
    for got in both(tape_grad):
        assert np.allclose(got, want, rtol=1e-12), (got, want)


def test_refusals():
    try:
        hvd.allreduce(tf.constant([1, 2], tf.int32), op=hvd.Adasum)
        raise AssertionError('an int32 Adasum was accepted')
    except ValueError as e:
        assert 'float16, float32 and float64' in str(e), e
    if N < 4:
        return
    three = hvd.add_process_set([0, 1, 2])
    try:
        if R < 3:
            try:
                hvd.allreduce(tf.constant([1.0]), op=hvd.Adasum, process_set=three)
                raise AssertionError('Adasum over 3 ranks was accepted')
            except NotImplementedError as e:
                assert hvd.adasum.NON_POWER_OF_TWO in str(e) and 'is 3' in str(e), e
    finally:
        hvd.remove_process_set(three)


run(globals())
