"""hora.torch.SyncBatchNorm, run by every rank of a horarun job (-np 1..4): each rank normalizes
its own batch (of a size that differs per rank, zero included), and the output, the gradients and
the running statistics must equal those of torch.nn.BatchNorm*d on the concatenation of every
rank's batch. Every rank builds every rank's batch (they are deterministic) to compute that
reference locally."""

import os

import pytest
import torch

import hora.torch as hvd
from hora.torch.sync_batch_norm import SyncBatchNorm

C = 3
TOL = dict(rtol=1e-9, atol=1e-10)  # float64 throughout, except in test_low_precision

needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason='torch sees no GPU')
DEVICES = ['cpu', pytest.param('cuda', marks=needs_gpu)]


@pytest.fixture(autouse=True)
def _init(world):
    yield


def device(kind):
    if kind == 'cpu':
        return torch.device('cpu')
    # As in test_cuda.py: a GPU per rank, except on the host path, where ranks may share one.
    # Every rank of the (one-host) job takes the same decision.
    shared = hvd.local_size() > torch.cuda.device_count()
    if shared and os.environ.get('HORA_GPU_OPERATIONS', '').lower() != 'host':
        pytest.skip('%d ranks, %d GPUs: ranks would share a GPU off the host path'
                    % (hvd.local_size(), torch.cuda.device_count()))
    return torch.device('cuda', hvd.local_rank() % torch.cuda.device_count())


def batch_size(r, sizes):
    return sizes[r % len(sizes)]


def batch(r, step, n, spatial, dtype=torch.float64):
    """Rank r's input and output weights at a step: channels with different means (large
    against their spread, so that a naive E[x^2] - E[x]^2 would lose digits) and scales."""
    g = torch.Generator().manual_seed(1000 * step + r)
    shape = (n, C) + tuple(spatial)
    view = [1, C] + [1] * len(spatial)
    x = torch.randn(shape, generator=g, dtype=torch.float64)
    x = x * torch.tensor([1.0, 0.5, 3.0], dtype=torch.float64).view(view)
    x = x + torch.tensor([50.0, -2.0, 0.25], dtype=torch.float64).view(view)
    w = torch.randn(shape, generator=g, dtype=torch.float64)
    return x.to(dtype), w.to(dtype)


def reference_module(cls, **kwargs):
    return cls(C, **kwargs).double()


def make_pair(cls, dev, **kwargs):
    """A SyncBatchNorm and the plain reference, with the same non-trivial weight and bias."""
    ours = SyncBatchNorm(C, **kwargs).double().to(dev)
    ref = reference_module(cls, **kwargs)
    if ours.affine:
        with torch.no_grad():
            for m in (ours, ref):
                m.weight.copy_(torch.tensor([1.5, 0.75, -0.5]))
                m.bias.copy_(torch.tensor([0.1, -0.2, 0.3]))
    return ours, ref


class Checks(object):
    """Collects failed comparisons; agree() then fails on every rank if any rank had one. A rank
    that stopped at its first failed assert would leave the others waiting in their next
    collective (numerical mismatches need not show on every rank alike)."""

    def __init__(self):
        self.failures = []

    def close(self, what, actual, expected, tol=TOL):
        try:
            torch.testing.assert_close(actual.detach().cpu(), expected.detach(), **tol)
        except AssertionError as e:
            self.failures.append('%s: %s' % (what, e))

    def true(self, what, ok):
        if not ok:
            self.failures.append(what)

    def agree(self):
        every = hvd.allgather_object(self.failures)
        failed = ['rank %d: %s' % (r, f) for r, fs in enumerate(every) for f in fs]
        assert not failed, '\n'.join(failed)


def check_step(ours, ref, step, sizes, spatial, dev, tol=TOL):
    """One training step on both: this rank's slice of the reference's output and input
    gradient, this rank's own weight/bias gradients (and their sum over ranks), the running
    statistics."""
    r, world = hvd.rank(), hvd.size()
    xs, ws = zip(*[batch(q, step, batch_size(q, sizes), spatial) for q in range(world)])
    lo = sum(batch_size(q, sizes) for q in range(r))
    hi = lo + batch_size(r, sizes)

    big_x = torch.cat(xs).requires_grad_()
    big_w = torch.cat(ws)
    ref_out = ref(big_x)
    params = [ref.weight, ref.bias] if ref.affine else []
    # With SyncBatchNorm a rank's weight/bias gradient is that of its own part of the loss.
    own = []
    if params:
        own = torch.autograd.grad((ref_out[lo:hi] * big_w[lo:hi]).sum(), params,
                                  retain_graph=True)
    (ref_out * big_w).sum().backward()

    x = xs[r].clone().to(dev).requires_grad_()
    out = ours(x)
    (out * ws[r].to(dev)).sum().backward()

    check = Checks()
    check.true('output shape/dtype/device', (out.shape, out.dtype, out.device)
               == (x.shape, x.dtype, x.device))
    check.close('output', out, ref_out[lo:hi], tol)
    check.close('input grad', x.grad, big_x.grad[lo:hi], tol)
    check.true('weight and bias iff affine',
               (ours.weight is None) == (ours.bias is None) == (not ours.affine))
    if ours.affine:
        for what, mine, want_own, want_all in zip(['weight', 'bias'], [ours.weight, ours.bias],
                                                  own, params):
            total = hvd.allreduce(mine.grad, op=hvd.Sum, name='sbn.test.%s.grad' % what)
            check.close('own %s grad' % what, mine.grad, want_own, tol)
            check.close('%s grad summed over ranks' % what, total, want_all.grad, tol)
            mine.grad = None
            want_all.grad = None
    if ours.track_running_stats:
        check.close('running_mean', ours.running_mean, ref.running_mean, tol)
        check.close('running_var', ours.running_var, ref.running_var, tol)
        check.true('num_batches_tracked',
                   int(ours.num_batches_tracked) == int(ref.num_batches_tracked))
    check.agree()


CASES = [  # (reference class, spatial dims of the input)
    (torch.nn.BatchNorm2d, (3, 2)),
    (torch.nn.BatchNorm1d, ()),
    (torch.nn.BatchNorm1d, (5,)),
]


@pytest.mark.parametrize('dev', DEVICES)
@pytest.mark.parametrize('cls,spatial', CASES, ids=['2d', '1d-NC', '1d-NCL'])
def test_matches_batch_norm_on_concatenation(dev, cls, spatial):
    dev = device(dev)
    ours, ref = make_pair(cls, dev)
    for step in range(3):
        # Batch sizes differ per rank and per step.
        check_step(ours, ref, step, [2 + step, 1, 4, 3], spatial, dev)

    # Eval mode: plain batch norm with the running statistics, on this rank's batch alone.
    ours.eval()
    ref.eval()
    x, _ = batch(hvd.rank(), 9, batch_size(hvd.rank(), [1, 2, 3]), spatial)
    check = Checks()
    check.close('eval output', ours(x.to(dev)), ref(x))
    check.true('num_batches_tracked', int(ours.num_batches_tracked) == 3)
    check.agree()


@pytest.mark.parametrize('momentum', [None, 0.5])
@pytest.mark.parametrize('affine', [True, False])
def test_momentum_and_affine(momentum, affine):
    ours, ref = make_pair(torch.nn.BatchNorm2d, 'cpu', momentum=momentum, affine=affine)
    for step in range(2):
        check_step(ours, ref, step, [3, 2, 1, 2], (2, 2), 'cpu')


def test_rank_with_empty_batch():
    if hvd.size() < 2:
        pytest.skip('needs another rank with a non-empty batch')
    ours, ref = make_pair(torch.nn.BatchNorm2d, 'cpu')
    for step in range(2):
        check_step(ours, ref, step, [3, 0, 2, 0], (2, 3), 'cpu')  # rank 1 (and 3) empty


def test_every_batch_empty_leaves_running_stats():
    # As torch.nn.BatchNorm*d on an empty batch: an empty output, the running statistics kept.
    ours, _ = make_pair(torch.nn.BatchNorm2d, 'cpu')
    x = torch.zeros(0, C, 2, 2, dtype=torch.float64, requires_grad=True)
    out = ours(x)
    out.sum().backward()
    assert out.shape == x.shape and x.grad.shape == x.shape
    assert torch.equal(ours.running_mean, torch.zeros(C, dtype=torch.float64))
    assert torch.equal(ours.running_var, torch.ones(C, dtype=torch.float64))
    assert int(ours.num_batches_tracked) == 1


def test_one_value_per_channel_raises_everywhere():
    # One value per channel over all ranks: torch.nn.BatchNorm*d's ValueError, on every rank.
    ours = SyncBatchNorm(C)
    x = torch.ones(1 if hvd.rank() == 0 else 0, C)
    with pytest.raises(ValueError, match='more than 1 value per channel'):
        ours(x)


def test_without_running_stats_eval_uses_global_batch():
    # As in Horovod: without running statistics, eval mode normalizes with the (synchronized)
    # batch statistics too.
    ours, ref = make_pair(torch.nn.BatchNorm2d, 'cpu', track_running_stats=False)
    assert ours.running_mean is None
    check_step(ours, ref, 0, [2, 3, 1], (2, 2), 'cpu')
    ours.eval()
    ref.eval()
    check_step(ours, ref, 1, [1, 2, 2], (2, 2), 'cpu')


@pytest.mark.parametrize('dev,dtype', [('cpu', torch.float32), ('cpu', torch.bfloat16),
                                       pytest.param('cuda', torch.float16, marks=needs_gpu)],
                         ids=str)
def test_low_precision(dev, dtype):
    """Statistics in float32, the result in the input's dtype, close to the float64 reference
    on the same (rounded) input."""
    dev = device(dev)
    sizes = [4, 2, 3]
    r = hvd.rank()
    xs, ws = zip(*[batch(q, 0, batch_size(q, sizes), (4,), dtype) for q in range(hvd.size())])
    lo = sum(batch_size(q, sizes) for q in range(r))
    hi = lo + batch_size(r, sizes)
    ref = reference_module(torch.nn.BatchNorm1d)
    big_x = torch.cat(xs).double().requires_grad_()
    want = ref(big_x)
    (want * torch.cat(ws).double()).sum().backward()

    ours = SyncBatchNorm(C).to(dev)  # float32 parameters and buffers, as usual with autocast
    x = xs[r].to(dev).requires_grad_()
    out = ours(x)
    (out * ws[r].to(dev)).sum().backward()
    assert (out.dtype, x.grad.dtype, ours.weight.grad.dtype) == (dtype, dtype, torch.float32)
    # What is left is the rounding of the results to 8 or 11 significant bits.
    tol = dict(rtol=2e-2, atol=2e-2) if dtype != torch.float32 else dict(rtol=1e-4, atol=1e-4)
    check = Checks()
    check.close('output', out.double(), want[lo:hi], tol)
    check.close('input grad', x.grad.double(), big_x.grad[lo:hi], tol)
    check.close('running_mean', ours.running_mean.double(), ref.running_mean, tol)
    check.close('running_var', ours.running_var.double(), ref.running_var, tol)
    check.agree()


def test_input_checks():
    ours = SyncBatchNorm(C)
    with pytest.raises(ValueError, match='expected at least 2D input'):
        ours(torch.ones(C))
    assert isinstance(ours, torch.nn.modules.batchnorm._BatchNorm)
    assert ours.eps == 1e-5 and ours.momentum == 0.1 and ours.affine and ours.track_running_stats


def test_torchscript_eval():
    # As Horovod's: scriptable, the script running eval mode (plain batch norm).
    ours, ref = make_pair(torch.nn.BatchNorm2d, 'cpu')
    with torch.no_grad():
        for m in (ours, ref):
            m.running_mean.copy_(torch.tensor([1.0, -1.0, 0.5]))
            m.running_var.copy_(torch.tensor([4.0, 0.25, 1.0]))
    scripted = torch.jit.script(ours.eval())
    x, _ = batch(hvd.rank(), 0, 2, (2, 2))
    torch.testing.assert_close(scripted(x), ref.eval()(x), **TOL)
