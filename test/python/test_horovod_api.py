"""Horovod's API names and numbers on hora.torch, run by every rank of a horarun job
(-np 1..4): reduce-op constants, cloudpickled objects and a root's serialization error,
grouped_allgather / grouped_reducescatter, check_extension and the sync_batch_norm module. Each
test computes every rank's contribution in this process and compares the exact result."""

import json
import pickle
import subprocess
import sys
import threading
import types

import pytest
import torch

import hora.torch as hvd

# horovod/common/basics.py's horovod_reduce_op_* (Horovod 0.28.1).
HOROVOD_OPS = {'Average': 0, 'Sum': 1, 'Adasum': 2, 'Min': 3, 'Max': 4, 'Product': 5}


@pytest.fixture(autouse=True)
def _init(world):
    yield


def contribution(r, shape):
    """Rank r's tensor: small integers, exact in float64 (also sums and products of 4)."""
    n = 1
    for s in shape:
        n *= s
    return ((torch.arange(n, dtype=torch.float64) % 5) + r + 1).reshape(shape)


def everyone(shape):
    return torch.stack([contribution(r, shape) for r in range(hvd.size())])


def block(full, r, n):
    """Rank r's block of first-dimension slices (the first rows % n ranks get one more)."""
    rows = full.shape[0]
    start = r * (rows // n) + min(r, rows % n)
    return full[start:start + rows // n + (1 if r < rows % n else 0)]


# --- 1. reduce-op constants -----------------------------------------------------------------

def _horovods_ops():
    """Horovod's values from horovod.torch itself when it is importable (in a child process:
    its libraries must not share this one with hora's), else the literal values."""
    code = ('import json, horovod.torch as h; print(json.dumps({n: getattr(h, n) for n in '
            '%r}))' % (sorted(HOROVOD_OPS),))
    try:
        out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                             timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return HOROVOD_OPS
    if out.returncode != 0:
        return HOROVOD_OPS
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_op_constants_are_horovods():
    ops = _horovods_ops()
    assert ops == HOROVOD_OPS
    for n, v in ops.items():
        assert getattr(hvd, n) == v, n
        assert getattr(hvd.mpi_ops, n) == v, n


@pytest.mark.parametrize('op,reduce', [(0, lambda s: s.sum(0) / s.shape[0]),
                                        (1, lambda s: s.sum(0)),
                                        (3, lambda s: s.min(0).values),
                                        (4, lambda s: s.max(0).values),
                                        (5, lambda s: s.prod(0))])
def test_ops_by_number(op, reduce):
    shape = (3, 4)
    expected = reduce(everyone(shape))
    t = contribution(hvd.rank(), shape)
    assert torch.equal(hvd.allreduce(t, op=op, name='num.%d' % op), expected)
    inplace = t.clone()
    hvd.allreduce_(inplace, op=op, name='num_.%d' % op)
    assert torch.equal(inplace, expected)
    outs = hvd.grouped_allreduce([t, t * 2], op=op, name='gnum.%d' % op)
    assert torch.equal(outs[0], expected)
    assert torch.equal(outs[1], reduce(everyone(shape) * 2))
    rows = 2 * hvd.size()
    full = reduce(everyone((rows, 2)))
    out = hvd.reducescatter(contribution(hvd.rank(), (rows, 2)), op=op, name='rsnum.%d' % op)
    assert torch.equal(out, block(full, hvd.rank(), hvd.size()))


def test_op_one_sums():
    t = torch.full((5,), float(hvd.rank() + 1))
    n = hvd.size()
    assert torch.equal(hvd.allreduce(t, op=1), torch.full((5,), float(n * (n + 1) // 2)))
    numpy = pytest.importorskip('numpy')
    assert torch.equal(hvd.allreduce(t, op=numpy.int64(1), name='op.numpy'),
                       torch.full((5,), float(n * (n + 1) // 2)))


def test_average_flag_still_maps():
    t = torch.full((2,), float(hvd.rank()))
    n = hvd.size()
    assert torch.equal(hvd.allreduce(t, average=False), torch.full((2,), float(sum(range(n)))))
    assert torch.allclose(hvd.allreduce(t, average=True), torch.full((2,), sum(range(n)) / n))


def test_reducescatter_adasum_and_unknown_ops_are_refused_before_anything_is_submitted():
    t = torch.ones(4)
    # The allreduces take Adasum (test_adasum.py); the reducescatters still refuse it.
    calls = [lambda: hvd.reducescatter(torch.ones(hvd.size()), op=hvd.Adasum),
             lambda: hvd.reducescatter_async(torch.ones(hvd.size()), op=hvd.Adasum),
             lambda: hvd.grouped_reducescatter([torch.ones(hvd.size())], op=hvd.Adasum),
             lambda: hvd.grouped_reducescatter_async([torch.ones(hvd.size())], op=hvd.Adasum)]
    for call in calls:
        with pytest.raises(NotImplementedError, match='Adasum'):
            call()
    for bad in (99, -1, 'sum', None.__class__, True, 1.0):
        with pytest.raises(ValueError, match='unknown reduce op'):
            hvd.allreduce(t, op=bad)
    # Nothing was submitted: the next collective still matches on every rank.
    n = hvd.size()
    assert torch.equal(hvd.allreduce(t, op=hvd.Sum, name='after.adasum'), torch.full((4,), n * 1.))


# --- 2. objects -----------------------------------------------------------------------------

def test_broadcast_object_lambda_and_closure():
    root = hvd.size() - 1
    base = 10 * (hvd.rank() + 1)   # differs per rank: the root's closure must win

    def make():
        def f(x):
            return x * base
        return f
    obj = {'f': make(), 'g': lambda x: x + base} if hvd.rank() == root else None
    got = hvd.broadcast_object(obj, root_rank=root, name='bcast.closure')
    root_base = 10 * (root + 1)
    assert got['f'](3) == 3 * root_base
    assert got['g'](3) == 3 + root_base


def test_allgather_object_closures():
    r = hvd.rank()
    got = hvd.allgather_object((lambda x: x + r, types.SimpleNamespace(rank=r)),
                               name='gather.closure')
    assert [f(100) for f, _ in got] == [100 + i for i in range(hvd.size())]
    assert [ns.rank for _, ns in got] == list(range(hvd.size()))


def test_broadcast_object_root_serialization_error_on_every_rank():
    root = hvd.size() // 2
    obj = threading.Lock() if hvd.rank() == root else None
    with pytest.raises(pickle.PicklingError) as info:
        hvd.broadcast_object(obj, root_rank=root, name='bcast.unpicklable')
    msg = str(info.value)
    assert 'root rank %d failed to serialize' % root in msg
    assert 'lock' in msg
    assert 'shutdown' not in msg
    # Every rank went through the same collectives: the job carries on.
    assert hvd.broadcast_object(hvd.rank() * 7, root_rank=root, name='bcast.after') == root * 7


def test_allgather_object_serialization_error_on_every_rank():
    bad = hvd.size() - 1
    obj = threading.Lock() if hvd.rank() == bad else hvd.rank()
    with pytest.raises(pickle.PicklingError) as info:
        hvd.allgather_object(obj, name='gather.unpicklable')
    msg = str(info.value)
    assert 'rank %d failed to serialize' % bad in msg
    assert 'lock' in msg
    for r in range(bad):
        assert 'rank %d failed' % r not in msg
    assert hvd.allgather_object(hvd.rank(), name='gather.after') == list(range(hvd.size()))


def test_broadcast_optimizer_state_still_works():
    model = torch.nn.Linear(3, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1 * (hvd.rank() + 1), momentum=0.9)
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    assert opt.param_groups[0]['lr'] == pytest.approx(0.1)


# --- 3. grouped allgather / reducescatter, check_extension, sync_batch_norm ----------------

def _gather_inputs(r):
    """Three tensors whose first dimension differs per rank, one of them empty on rank 0."""
    return [contribution(r, (r + 1, 3)), contribution(r + 7, (2, 2, 2)),
            contribution(r, (r, 4))]


def test_grouped_allgather():
    n, r = hvd.size(), hvd.rank()
    expected = [torch.cat([_gather_inputs(q)[i] for q in range(n)]) for i in range(3)]
    mine = _gather_inputs(r)
    before = [t.clone() for t in mine]
    outs = hvd.grouped_allgather(mine, name='gag')
    assert len(outs) == 3
    for o, e in zip(outs, expected):
        assert torch.equal(o, e)
    handle = hvd.grouped_allgather_async(mine)   # one handle for the whole list
    assert isinstance(handle, int)
    outs = hvd.synchronize(handle)
    for o, e in zip(outs, expected):
        assert torch.equal(o, e)
    for t, b in zip(mine, before):
        assert torch.equal(t, b)
    assert hvd.grouped_allgather([]) == []


def test_grouped_allgather_grad():
    n, r = hvd.size(), hvd.rank()
    xs = [contribution(r, (r + 1, 2)).requires_grad_(), contribution(r, (2, 3)).requires_grad_()]
    outs = hvd.grouped_allgather(xs, name='gag.grad')
    # loss = sum(out_i * w_i) on every rank, w_i the same everywhere; Horovod's backward averages
    # the ranks' gradients (w_i on each), then each rank keeps its slices.
    ws = [torch.arange(o.numel(), dtype=torch.float64).reshape(o.shape) for o in outs]
    sum(torch.sum(o * w) for o, w in zip(outs, ws)).backward()
    offsets = [sum(q + 1 for q in range(r)), 2 * r]
    for x, w, off in zip(xs, ws, offsets):
        assert torch.equal(x.grad, w[off:off + x.shape[0]])


@pytest.mark.parametrize('op', [hvd.Sum, hvd.Average, hvd.Max])
def test_grouped_reducescatter(op):
    n, r = hvd.size(), hvd.rank()
    shapes = [(2 * n, 3), (2 * n + 1, 2), (n + 3,), (5, 2, 2)]
    reduce = {hvd.Sum: lambda s: s.sum(0), hvd.Average: lambda s: s.sum(0) / n,
              hvd.Max: lambda s: s.max(0).values}[op]
    expected = [block(reduce(everyone(s)), r, n) for s in shapes]
    mine = [contribution(r, s) for s in shapes]
    outs = hvd.grouped_reducescatter(mine, op=op, name='grs.%d' % op)
    assert len(outs) == len(shapes)
    for o, e in zip(outs, expected):
        assert torch.equal(o, e)
    handle = hvd.grouped_reducescatter_async(mine, op=op)
    assert isinstance(handle, int)
    for o, e in zip(hvd.synchronize(handle), expected):
        assert torch.equal(o, e)
    # Each matches reducescatter() of the tensor alone.
    for t, e in zip(mine, expected):
        assert torch.equal(hvd.reducescatter(t, op=op), e)


def test_grouped_reducescatter_default_average_and_scaling():
    n, r = hvd.size(), hvd.rank()
    ts = [torch.full((2 * n, 2), float(r)), torch.full((n,), float(r + 1))]
    outs = hvd.grouped_reducescatter(ts)
    assert torch.allclose(outs[0], torch.full((2, 2), sum(range(n)) / n))
    assert torch.allclose(outs[1], torch.full((1,), sum(range(1, n + 1)) / n))
    outs = hvd.grouped_reducescatter(ts, op=hvd.Sum, prescale_factor=2.0, postscale_factor=0.25)
    assert torch.allclose(outs[0], torch.full((2, 2), sum(range(n)) * 0.5))
    assert hvd.grouped_reducescatter([]) == []


def test_grouped_reducescatter_grad():
    n, r = hvd.size(), hvd.rank()
    xs = [contribution(r, (2 * n, 2)).requires_grad_(), contribution(r, (n,)).requires_grad_()]
    outs = hvd.grouped_reducescatter(xs, op=hvd.Sum)
    # loss_q = sum(out_q * (q + 1)) on rank q. Horovod's backward for op=Sum allgathers every
    # rank's incoming gradient times size(): n * (owner of the slice + 1).
    sum(torch.sum(o) for o in outs).mul(r + 1).backward()
    for x in xs:
        owners = torch.cat([torch.full((x.shape[0] // n,), float(n * (q + 1)),
                                       dtype=torch.float64) for q in range(n)])
        assert torch.equal(x.grad, owners.reshape(-1, *([1] * (x.dim() - 1))).expand_as(x))


def test_check_extension_and_modules():
    assert hvd.check_extension('hora.torch', 'HOROVOD_WITH_PYTORCH', hvd.__file__,
                               'mpi_lib_v2') is None
    assert isinstance(hvd.sync_batch_norm, types.ModuleType)
    assert hvd.sync_batch_norm.SyncBatchNorm is hvd.SyncBatchNorm
    assert hvd.mpi_ops.Adasum == 2


def test_distributed_optimizer_refuses_adasum_when_built():
    model = torch.nn.Linear(2, 1)
    with pytest.raises(ValueError, match='unknown reduce op'):
        hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                 named_parameters=model.named_parameters(), op=99)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters(), op=1)
    model.weight.data.fill_(0.)
    model.bias.data.fill_(0.)
    model(torch.full((1, 2), float(hvd.rank() + 1))).sum().backward()
    opt.step()   # op=1 (Sum): the weight's gradient is the sum of every rank's input
    n = hvd.size()
    assert torch.allclose(model.weight.data, torch.full((1, 2), -0.1 * n * (n + 1) / 2))
    assert torch.allclose(model.bias.data, torch.full((1,), -0.1 * n))
