"""op=hvd.Adasum: hora.torch's allreduces and DistributedOptimizer against a NumPy simulation of
Horovod's vector-halving distance-doubling Adasum (horovod/common/ops/adasum/adasum.h), written
here independently of hora.torch.adasum: each simulated rank owns a shrinking slice of the
buffer, exchanges halves with rank ^ level, and the dot products and norms of a level are summed
over the ranks that own a piece of the pair's vectors. Non-power-of-two sizes are refused."""

import numpy as np
import pytest
import torch

import hora.torch as hvd


@pytest.fixture(autouse=True)
def _init(world):
    yield


def is_pow2():
    return hvd.size() & (hvd.size() - 1) == 0


@pytest.fixture
def pow2(world):
    if not is_pow2():
        pytest.skip('Adasum needs a power-of-two size (the refusal is tested below)')


needs_pow2 = pytest.mark.usefixtures('pow2')


def np_adasum(vectors):
    """Horovod's VHDD Adasum of one tensor over len(vectors) simulated ranks, in float64."""
    n = len(vectors)
    buf = [np.array(v, dtype=np.float64).ravel().copy() for v in vectors]
    lo, hi = [0] * n, [buf[0].size] * n
    level = 1
    while level < n:
        keep, parts = {}, {}
        for r in range(n):
            mid = lo[r] + (hi[r] - lo[r]) // 2
            left = r & level == 0
            keep[r] = (lo[r], mid) if left else (mid, hi[r])
            s, e = keep[r]
            mine, theirs = buf[r][s:e], buf[r ^ level][s:e]
            a, b = (mine, theirs) if left else (theirs, mine)
            parts[r] = np.array([a @ b, a @ a, b @ b])
        new = {}
        for r in range(n):
            group = [q for q in range(n) if q // (2 * level) == r // (2 * level)]
            dot, an, bn = sum(parts[q] for q in group)
            ca = 1.0 - dot / an * 0.5 if an >= 1e-8 else 1.0
            cb = 1.0 - dot / bn * 0.5 if bn >= 1e-8 else 1.0
            s, e = keep[r]
            left = r & level == 0
            mine, theirs = buf[r][s:e], buf[r ^ level][s:e]
            a, b = (mine, theirs) if left else (theirs, mine)
            new[r] = ca * a + cb * b
        for r in range(n):
            lo[r], hi[r] = keep[r]
            buf[r][lo[r]:hi[r]] = new[r]
        level *= 2
    out = np.empty_like(buf[0])
    for r in range(n):  # the allgather back: every rank's owned slice
        out[lo[r]:hi[r]] = buf[r][lo[r]:hi[r]]
    return out.reshape(np.shape(vectors[0]))


def rank_tensor(r, shape, dtype, seed):
    g = torch.Generator().manual_seed(seed * 100 + r)
    t = torch.randn(*shape, generator=g, dtype=torch.float64)
    if r % 2:  # correlated with the previous rank's, so the coefficients are not all 1
        t = 0.5 * t + rank_tensor(r - 1, shape, torch.float64, seed)
    return t.to(dtype)


TOL = {torch.float64: dict(rtol=1e-10, atol=1e-12), torch.float32: dict(rtol=1e-5, atol=1e-6),
       torch.float16: dict(rtol=2e-2, atol=2e-2)}


def expected(shape, dtype, seed):
    vs = [rank_tensor(r, shape, dtype, seed).double().numpy() for r in range(hvd.size())]
    return torch.from_numpy(np_adasum(vs))


def test_numpy_reference_itself():
    """The simulation agrees with the pairwise formula on cases worked by hand."""
    a, b = np.array([1.0, 0.0]), np.array([0.0, 2.0])
    assert np.allclose(np_adasum([a, b]), a + b)  # orthogonal: summed
    assert np.allclose(np_adasum([a, a]), a)  # parallel and equal: averaged
    assert np.allclose(np_adasum([a, np.zeros(2)]), a)  # a zero vector's coefficient stays 1
    c = np.array([3.0, 1.0, -2.0])
    d = np.array([1.0, 1.0, 1.0])
    dot = c @ d
    pair = (1 - dot / (2 * (c @ c))) * c + (1 - dot / (2 * (d @ d))) * d
    assert np.allclose(np_adasum([c, d]), pair)
    e, f = c * 2, np.array([0.5, -1.0, 2.0])
    ef = (1 - (e @ f) / (2 * (e @ e))) * e + (1 - (e @ f) / (2 * (f @ f))) * f
    top = (1 - (pair @ ef) / (2 * (pair @ pair))) * pair + (1 - (pair @ ef) / (2 * (ef @ ef))) * ef
    assert np.allclose(np_adasum([c, d, e, f]), top)


@needs_pow2
@pytest.mark.parametrize('dtype', [torch.float32, torch.float64, torch.float16])
@pytest.mark.parametrize('shape', [(17,), (4, 5), (3, 1, 2), (1,)])
def test_allreduce_matches_numpy_and_is_identical_on_every_rank(dtype, shape):
    seed = len(shape) * 10 + shape[0]
    t = rank_tensor(hvd.rank(), shape, dtype, seed)
    before = t.clone()
    out = hvd.allreduce(t, op=hvd.Adasum, name='adasum.%s.%s' % (dtype, shape))
    assert out.dtype == dtype and out.shape == t.shape
    assert torch.equal(t, before)  # the input is unchanged
    torch.testing.assert_close(out.double(), expected(shape, dtype, seed), **TOL[dtype])
    everyone = hvd.allgather(out.unsqueeze(0))
    for other in everyone:
        assert torch.equal(other, out)


@needs_pow2
def test_in_place_async_and_scale_factors():
    shape = (6, 3)
    t = rank_tensor(hvd.rank(), shape, torch.float64, 5)
    exp = expected(shape, torch.float64, 5)
    same = hvd.allreduce_(t.clone(), op=hvd.Adasum, name='adasum.inplace')
    torch.testing.assert_close(same, exp, **TOL[torch.float64])
    mine = t.clone()
    h = hvd.allreduce_async_(mine, op=hvd.Adasum, name='adasum.async_')
    assert hvd.synchronize(h) is mine
    torch.testing.assert_close(mine, exp, **TOL[torch.float64])
    h = hvd.allreduce_async(t, op=hvd.Adasum, name='adasum.async', prescale_factor=2.0,
                            postscale_factor=0.25)
    torch.testing.assert_close(hvd.synchronize(h), exp * 0.5, **TOL[torch.float64])


@needs_pow2
def test_grouped_allreduce_uses_per_tensor_coefficients():
    shapes = [(5,), (2, 3), (8,)]
    ts = [rank_tensor(hvd.rank(), s, torch.float32, 40 + i) for i, s in enumerate(shapes)]
    outs = hvd.grouped_allreduce(ts, op=hvd.Adasum, name='adasum.grouped')
    h = hvd.grouped_allreduce_async_([t.clone() for t in ts], op=hvd.Adasum,
                                     name='adasum.grouped_')
    outs_ = hvd.synchronize(h)
    for i, (s, o, o_) in enumerate(zip(shapes, outs, outs_)):
        exp = expected(s, torch.float32, 40 + i)
        torch.testing.assert_close(o.double(), exp, **TOL[torch.float32])
        assert torch.equal(o, o_)
    if hvd.size() > 1:
        # One Adasum over the concatenation gives something else: the granularity is checked.
        whole = np_adasum([np.concatenate([rank_tensor(r, s, torch.float32, 40 + i).double()
                                           .numpy().ravel() for i, s in enumerate(shapes)])
                           for r in range(hvd.size())])
        got = np.concatenate([o.double().numpy().ravel() for o in outs])
        assert not np.allclose(got, whole, rtol=1e-4, atol=1e-5)


@needs_pow2
def test_differentiable_allreduce_and_zero_and_empty_tensors():
    x = rank_tensor(hvd.rank(), (4,), torch.float64, 9).requires_grad_()
    y = hvd.allreduce(x, op=hvd.Adasum, name='adasum.grad')
    y.sum().backward()
    assert x.grad is not None and x.grad.shape == x.shape
    z = hvd.allreduce(torch.zeros(3), op=hvd.Adasum, name='adasum.zeros')
    assert torch.equal(z, torch.zeros(3))
    # A vector whose squared norm is below 1e-8 keeps its coefficient at 1 (unguarded, tiny
    # ones would be scaled by about -5e4 here).
    def tiny_or_not(r):
        return np.full(3, float(r // 2 + 1)) if r % 2 else np.full(3, 1e-5)
    got = hvd.allreduce(torch.from_numpy(tiny_or_not(hvd.rank())), op=hvd.Adasum,
                        name='adasum.tiny')
    expect = np_adasum([tiny_or_not(r) for r in range(hvd.size())])
    torch.testing.assert_close(got, torch.from_numpy(expect))
    assert got.abs().max() < 100
    e = hvd.allreduce(torch.zeros(0, 2), op=hvd.Adasum, name='adasum.empty')
    assert e.shape == (0, 2)
    assert hvd.grouped_allreduce([], op=hvd.Adasum) == []


# --- DistributedOptimizer -------------------------------------------------------------------

BATCH = 4


def make_model():
    torch.manual_seed(11)
    return torch.nn.Sequential(torch.nn.Linear(5, 6), torch.nn.Tanh(), torch.nn.Linear(6, 2))


def batch(step, r):
    g = torch.Generator().manual_seed(500 + 10 * step + r)
    return (torch.randn(BATCH, 5, generator=g, dtype=torch.float64).float(),
            torch.randn(BATCH, 2, generator=g, dtype=torch.float64).float())


def loss_fn(model, x, y):
    return ((model(x) - y) ** 2).mean()


def make_opt(params):
    return torch.optim.SGD(params, lr=0.2, momentum=0.9)


def reference_training(steps, passes):
    """One process: every rank's own model copy and optimizer state; each step, each copy
    starts from the shared parameters, takes its local step on its own batches, and the shared
    parameters move by the NumPy Adasum of the copies' deltas, per parameter tensor."""
    n = hvd.size()
    shared = [p.detach().clone() for p in make_model().parameters()]
    copies = [make_model() for _ in range(n)]
    opts = [make_opt(m.parameters()) for m in copies]
    for step in range(steps):
        deltas = []
        for r, (m, o) in enumerate(zip(copies, opts)):
            with torch.no_grad():
                for p, s in zip(m.parameters(), shared):
                    p.copy_(s)
            o.zero_grad()
            for k in range(passes):
                loss_fn(m, *batch(step * passes + k, r)).backward()
            o.step()
            deltas.append([(p.detach() - s) for p, s in zip(m.parameters(), shared)])
        for i, s in enumerate(shared):
            d = np_adasum([deltas[r][i].double().numpy() for r in range(n)])
            s.add_(torch.from_numpy(d).float())
    return shared


@needs_pow2
@pytest.mark.parametrize('passes', [1, 2])
def test_optimizer_matches_single_process_adasum_of_deltas(passes):
    model = make_model()
    opt = hvd.DistributedOptimizer(make_opt(model.parameters()),
                                   named_parameters=model.named_parameters(), op=hvd.Adasum,
                                   backward_passes_per_step=passes)
    steps = 3
    for step in range(steps):
        opt.zero_grad()
        for k in range(passes):
            loss_fn(model, *batch(step * passes + k, hvd.rank())).backward()
        opt.step()
    expect = reference_training(steps, passes)
    for p, e in zip(model.parameters(), expect):
        torch.testing.assert_close(p.detach(), e, rtol=1e-4, atol=1e-5)
    params = hvd.allgather_object([p.detach().clone() for p in model.parameters()])
    for ps in params:
        assert all(torch.equal(a, b) for a, b in zip(ps, params[0]))
    if hvd.size() > 1:
        with pytest.raises(AssertionError, match='Adasum'):
            with opt.skip_synchronize():
                pass


# --- refusals -------------------------------------------------------------------------------

def test_refusals_submit_nothing():
    n = hvd.size()
    t = torch.ones(4)
    if not is_pow2():
        calls = [lambda: hvd.allreduce(t, op=hvd.Adasum),
                 lambda: hvd.allreduce_(t.clone(), op=hvd.Adasum),
                 lambda: hvd.allreduce_async(t, op=hvd.Adasum),
                 lambda: hvd.allreduce_async_(t.clone(), op=2),
                 lambda: hvd.grouped_allreduce([t], op=hvd.Adasum),
                 lambda: hvd.grouped_allreduce_async([t], op=hvd.Adasum),
                 lambda: hvd.grouped_allreduce_async_([t.clone()], op=hvd.Adasum)]
        for call in calls:
            with pytest.raises(NotImplementedError,
                               match='Running Adasum with non-power of 2 ranks is not supported '
                               'yet.*size\\(\\) is %d' % n):
                call()
        model = torch.nn.Linear(2, 1)
        with pytest.raises(NotImplementedError, match='non-power of 2 ranks'):
            hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                     named_parameters=model.named_parameters(), op=hvd.Adasum)
    else:
        for bad in (torch.ones(3, dtype=torch.int32), torch.ones(2, dtype=torch.int64),
                    torch.ones(2, dtype=torch.bfloat16), torch.ones(2).to_sparse()):
            with pytest.raises(ValueError, match='Adasum'):
                hvd.allreduce(bad, op=hvd.Adasum)
            with pytest.raises(ValueError, match='Adasum'):
                hvd.grouped_allreduce([torch.ones(2), bad], op=hvd.Adasum)
    # Ops other than the allreduces still refuse Adasum, as Horovod's do.
    for call in (lambda: hvd.reducescatter(torch.ones(n), op=hvd.Adasum),
                 lambda: hvd.grouped_reducescatter_async([torch.ones(n)], op=hvd.Adasum)):
        with pytest.raises(NotImplementedError, match='Adasum'):
            call()
    # Nothing was submitted: the next collective still matches on every rank.
    assert torch.equal(hvd.allreduce(t, op=hvd.Sum, name='after.adasum.refusals'),
                       torch.full((4,), n * 1.))
