"""hora.mxnet at the job's size (run_mx.sh under horarun -np 1..3): every collective checked
exactly against NumPy on every rank's inputs (each rank computes the others', which depend on
the rank only), broadcast_parameters (deferred initialisation too), and DistributedTrainer
and DistributedOptimizer steps against one process training on the ranks' joint batch."""

import os
import sys
import traceback

import numpy as np
import mxnet as mx
from mxnet import autograd, gluon

import hora.mxnet as hvd

hvd.init()
R, N = hvd.rank(), hvd.size()
TYPES = [np.uint8, np.int8, np.int32, np.int64, np.float16, np.float32, np.float64]


def value(r, shape=(2, 3), dtype=np.float32):
    return (np.arange(np.prod(shape)).reshape(shape) % 5 + r + 1).astype(dtype)


def test_basics():
    assert hvd.is_initialized() and 0 <= R < N
    assert hvd.local_size() * hvd.cross_size() == N and hvd.gloo_built()


def test_allreduce():
    for dtype in TYPES:
        inputs = np.stack([value(r, dtype=dtype) for r in range(N)])
        x = mx.nd.array(inputs[R], dtype=dtype)
        for op, ref in ((hvd.Sum, np.sum), (hvd.Min, np.min), (hvd.Max, np.max),
                        (hvd.Product, np.prod)):
            got = hvd.allreduce(x, op=op, name='ar.%s.%d' % (np.dtype(dtype).name, op))
            want = ref(inputs, 0).astype(dtype)  # wrapped around, as hora's integers
            assert got.dtype == dtype and np.array_equal(got.asnumpy(), want), (dtype, op)
        assert np.array_equal(x.asnumpy(), inputs[R])  # allreduce leaves its input alone
        want = inputs.astype(np.float64).sum(0) / N
        want = want if np.issubdtype(dtype, np.floating) else np.trunc(want)
        hvd.allreduce_(x, name='ar_.%s' % np.dtype(dtype).name)  # Average, in place
        assert np.allclose(x.asnumpy().astype(np.float64), want, rtol=1e-3), dtype
    y = mx.nd.array(value(R, dtype=np.float64), dtype=np.float64)
    got = hvd.allreduce(y, average=False, prescale_factor=0.5, postscale_factor=3.0)
    assert np.array_equal(got.asnumpy(), sum(value(r, dtype=np.float64) for r in range(N)) * 1.5)
    outs = hvd.grouped_allreduce([y, y * 2], op=hvd.Sum, name='grouped')
    total = sum(value(r, dtype=np.float64) for r in range(N))
    assert np.array_equal(outs[0].asnumpy(), total) and np.array_equal(outs[1].asnumpy(),
                                                                        2 * total)


def test_allgather_and_broadcast():
    for dtype in TYPES + [np.bool_]:  # MXNet 1.9 has no int16 NDArray
        parts = [value(r, (r + 1, 2), np.int64).astype(dtype) for r in range(N)]
        got = hvd.allgather(mx.nd.array(parts[R], dtype=dtype), name='ag.%s' % np.dtype(
            dtype).name)
        assert got.dtype == dtype and np.array_equal(got.asnumpy(), np.concatenate(parts)), dtype
        root = N - 1
        x = mx.nd.array(value(R, dtype=np.int64).astype(dtype), dtype=dtype)
        got = hvd.broadcast(x, root, name='bc.%s' % np.dtype(dtype).name)
        assert np.array_equal(got.asnumpy(), value(root, dtype=np.int64).astype(dtype)), dtype
    x = mx.nd.array(value(R))
    assert hvd.broadcast_(x, 0, name='bc_') is x and np.array_equal(x.asnumpy(), value(0))
    assert hvd.broadcast_object({'rank': R}, root_rank=N - 1) == {'rank': N - 1}
    assert hvd.allgather_object(R * 10) == [r * 10 for r in range(N)]


def net(seed):
    mx.random.seed(seed)
    model = gluon.nn.HybridSequential()
    model.add(gluon.nn.Dense(5, activation='tanh'), gluon.nn.Dense(2))
    return model


def batch(r):
    rng = np.random.default_rng(50 + r)
    return (mx.nd.array(rng.normal(size=(4, 3))), mx.nd.array(rng.integers(0, 2, size=(4,))))


def flat(model):
    return np.concatenate([p.data().asnumpy().ravel()
                           for _, p in sorted(model.collect_params().items())])


def train(model, trainer, batches, steps=3):
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    for _ in range(steps):
        x = mx.nd.concat(*[b[0] for b in batches], dim=0)
        y = mx.nd.concat(*[b[1] for b in batches], dim=0)
        with autograd.record():
            loss = loss_fn(model(x), y)
        loss.backward()
        trainer.step(x.shape[0])  # this rank's batch: the trainer averages over the ranks


def test_broadcast_parameters_and_trainer():
    for kind in ('trainer', 'optimizer'):
        model = net(seed=R)  # different on every rank: the broadcast makes them rank 0's
        model.initialize(mx.init.Xavier())  # deferred: shapes are known at the first batch
        hvd.broadcast_parameters(model.collect_params(), root_rank=0, prefix=kind)
        sgd = mx.optimizer.SGD(learning_rate=0.1, momentum=0.5)
        if kind == 'trainer':
            trainer = hvd.DistributedTrainer(model.collect_params(), sgd, prefix=kind)
        else:
            trainer = gluon.Trainer(model.collect_params(), hvd.DistributedOptimizer(sgd),
                                    kvstore=None)
        train(model, trainer, [batch(R)])
        # One process, rank 0's initial weights, every rank's batch at once.
        ref = net(seed=0)
        ref.initialize(mx.init.Xavier())
        train(ref, gluon.Trainer(ref.collect_params(), mx.optimizer.SGD(
            learning_rate=0.1, momentum=0.5), kvstore=None), [batch(r) for r in range(N)])
        assert np.allclose(flat(model), flat(ref), rtol=1e-5, atol=1e-6), kind
        everyone = hvd.allgather_object(flat(model).tobytes(), name='weights.' + kind)
        assert all(w == everyone[0] for w in everyone), kind


def test_errors():
    try:
        hvd.allreduce(mx.nd.ones((2,)) if R == 0 else mx.nd.ones((3,)), name='mismatch')
        raise AssertionError('mismatched shapes were accepted')
    except hvd.HoraMismatchError as e:
        assert N > 1 and 'mismatch' in str(e), e
    except AssertionError:
        if N > 1:
            raise
    try:
        hvd.allreduce(mx.nd.ones((2,)), op=hvd.Adasum)
        raise AssertionError('Adasum was accepted')
    except NotImplementedError:
        pass


tests = [(n, f) for n, f in list(globals().items()) if n.startswith('test_') and callable(f)]
for name, fn in tests:
    try:
        fn()
    except Exception:
        print('FAIL %s (rank %d)' % (name, R), flush=True)
        traceback.print_exc()
        sys.stdout.flush()
        os._exit(1)
    print('ok %s (rank %d)' % (name, R), flush=True)
print('%d tests passed (rank %d)' % (len(tests), R), flush=True)
