"""hora.torch's collectives, run by every rank of a horarun job (-np 1..4): each test computes
what every rank contributes and checks the exact result."""

import pytest
import torch

import hora.torch as hvd

DTYPES = [torch.uint8, torch.int8, torch.int32, torch.int64, torch.float16, torch.bfloat16,
          torch.float32, torch.float64]


@pytest.fixture(autouse=True)
def _init(world):
    yield


def contribution(r, dtype, shape=(3, 4)):
    """Rank r's tensor: small integers, exact in every dtype (also their sum over 4 ranks)."""
    n = 1
    for s in shape:
        n *= s
    return ((torch.arange(n) % 5) + r + 1).reshape(shape).to(dtype)


def reference(dtype, op, shape=(3, 4)):
    ts = [contribution(r, torch.float64, shape) for r in range(hvd.size())]
    stack = torch.stack(ts)
    if op == hvd.Sum:
        out = stack.sum(0)
    elif op == hvd.Average:
        out = stack.sum(0) / hvd.size()
        if not dtype.is_floating_point:
            out = torch.trunc(out)
    elif op == hvd.Min:
        out = stack.min(0).values
    elif op == hvd.Max:
        out = stack.max(0).values
    else:
        out = stack.prod(0)
    return out.to(dtype)


def test_topology():
    assert 0 <= hvd.rank() < hvd.size()
    assert 0 <= hvd.local_rank() < hvd.local_size()
    assert 0 <= hvd.cross_rank() < hvd.cross_size()
    assert hvd.is_initialized()
    assert hvd.is_homogeneous()
    assert not hvd.mpi_built() and hvd.gloo_built()
    ranks = hvd.allgather_object(hvd.rank())
    assert ranks == list(range(hvd.size()))


@pytest.mark.parametrize('dtype', DTYPES, ids=str)
@pytest.mark.parametrize('op', ['Sum', 'Average', 'Min', 'Max', 'Product'])
def test_allreduce_every_dtype_and_op(dtype, op):
    op = getattr(hvd, op)
    if op == hvd.Product and dtype in (torch.int8, torch.uint8, torch.float16, torch.bfloat16):
        shape = (2, 2)  # keep products of small numbers in range and exact
    else:
        shape = (3, 4)
    t = contribution(hvd.rank(), dtype, shape)
    before = t.clone()
    out = hvd.allreduce(t, op=op, name='ar.%s.%s' % (dtype, op))
    assert torch.equal(t, before), 'allreduce must not modify its input'
    assert out.dtype == dtype and out.shape == t.shape
    assert torch.equal(out, reference(dtype, op, shape))


@pytest.mark.parametrize('dtype', DTYPES, ids=str)
def test_allreduce_in_place(dtype):
    t = contribution(hvd.rank(), dtype)
    ptr = t.data_ptr()
    out = hvd.allreduce_(t, op=hvd.Sum)
    assert out is t and t.data_ptr() == ptr
    assert torch.equal(t, reference(dtype, hvd.Sum))


def test_allreduce_non_contiguous_in_place_and_out_of_place():
    base = contribution(hvd.rank(), torch.float32, (4, 6))
    view = base.t()  # non-contiguous view
    assert not view.is_contiguous()
    out = hvd.allreduce(view, op=hvd.Sum)
    assert torch.equal(out, reference(torch.float32, hvd.Sum, (4, 6)).t())
    hvd.allreduce_(view, op=hvd.Sum)
    assert torch.equal(base, reference(torch.float32, hvd.Sum, (4, 6)))
    # A strided slice, in place: only the slice changes.
    base = torch.zeros(8) + hvd.rank() + 1
    hvd.allreduce_(base[::2], op=hvd.Sum)
    total = sum(r + 1 for r in range(hvd.size()))
    assert base[::2].tolist() == [float(total)] * 4
    assert base[1::2].tolist() == [float(hvd.rank() + 1)] * 4


def test_allreduce_average_default_and_deprecated_flag():
    t = torch.full((5,), float(hvd.rank()))
    expect = sum(range(hvd.size())) / hvd.size()
    assert torch.allclose(hvd.allreduce(t), torch.full((5,), expect))
    assert torch.allclose(hvd.allreduce(t, average=False), torch.full((5,), expect * hvd.size()))


def test_allreduce_pre_and_postscale():
    t = torch.ones(4) * (hvd.rank() + 1)
    out = hvd.allreduce(t, op=hvd.Sum, prescale_factor=2.0, postscale_factor=0.5)
    assert torch.allclose(out, torch.ones(4) * sum(r + 1 for r in range(hvd.size())))


def test_allreduce_fp16_compression():
    t = torch.full((16,), 0.25 * (hvd.rank() + 1))
    out = hvd.allreduce(t, op=hvd.Sum, compression=hvd.Compression.fp16)
    assert out.dtype == torch.float32
    assert torch.allclose(out, torch.full((16,), 0.25 * sum(r + 1 for r in range(hvd.size()))))


def test_allreduce_autograd():
    x = torch.full((3,), float(hvd.rank() + 1), requires_grad=True)
    y = hvd.allreduce(x, op=hvd.Sum)
    y.sum().backward()
    assert torch.equal(x.grad, torch.full((3,), float(hvd.size())))


def test_allreduce_async_handles_in_rank_dependent_order():
    # Named async ops may be submitted in a different order on every rank.
    names = ['async.%d' % i for i in range(6)]
    order = names[hvd.rank() % 2::2] + names[1 - hvd.rank() % 2::2]
    if hvd.rank() % 2:
        order.reverse()
    tensors = {n: torch.full((10 + i,), float(i + hvd.rank())) for i, n in enumerate(names)}
    handles = {n: hvd.allreduce_async(tensors[n], name=n, op=hvd.Sum) for n in order}
    in_place = hvd.allreduce_async_(torch.ones(3), name='async.inplace', op=hvd.Sum)
    for i, n in enumerate(names):
        out = hvd.synchronize(handles[n])
        expect = sum(float(i + r) for r in range(hvd.size()))
        assert torch.equal(out, torch.full((10 + i,), expect))
    assert torch.equal(hvd.synchronize(in_place), torch.full((3,), float(hvd.size())))


def test_poll_becomes_true():
    h = hvd.allreduce_async(torch.ones(100), name='poll.me', op=hvd.Sum)
    import time
    for _ in range(3000):
        if hvd.poll(h):
            break
        time.sleep(0.01)
    assert hvd.poll(h)
    assert torch.equal(hvd.synchronize(h), torch.full((100,), float(hvd.size())))
    with pytest.raises(ValueError):
        hvd.synchronize(h)  # a handle is synchronized once


@pytest.mark.parametrize('in_place', [False, True])
def test_grouped_allreduce(in_place):
    ts = [contribution(hvd.rank(), torch.float32, (i + 1, 3)) for i in range(3)]
    if in_place:
        outs = hvd.grouped_allreduce_(ts, op=hvd.Sum)
        assert all(o is t for o, t in zip(outs, ts))
    else:
        outs = hvd.synchronize(hvd.grouped_allreduce_async(ts, op=hvd.Sum))
        outs2 = hvd.grouped_allreduce(ts, op=hvd.Sum)
        assert all(torch.equal(a, b) for a, b in zip(outs, outs2))
    for i, o in enumerate(outs):
        assert torch.equal(o, reference(torch.float32, hvd.Sum, (i + 1, 3)))
    xs = [torch.ones(2, requires_grad=True), torch.ones(3, requires_grad=True)]
    ys = hvd.grouped_allreduce(xs, op=hvd.Sum)
    (ys[0].sum() + 2 * ys[1].sum()).backward()
    assert torch.equal(xs[0].grad, torch.full((2,), float(hvd.size())))
    assert torch.equal(xs[1].grad, torch.full((3,), 2.0 * hvd.size()))
    h = hvd.grouped_allreduce_async_([torch.ones(2), torch.ones(3)], op=hvd.Sum)
    a, b = hvd.synchronize(h)
    assert torch.equal(b, torch.full((3,), float(hvd.size())))


@pytest.mark.parametrize('dtype', DTYPES, ids=str)
def test_allgather_every_dtype_with_different_first_dims(dtype):
    r = hvd.rank()
    t = torch.full((r + 1, 2, 3), r + 1).to(dtype)
    out = hvd.allgather(t)
    assert out.shape == (sum(i + 1 for i in range(hvd.size())), 2, 3) and out.dtype == dtype
    expect = torch.cat([torch.full((i + 1, 2, 3), i + 1).to(dtype) for i in range(hvd.size())])
    assert torch.equal(out, expect)
    h = hvd.allgather_async(t.transpose(1, 2))  # non-contiguous
    assert torch.equal(hvd.synchronize(h), expect.transpose(1, 2))


def test_allgather_autograd():
    x = torch.ones(2, 3, requires_grad=True)
    y = hvd.allgather(x * (hvd.rank() + 1))
    (y * 2).sum().backward()
    # Horovod's backward averages the incoming gradients over the ranks.
    assert torch.equal(x.grad, torch.full((2, 3), 2.0 * (hvd.rank() + 1)))


@pytest.mark.parametrize('dtype', DTYPES, ids=str)
def test_broadcast_every_dtype_every_root(dtype):
    for root in range(hvd.size()):
        t = contribution(hvd.rank(), dtype)
        before = t.clone()
        out = hvd.broadcast(t, root, name='bc.%s.%d' % (dtype, root))
        assert torch.equal(out, contribution(root, dtype))
        assert torch.equal(t, before)
        hvd.broadcast_(t, root)
        assert torch.equal(t, contribution(root, dtype))
        t = contribution(hvd.rank(), dtype)
        assert torch.equal(hvd.synchronize(hvd.broadcast_async(t, root)), contribution(root, dtype))
        hvd.synchronize(hvd.broadcast_async_(t, root))
        assert torch.equal(t, contribution(root, dtype))


def test_broadcast_non_contiguous_in_place():
    base = contribution(hvd.rank(), torch.float64, (3, 5))
    hvd.broadcast_(base.t(), 0)
    assert torch.equal(base, contribution(0, torch.float64, (3, 5)))


@pytest.mark.parametrize('dtype', DTYPES, ids=str)
def test_alltoall_every_dtype(dtype):
    n, r = hvd.size(), hvd.rank()
    # rank r sends (i + 1) rows to rank i, each row holding 10*r + i.
    splits = [i + 1 for i in range(n)]
    rows = torch.cat([torch.full((i + 1, 2), 10 * r + i) for i in range(n)]).to(dtype)
    out, received = hvd.alltoall(rows, splits=splits)
    assert received.tolist() == [r + 1] * n
    expect = torch.cat([torch.full((r + 1, 2), 10 * s + r) for s in range(n)]).to(dtype)
    assert torch.equal(out, expect)
    # Without splits, the first dimension is split evenly.
    even = torch.arange(2 * n).to(dtype) + 100 * r
    got = hvd.alltoall(even)
    assert torch.equal(got, torch.tensor([100 * s + 2 * r + k for s in range(n) for k in range(2)])
                       .to(dtype))
    out2, rec2 = hvd.synchronize(hvd.alltoall_async(rows, splits=torch.tensor(splits)))
    assert torch.equal(out2, expect) and rec2.dtype == torch.int32


@pytest.mark.parametrize('dtype', DTYPES, ids=str)
@pytest.mark.parametrize('rows', [4, 5, 7])
def test_reducescatter(dtype, rows):
    n, r = hvd.size(), hvd.rank()
    t = contribution(r, dtype, (rows, 3))
    full = reference(dtype, hvd.Sum, (rows, 3))
    mine = rows // n + (1 if r < rows % n else 0)
    start = r * (rows // n) + min(r, rows % n)
    out = hvd.reducescatter(t, op=hvd.Sum)
    assert torch.equal(out, full[start:start + mine])
    out = hvd.synchronize(hvd.reducescatter_async(t, op=hvd.Sum))
    assert torch.equal(out, full[start:start + mine])


def test_reducescatter_default_average():
    n = hvd.size()
    t = torch.full((2 * n, 2), float(hvd.rank()))
    out = hvd.reducescatter(t)
    assert torch.allclose(out, torch.full((2, 2), sum(range(n)) / n))


def test_barrier_and_join():
    hvd.barrier()
    last = hvd.join()
    assert 0 <= last < hvd.size()
    assert hvd.allgather_object(last) == [last] * hvd.size()


def test_broadcast_and_allgather_object():
    obj = {'rank': hvd.rank(), 'payload': list(range(hvd.rank() * 50))}
    got = hvd.broadcast_object(obj, root_rank=hvd.size() - 1)
    assert got == {'rank': hvd.size() - 1, 'payload': list(range((hvd.size() - 1) * 50))}
    every = hvd.allgather_object(obj)
    assert [o['rank'] for o in every] == list(range(hvd.size()))
    assert every[hvd.rank()] == obj


def test_broadcast_parameters_and_optimizer_state():
    torch.manual_seed(1234 + hvd.rank())
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3))
    opt = torch.optim.SGD(model.parameters(), lr=0.1 * (hvd.rank() + 1), momentum=0.9)
    if hvd.rank() == 0:
        model(torch.randn(8, 4)).sum().backward()
        opt.step()  # only the root has momentum buffers and a batchnorm counter
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    states = hvd.allgather_object({k: v.clone() for k, v in model.state_dict().items()})
    for s in states:
        for k, v in s.items():
            assert torch.equal(v, states[0][k]), k
    assert opt.param_groups[0]['lr'] == pytest.approx(0.1)
    bufs = hvd.allgather_object([opt.state[p]['momentum_buffer'] for p in model.parameters()])
    for b in bufs:
        assert all(torch.equal(x, y) for x, y in zip(b, bufs[0]))
    # named_parameters() form
    torch.manual_seed(99 + hvd.rank())
    other = torch.nn.Linear(3, 2)
    hvd.broadcast_parameters(list(other.named_parameters()), root_rank=hvd.size() - 1)
    ws = hvd.allgather_object(other.weight.detach().clone())
    assert all(torch.equal(w, ws[0]) for w in ws)


def test_mismatched_shapes_raise_naming_ranks_and_shapes():
    if hvd.size() < 2:
        pytest.skip('needs two ranks')
    t = torch.ones(hvd.rank() + 2, 3)
    with pytest.raises(hvd.HoraMismatchError) as err:
        hvd.allreduce(t, name='mismatched')
    msg = str(err.value)
    assert 'mismatched' in msg and 'rank' in msg
    assert str(list(t.shape)) in msg
    # The engine stays usable after a mismatch.
    assert torch.equal(hvd.allreduce(torch.ones(2), op=hvd.Sum), torch.full((2,), float(hvd.size())))


def test_unsupported_dtype_is_a_type_error():
    with pytest.raises(TypeError, match='torch.bool'):
        hvd.allreduce(torch.ones(3, dtype=torch.bool))
