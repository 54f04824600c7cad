"""hora.torch on CUDA tensors: every op, its result's device and values, and a few training steps
of a small CNN with SyncBatchNorm and DistributedOptimizer. Every rank of a horarun job runs the
same tests. The whole file is skipped where torch sees no GPU.

test/python/meson.build runs it at -np 1 (the NCCL path where libhora has NCCL) and at -np 2 with
HORA_GPU_OPERATIONS=host (both ranks on one GPU, the tensors staged through host memory);
scripts/gpu_check.sh runs the same on the GPU machine. HORA_GPU_OPERATIONS picks the path, and
the tests check the same results on both."""

import os

import pytest
import torch

import hora.torch as hvd
from test_collectives import contribution, reference  # exact small integers, CPU results

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason='torch sees no GPU')

DTYPES = [torch.uint8, torch.int8, torch.int32, torch.int64, torch.float16, torch.bfloat16,
          torch.float32, torch.float64]


@pytest.fixture(autouse=True)
def _init(world):
    yield


def device():
    """The GPU of this rank: its local rank's, or GPU 0 for ranks that share it (host path)."""
    if os.environ.get('HORA_GPU_OPERATIONS', '').lower() == 'host':
        return torch.device('cuda', hvd.local_rank() % torch.cuda.device_count())
    return torch.device('cuda', hvd.local_rank())


def test_path_is_reported():
    # The path a run takes is visible in its log (gpu_check.sh's report quotes it).
    path = os.environ.get('HORA_GPU_OPERATIONS') or ('nccl' if hvd.nccl_built() else 'host')
    print('rank %d: CUDA path %s on %s' % (hvd.rank(), path, device()))
    assert path in ('nccl', 'host')


@pytest.mark.parametrize('dtype', DTYPES)
@pytest.mark.parametrize('op', ['Sum', 'Average', 'Min', 'Max'])
def test_allreduce(dtype, op):
    op = getattr(hvd, op)
    t = contribution(hvd.rank(), dtype).to(device())
    out = hvd.allreduce(t, op=op, name='cuda.allreduce.%s.%s' % (dtype, op))
    assert out.device == t.device and out.dtype == dtype
    assert torch.equal(out.cpu(), reference(dtype, op))


def test_allreduce_in_place_and_non_contiguous():
    t = contribution(hvd.rank(), torch.float32, (4, 6)).to(device())
    view = t.t()  # non-contiguous
    hvd.allreduce_(view, op=hvd.Sum, name='cuda.allreduce_.t')
    want = sum(contribution(r, torch.float32, (4, 6)) for r in range(hvd.size()))
    assert torch.equal(t.cpu(), want)


def test_grouped_allreduce_and_async():
    ts = [contribution(hvd.rank(), torch.float32, (i + 1, 3)).to(device()) for i in range(4)]
    outs = hvd.grouped_allreduce(ts, op=hvd.Sum, name='cuda.grouped')
    for i, o in enumerate(outs):
        assert o.device == ts[i].device
        want = sum(contribution(r, torch.float32, (i + 1, 3)) for r in range(hvd.size()))
        assert torch.equal(o.cpu(), want)
    h = hvd.allreduce_async(ts[0], op=hvd.Max, name='cuda.async')
    assert torch.equal(hvd.synchronize(h).cpu(),
                       contribution(hvd.size() - 1, torch.float32, (1, 3)))


@pytest.mark.parametrize('dtype', [torch.uint8, torch.int64, torch.float16, torch.float32])
def test_allgather_uneven(dtype):
    rows = hvd.rank() + 1  # rank r sends r + 1 rows
    t = torch.full((rows, 5), hvd.rank() + 1).to(dtype).to(device())
    out = hvd.allgather(t, name='cuda.allgather.%s' % dtype)
    assert out.device == t.device and out.dtype == dtype
    want = torch.cat([torch.full((r + 1, 5), r + 1).to(dtype) for r in range(hvd.size())])
    assert torch.equal(out.cpu(), want)


def test_allgather_is_differentiable():
    # Every rank's incoming gradient is all ones. Horovod's backward pass averages it over the
    # ranks (1 on each row); a sum would give size().
    x = torch.full((2, 3), float(hvd.rank()), device=device(), requires_grad=True)
    hvd.allgather(x, name='cuda.allgather.grad').sum().backward()
    assert x.grad.device == x.device
    assert torch.equal(x.grad.cpu(), torch.ones(2, 3))


@pytest.mark.parametrize('root', [0, -1])
def test_broadcast(root):
    root = root % hvd.size()
    t = contribution(hvd.rank(), torch.float32).to(device())
    out = hvd.broadcast(t, root, name='cuda.broadcast.%d' % root)
    assert out.device == t.device
    assert torch.equal(out.cpu(), contribution(root, torch.float32))
    hvd.broadcast_(t, root, name='cuda.broadcast_.%d' % root)
    assert torch.equal(t.cpu(), contribution(root, torch.float32))


def test_alltoall_with_splits():
    n, me = hvd.size(), hvd.rank()
    # Rank me sends (i + me) % 3 + 1 rows to rank i, each row holding 100 * me + i.
    splits = [(i + me) % 3 + 1 for i in range(n)]
    rows = torch.cat([torch.full((s, 2), 100 * me + i) for i, s in enumerate(splits)])
    t = rows.to(torch.float32).to(device())
    out, received = hvd.alltoall(t, splits=splits, name='cuda.alltoall')
    assert out.device == t.device
    want_splits = [(me + j) % 3 + 1 for j in range(n)]
    assert received.tolist() == want_splits
    want = torch.cat([torch.full((s, 2), 100 * j + me) for j, s in enumerate(want_splits)])
    assert torch.equal(out.cpu(), want.to(torch.float32))


@pytest.mark.parametrize('op', ['Sum', 'Average'])
def test_reducescatter(op):
    op = getattr(hvd, op)
    n, me = hvd.size(), hvd.rank()
    t = contribution(me, torch.float32, (2 * n + 1, 3)).to(device())
    out = hvd.reducescatter(t, op=op, name='cuda.reducescatter.%d' % op)
    assert out.device == t.device
    total = sum(contribution(r, torch.float32, (2 * n + 1, 3)) for r in range(n))
    if op == hvd.Average:
        total = total / n
    rows = 2 * n + 1
    start = me * (rows // n) + min(me, rows % n)
    count = rows // n + (1 if me < rows % n else 0)
    assert torch.allclose(out.cpu(), total[start:start + count])


def test_broadcast_object_stays_on_cpu():
    obj = {'rank': hvd.rank(), 'tensor': torch.arange(3)}
    got = hvd.broadcast_object(obj, root_rank=0)
    assert got['rank'] == 0 and torch.equal(got['tensor'], torch.arange(3))


def test_training_steps_small_cnn():
    """A small CNN with SyncBatchNorm learns a synthetic task on the GPU: the loss falls and
    every rank ends with the same parameters."""
    torch.manual_seed(1234)
    dev = device()
    model = torch.nn.Sequential(
        torch.nn.Conv2d(1, 8, 3, padding=1), hvd.SyncBatchNorm(8), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(4), torch.nn.Flatten(), torch.nn.Linear(8 * 16, 4)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.05 * hvd.size(), momentum=0.9)
    opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(opt, root_rank=0)

    # The class is the quadrant of the image's one bright pixel; each rank its own batches.
    g = torch.Generator().manual_seed(100 + hvd.rank())
    losses = []
    for step in range(40):
        y = torch.randint(0, 4, (32,), generator=g)
        x = torch.zeros(32, 1, 8, 8)
        for i, c in enumerate(y.tolist()):
            r = torch.randint(0, 4, (2,), generator=g)
            x[i, 0, (c // 2) * 4 + r[0], (c % 2) * 4 + r[1]] = 1.0
        x, y = x.to(dev), y.to(dev)
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(hvd.allreduce(loss.detach(), name='cuda.loss').item())
    print('rank %d: loss %.3f -> %.3f' % (hvd.rank(), losses[0], losses[-1]))
    assert sum(losses[-5:]) / 5 < 0.5 * losses[0]
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    assert flat.device == dev
    assert torch.equal(hvd.broadcast(flat, 0, name='cuda.params'), flat)
