"""hora.tensorflow's collectives at the job's size (run by run_tf.sh under horarun -np 1, 2, 3):
every op checked exactly against numpy on every rank's inputs (each rank computes the others'
inputs, which depend on the rank only), in eager mode and inside tf.function; the gradients
of allreduce, allgather, broadcast, alltoall and reducescatter against their analytic values;
process sets; the helpers; join, barrier and the size/rank ops."""

import numpy as np
import tensorflow as tf

import hora.tensorflow as hvd
from harness import run

hvd.init(process_sets='dynamic')
R, N = hvd.rank(), hvd.size()

REDUCED = [np.uint8, np.int8, np.int32, np.int64, np.float16, np.float32, np.float64]


def value(r, shape=(2, 3), dtype=np.float32):
    """Rank r's input: small integers (exact in every dtype, sums and products too)."""
    v = (np.arange(np.prod(shape)).reshape(shape) % 5 + r + 1)
    return v.astype(dtype)


def both(fn):
    """fn's result in eager mode and inside a tf.function (numpy)."""
    eager = fn()
    graph = tf.function(fn)()
    return tf.nest.map_structure(lambda t: t.numpy(), (eager, graph))


def test_basics():
    assert hvd.is_initialized()
    assert 0 <= R < N
    assert hvd.local_size() * hvd.cross_size() == N
    assert hvd.is_homogeneous()
    assert hvd.size_op().numpy() == N and hvd.rank_op().numpy() == R
    assert hvd.local_rank_op().numpy() == hvd.local_rank()
    assert hvd.local_size_op().numpy() == hvd.local_size()
    assert hvd.process_set_included_op().numpy() == 1
    assert hvd.process_set_included_op(12345).numpy() == -2
    assert hvd.gloo_built() and not hvd.mpi_built()
    hvd.init()  # a second init is harmless
    assert hvd.size() == N


def test_allreduce_ops_and_dtypes():
    for dtype in REDUCED:
        inputs = [value(r, dtype=dtype) for r in range(N)]
        x = tf.constant(inputs[R])
        for op, ref in ((hvd.Sum, np.sum), (hvd.Min, np.min), (hvd.Max, np.max),
                        (hvd.Product, np.prod)):
            want = ref(np.stack(inputs), axis=0).astype(dtype)
            for got in both(lambda: hvd.allreduce(x, op=op)):
                assert got.dtype == dtype and np.array_equal(got, want), (dtype, op, got, want)
        total = np.sum(np.stack(inputs).astype(np.float64), axis=0)
        want = (total / N).astype(dtype) if np.issubdtype(dtype, np.floating) else \
            np.trunc(total / N).astype(dtype)
        for got in both(lambda: hvd.allreduce(x)):  # Average is the default
            assert np.allclose(got.astype(np.float64), want.astype(np.float64),
                               rtol=1e-3), (dtype, got, want)


def test_allreduce_scaling_compression_and_names():
    inputs = [value(r, dtype=np.float64) for r in range(N)]
    x = tf.constant(inputs[R])
    want = np.sum(inputs, axis=0) * 0.5 * 3.0
    for got in both(lambda: hvd.allreduce(x, op=hvd.Sum, prescale_factor=0.5,
                                          postscale_factor=3.0, name='scaled')):
        assert np.allclose(got, want), (got, want)
    y = tf.constant(value(R, dtype=np.float32))
    got = hvd.allreduce(y, op=hvd.Sum, compression=hvd.Compression.fp16)
    assert got.dtype == tf.float32
    assert np.array_equal(got.numpy(), np.sum([value(r) for r in range(N)], axis=0))
    # Scalars and empty tensors.
    assert hvd.allreduce(tf.constant(float(R)), op=hvd.Sum).numpy() == sum(range(N))
    assert hvd.allreduce(tf.zeros([0, 4]), op=hvd.Sum).shape == (0, 4)
    # The same name again once the op is done (a training loop's names).
    for _ in range(3):
        assert hvd.allreduce(tf.constant([1.0]), op=hvd.Sum, name='again').numpy()[0] == N


def test_large_outputs_and_in_place():
    """Outputs of 1 MiB and more come from the kernels' buffer pool, and an input nothing else
    reads (a temporary inside tf.function) is reduced in place: results stay right while
    earlier results are alive, and a forwarded input's prescale and broadcast are right."""
    n = 300000  # float32: 1.2 MB, above the pool's 1 MiB
    inputs = [np.arange(n, dtype=np.float32) % 7 + r for r in range(N)]
    x = tf.constant(inputs[R])
    want = np.sum(inputs, axis=0)
    kept = [hvd.allreduce(x * float(k + 1), op=hvd.Sum, name='large.%d' % k) for k in range(4)]
    del kept[1]  # its buffer goes back to the pool and is handed out again below
    kept += [hvd.allreduce(x * float(5 + k), op=hvd.Sum, name='large.again.%d' % k)
             for k in range(2)]  # two outputs of one size: each needs a buffer of its own
    for got, k in zip(kept, [1, 3, 4, 5, 6]):
        assert np.array_equal(got.numpy(), want * k), k

    @tf.function
    def temporaries(v):
        # v * 3 and v + 1 are read by the op only: TensorFlow hands their buffers over.
        a = hvd.allreduce(v * 3.0, op=hvd.Sum, prescale_factor=2.0, name='inplace.a')
        b = hvd.broadcast(v + 1.0, root_rank=N - 1, name='inplace.b')
        return a, b, v
    a, b, v = temporaries(x)
    assert np.array_equal(a.numpy(), want * 6)
    assert np.array_equal(b.numpy(), inputs[N - 1] + 1)
    assert np.array_equal(v.numpy(), inputs[R])  # the input itself is untouched


def test_grouped_allreduce():
    xs = [tf.constant(value(R, (i + 1, 2), np.float32)) for i in range(4)]
    xs.append(tf.constant(value(R, (3,), np.int32)))  # a second dtype in the same group
    want = [np.sum([value(r, (i + 1, 2), np.float32) for r in range(N)], axis=0)
            for i in range(4)] + [np.sum([value(r, (3,), np.int32) for r in range(N)],
                                         axis=0).astype(np.int32)]
    for got in both(lambda: hvd.grouped_allreduce(xs, op=hvd.Sum)):
        assert len(got) == 5
        for g, w in zip(got, want):
            assert g.dtype == w.dtype and np.array_equal(g, w)


def test_allreduce_indexed_slices():
    values = tf.constant(value(R, (2, 3)))
    indices = tf.constant([R, R + 1], dtype=tf.int64)
    s = tf.IndexedSlices(values, indices, dense_shape=tf.constant([N + 1, 3], dtype=tf.int64))
    out = hvd.allreduce(s, op=hvd.Average)
    assert isinstance(out, tf.IndexedSlices)
    assert np.array_equal(out.indices.numpy(), np.concatenate([[r, r + 1] for r in range(N)]))
    assert np.allclose(out.values.numpy(),
                       np.concatenate([value(r, (2, 3)) for r in range(N)]) / N)
    dense = tf.convert_to_tensor(out).numpy()
    want = np.zeros((N + 1, 3), np.float32)
    for r in range(N):
        want[r:r + 2] += value(r, (2, 3)) / N
    assert np.allclose(dense, want)


def test_allgather():
    for dtype in REDUCED + [np.bool_, np.int16, np.uint16, np.complex64]:
        inputs = [value(r, (r + 1, 2), np.int64).astype(dtype) for r in range(N)]
        want = np.concatenate(inputs)
        for got in both(lambda: hvd.allgather(tf.constant(inputs[R]))):
            assert got.dtype == want.dtype and np.array_equal(got, want), (dtype, got, want)
    # A scalar gathers to a vector, as in Horovod.
    assert np.array_equal(hvd.allgather(tf.constant(R)).numpy(), np.arange(N))
    outs = hvd.grouped_allgather([tf.fill([R + 1], R), tf.fill([1, 2], float(R))])
    assert np.array_equal(outs[0].numpy(), np.concatenate([[r] * (r + 1) for r in range(N)]))
    assert np.array_equal(outs[1].numpy(), np.repeat(np.arange(N, dtype=np.float32), 2)
                          .reshape(N, 2))


def test_broadcast():
    for root in range(N):
        for dtype in (np.float32, np.int64, np.bool_, np.float16):
            x = tf.constant(value(R, (3, 2), np.int64).astype(dtype))
            want = value(root, (3, 2), np.int64).astype(dtype)
            for got in both(lambda: hvd.broadcast(x, root)):
                assert np.array_equal(got, want), (root, dtype)
    v = tf.Variable(value(R, (2, 2)))
    w = tf.Variable([R, R], dtype=tf.int64)
    out = hvd.broadcast_([v, w], N - 1)
    assert np.array_equal(v.numpy(), value(N - 1, (2, 2)))
    assert np.array_equal(w.numpy(), [N - 1, N - 1]) and len(out) == 2


def test_broadcast_variables_and_objects():
    vs = [tf.Variable(value(R, (2, 3))), tf.Variable(float(R)), tf.Variable([R] * 4)]
    hvd.broadcast_variables(vs, root_rank=0)
    assert np.array_equal(vs[0].numpy(), value(0, (2, 3)))
    assert vs[1].numpy() == 0.0 and np.array_equal(vs[2].numpy(), [0] * 4)
    obj = hvd.broadcast_object({'rank': R, 'list': list(range(R + 3))}, root_rank=N - 1)
    assert obj == {'rank': N - 1, 'list': list(range(N + 2))}
    assert hvd.broadcast_object_fn(root_rank=0)(('x', R)) == ('x', 0)
    assert hvd.allgather_object({'r': R, 's': 'x' * R}) == [{'r': r, 's': 'x' * r}
                                                            for r in range(N)]


def test_alltoall():
    # Rank r sends (i + 1) rows of value r*10+i to rank i.
    rows = [np.concatenate([np.full((i + 1, 2), r * 10 + i, np.float32) for i in range(N)])
            for r in range(N)]
    splits = [i + 1 for i in range(N)]
    for got, recv in both(lambda: hvd.alltoall(tf.constant(rows[R]), splits=splits)):
        want = np.concatenate([np.full((R + 1, 2), r * 10 + R, np.float32) for r in range(N)])
        assert np.array_equal(got, want) and list(recv) == [R + 1] * N
    x = tf.constant(np.arange(2 * N) + 100 * R)
    got = hvd.alltoall(x).numpy()  # equal splits
    assert np.array_equal(got, np.concatenate([[100 * r + 2 * R, 100 * r + 2 * R + 1]
                                               for r in range(N)]))


def test_reducescatter():
    for rows in (N, 2 * N + 1, 1):  # even, straddling hora's element blocks, fewer rows
        inputs = [value(r, (rows, 3), np.float32) for r in range(N)]
        total = np.sum(inputs, axis=0)
        start = R * (rows // N) + min(R, rows % N)
        count = rows // N + (1 if R < rows % N else 0)
        for op, want in ((hvd.Sum, total), (hvd.Average, total / N)):
            for got in both(lambda: hvd.reducescatter(tf.constant(inputs[R]), op=op)):
                assert np.allclose(got, want[start:start + count]), (rows, op, got)
    outs = hvd.grouped_reducescatter([tf.constant(value(R, (N, 2))), tf.constant(value(R, (N,)))],
                                     op=hvd.Sum)
    assert np.array_equal(outs[0].numpy(), np.sum([value(r, (N, 2)) for r in range(N)],
                                                  axis=0)[R:R + 1])
    assert np.array_equal(outs[1].numpy(), np.sum([value(r, (N,)) for r in range(N)],
                                                  axis=0)[R:R + 1])


def grad_of(fn, x):
    x = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = fn(x)
        # A loss whose gradient with respect to y differs per rank: (R + 1) * sum(y * w).
        w = tf.constant(np.arange(np.prod(y.shape), dtype=np.float32).reshape(y.shape) + 1)
        loss = float(R + 1) * tf.reduce_sum(y * w)
    return tape.gradient(loss, x).numpy(), w.numpy()


def test_gradients():
    x = value(R, (2, 3))
    # allreduce (Sum): dL/dx = allreduce_sum((R+1) w) = sum_r (r+1) w (Horovod's rule).
    g, w = grad_of(lambda t: hvd.allreduce(t, op=hvd.Sum), x)
    assert np.allclose(g, sum(r + 1 for r in range(N)) * w)
    g, w = grad_of(lambda t: hvd.allreduce(t, op=hvd.Average), x)
    assert np.allclose(g, np.mean([r + 1 for r in range(N)]) * w)
    # allgather: the averaged gradient, this rank's slice.
    xg = value(R, (R + 1, 2))
    g, w = grad_of(lambda t: hvd.allgather(t), xg)
    start = sum(r + 1 for r in range(R))
    avg = np.mean([r + 1 for r in range(N)])
    assert np.allclose(g, avg * w[start:start + R + 1])
    # broadcast: the averaged gradient on the root, zeros elsewhere.
    for root in range(N):
        g, w = grad_of(lambda t: hvd.broadcast(t, root), x)
        assert np.allclose(g, avg * w if R == root else 0 * w)
    # alltoall: the gradient comes back the way the rows went.
    xa = np.arange(2 * N, dtype=np.float32).reshape(N, 2) + R
    g, w = grad_of(lambda t: hvd.alltoall(t), xa)
    # Row i of this rank went to rank i as that rank's row R; its loss weight there is
    # (i + 1) * w[R].
    want = np.stack([(i + 1) * w[R] for i in range(N)])
    assert np.allclose(g, want), (g, want)
    # reducescatter (Sum): Horovod's gradient is the allgather of size * grad.
    xr = value(R, (N, 2))
    g, w = grad_of(lambda t: hvd.reducescatter(t, op=hvd.Sum), xr)
    want = np.concatenate([N * (r + 1) * w for r in range(N)])
    assert np.allclose(g, want), (g, want)


def test_process_sets():
    if N < 2:
        return
    ranks = [0, N - 1] if N > 2 else [N - 1]  # at -np 2, [0, 1] would be the global set
    ps = hvd.add_process_set(ranks)
    try:
        assert ps.size() == len(ranks) and ps.process_set_id > 0
        if ps.included():
            assert ps.rank() == ranks.index(R)
            got = hvd.allreduce(tf.constant([float(R)]), op=hvd.Sum, process_set=ps).numpy()
            assert got[0] == sum(ranks)
            gathered = hvd.allgather(tf.constant([R]), process_set=ps).numpy()
            assert list(gathered) == ranks
            b = hvd.broadcast(tf.constant([R]), N - 1, process_set=ps).numpy()
            assert list(b) == [N - 1]
            assert hvd.process_set_included_op(ps.process_set_id).numpy() == 1
            assert hvd.size_op(ps.process_set_id).numpy() == len(ranks)
        else:
            try:
                hvd.allreduce(tf.constant([1.0]), process_set=ps)
            except ValueError as e:
                assert 'not a member' in str(e)
            else:
                raise AssertionError('an op on a set without this rank was accepted')
            assert hvd.process_set_included_op(ps.process_set_id).numpy() == 0
        try:
            hvd.add_process_set(ranks)
        except ValueError as e:
            assert 'duplicate' in str(e)
        else:
            raise AssertionError('a duplicate set was accepted')
    finally:
        assert hvd.remove_process_set(ps)
    assert ps.process_set_id is None and not hvd.remove_process_set(hvd.global_process_set)


def test_join_and_barrier():
    # Ranks leave at different times; the last one to join is the highest rank here.
    for _ in range(R):
        pass
    hvd.barrier()
    if R == N - 1:
        got = hvd.allreduce(tf.constant([2.0]), op=hvd.Sum, name='after_join').numpy()
        # Every other rank has joined: they contribute zeros.
        assert got[0] == 2.0, got
    last = hvd.join()
    assert int(last.numpy()) == N - 1
    hvd.barrier()


run(globals())
