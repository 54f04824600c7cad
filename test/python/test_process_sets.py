"""Process sets: static (init(process_sets=[...])) and dynamic (add_process_set,
remove_process_set, HOROVOD_DYNAMIC_PROCESS_SETS) sets, every collective on a set compared with
the members' inputs reduced here, non-member refusal, DistributedOptimizer(process_set=...),
run by every rank of a horarun job (-np 1..4). Rank r's inputs are functions of r, so each rank
computes what any set's result must be; inputs are positive, so a set's sum differs from the
global one (a test would fail if the set were ignored). At -np 1 no proper subset exists: the
collective tests skip and the API tests run."""

import os

import pytest
import torch

import hora.torch as hvd

DEADLINE_S = 120


def _subsets(n):
    """Proper, non-empty, distinct subsets of range(n): evens, odds, {0, 1}, {0, n-1}."""
    out = []
    for ranks in (list(range(0, n, 2)), list(range(1, n, 2)), [0, 1][:n], sorted({0, n - 1})):
        if ranks and len(ranks) < n and ranks not in out:
            out.append(ranks)
    return out


def _reinit(process_sets=None, dynamic_env=None):
    hvd.shutdown()
    os.environ.pop('HOROVOD_DYNAMIC_PROCESS_SETS', None)
    if dynamic_env is not None:
        os.environ['HOROVOD_DYNAMIC_PROCESS_SETS'] = dynamic_env
    hvd.init(process_sets=process_sets)


STATIC = {}  # module state: the sets formed at init ('even', 'odd')


@pytest.fixture(scope='module', autouse=True)
def _static_sets(world):
    """Re-joins the job with the even and odd ranks as static sets (where both exist), and
    leaves it as the session fixture made it (no sets, no dynamic flag)."""
    n = hvd.size()
    STATIC.clear()
    sets = []
    if n >= 2:
        STATIC['even'] = hvd.ProcessSet(range(0, n, 2))
        STATIC['odd'] = hvd.ProcessSet(range(1, n, 2))
        sets = [STATIC['even'], STATIC['odd']]
    _reinit(sets)
    yield
    _reinit()


@pytest.fixture(autouse=True)
def _deadline(world_with_deadline):
    yield


def x(r, n=6):
    """Rank r's input: positive, distinct per rank."""
    return torch.arange(1, n + 1, dtype=torch.float64) * (r + 1) + r * r


def static_sets():
    return list(STATIC.values())


def need_sets():
    if not STATIC:
        pytest.skip('-np 1: no proper subset of the ranks to form a process set on')


# --- the ProcessSet objects -------------------------------------------------------------------

def test_global_process_set():
    n, r = hvd.size(), hvd.rank()
    g = hvd.global_process_set
    assert g.process_set_id == 0
    assert g.ranks == list(range(n))
    assert (g.size(), g.rank(), g.included()) == (n, r, True)
    assert 'process_set_id=0' in str(g)


def test_static_sets_registered():
    need_sets()
    r = hvd.rank()
    ids = [ps.process_set_id for ps in static_sets()]
    assert None not in ids and 0 not in ids and len(set(ids)) == len(ids)
    for ps in static_sets():
        assert ps.size() == len(ps.ranks)
        assert ps.included() == (r in ps.ranks)
        if ps.included():
            assert ps.rank() == ps.ranks.index(r)
        else:
            with pytest.raises(ValueError, match='not part of provided process set'):
                ps.rank()


def test_unregistered_set():
    ps = hvd.ProcessSet([0])
    assert (ps.process_set_id, ps.size(), ps.rank()) == (None, None, None)
    assert ps.included() == (hvd.rank() == 0)
    with pytest.raises(ValueError, match='does not exist, or has not been registered'):
        hvd.allreduce(torch.ones(2), process_set=ps)
    with pytest.raises(ValueError, match='list of process ranks'):
        hvd.ProcessSet([0, 'a'])


def test_dynamic_refused_without_env():
    with pytest.raises(ValueError, match='HOROVOD_DYNAMIC_PROCESS_SETS=1 to allow adding'):
        hvd.add_process_set([0])
    need_sets()
    ps = STATIC['even']
    saved = ps.process_set_id
    with pytest.raises(ValueError, match='HOROVOD_DYNAMIC_PROCESS_SETS=1 to allow removing'):
        hvd.remove_process_set(ps)
    # As Horovod's: the object was invalidated before the refusal; the set is still there.
    assert ps.process_set_id is None
    ps.process_set_id = saved
    assert ps.size() == len(ps.ranks)


# --- each collective on a set ---------------------------------------------------------------

def _members_sum(ps):
    return sum(x(q) for q in ps.ranks)


def test_allreduce_on_sets():
    need_sets()
    n, r = hvd.size(), hvd.rank()
    global_sum = sum(x(q) for q in range(n))
    for ps in static_sets():
        if not ps.included():
            with pytest.raises(ValueError, match='not a member of the provided process set'):
                hvd.allreduce(x(r), op=hvd.Sum, process_set=ps)
            continue
        want = _members_sum(ps)
        assert not torch.equal(want, global_sum)
        assert torch.equal(hvd.allreduce(x(r), op=hvd.Sum, process_set=ps), want)
        assert torch.allclose(hvd.allreduce(x(r), process_set=ps), want / len(ps.ranks))
        assert torch.equal(hvd.allreduce(x(r), op=hvd.Max, process_set=ps),
                           torch.stack([x(q) for q in ps.ranks]).max(0).values)
        t = x(r)
        hvd.allreduce_(t, op=hvd.Sum, process_set=ps)
        assert torch.equal(t, want)
        out = hvd.grouped_allreduce([x(r), 2 * x(r)], op=hvd.Sum, process_set=ps)
        assert torch.equal(out[0], want) and torch.equal(out[1], 2 * want)
        h = hvd.grouped_allreduce_async_([x(r)], op=hvd.Min, process_set=ps)
        assert torch.equal(hvd.synchronize(h)[0],
                           torch.stack([x(q) for q in ps.ranks]).min(0).values)


def test_allreduce_gradient_on_set():
    need_sets()
    r = hvd.rank()
    for ps in static_sets():
        if ps.included():
            t = x(r).requires_grad_()
            hvd.allreduce(t, op=hvd.Sum, process_set=ps).sum().backward()
            assert torch.equal(t.grad, torch.full_like(t, float(len(ps.ranks))))


def test_allgather_on_sets():
    need_sets()
    r = hvd.rank()
    for ps in static_sets():
        mine = x(r, 2).repeat(r + 1, 1)  # r + 1 rows: the first dimension differs per rank
        if not ps.included():
            with pytest.raises(ValueError, match='not a member'):
                hvd.allgather(mine, process_set=ps)
            continue
        want = torch.cat([x(q, 2).repeat(q + 1, 1) for q in ps.ranks])
        assert torch.equal(hvd.allgather(mine, process_set=ps), want)
        got = hvd.grouped_allgather([mine, mine + 1], process_set=ps)
        assert torch.equal(got[0], want) and torch.equal(got[1], want + 1)
        assert hvd.allgather_object(('rank', r), process_set=ps) == [('rank', q)
                                                                     for q in ps.ranks]
        t = mine.clone().requires_grad_()
        hvd.allgather(t, process_set=ps).sum().backward()
        assert torch.equal(t.grad, torch.ones_like(t))  # Horovod's: averaged over the set
        t = x(r, 2).requires_grad_()
        hvd.broadcast(t, root_rank=ps.ranks[-1], process_set=ps).sum().backward()
        want = torch.ones_like(t) if r == ps.ranks[-1] else torch.zeros_like(t)
        assert torch.equal(t.grad, want)


def test_broadcast_global_root():
    need_sets()
    r = hvd.rank()
    for ps in static_sets():
        if not ps.included():
            continue
        root = ps.ranks[-1]  # a GLOBAL rank, as in Horovod
        assert torch.equal(hvd.broadcast(x(r), root_rank=root, process_set=ps), x(root))
        t = x(r)
        hvd.broadcast_(t, root, process_set=ps)
        assert torch.equal(t, x(root))
        assert hvd.broadcast_object({'from': r}, root_rank=root, process_set=ps) == {'from': root}
        outside = next(q for q in range(hvd.size()) if q not in ps.ranks)
        with pytest.raises(ValueError, match='not a member of the provided process set'):
            hvd.broadcast(x(r), root_rank=outside, process_set=ps)


def test_alltoall_on_sets():
    need_sets()
    r = hvd.rank()
    for ps in static_sets():
        if not ps.included():
            continue
        m = len(ps.ranks)
        # To set rank j: j + 1 rows of 100 * r + j.
        splits = [j + 1 for j in range(m)]
        mine = torch.cat([torch.full((j + 1, 2), 100.0 * r + j) for j in range(m)])
        out, received = hvd.alltoall(mine, splits=splits, process_set=ps)
        me = ps.rank()
        want = torch.cat([torch.full((me + 1, 2), 100.0 * q + me) for q in ps.ranks])
        assert torch.equal(out, want)
        assert received.tolist() == [me + 1] * m


def test_reducescatter_on_sets():
    need_sets()
    r = hvd.rank()
    for ps in static_sets():
        if not ps.included():
            with pytest.raises(ValueError, match='not a member'):
                hvd.reducescatter(x(r), process_set=ps)
            continue
        m, me = len(ps.ranks), ps.rank()
        for rows in (2 * m, 2 * m + 1):
            mine = x(r, rows * 3).reshape(rows, 3)
            total = sum(x(q, rows * 3).reshape(rows, 3) for q in ps.ranks)
            start = me * (rows // m) + min(me, rows % m)
            count = rows // m + (1 if me < rows % m else 0)
            got = hvd.reducescatter(mine, op=hvd.Sum, process_set=ps)
            assert torch.equal(got, total[start:start + count])
            got = hvd.grouped_reducescatter([mine], op=hvd.Average, process_set=ps)[0]
            assert torch.allclose(got, total[start:start + count] / m)


def test_sparse_allreduce_on_set():
    need_sets()
    r = hvd.rank()
    for ps in static_sets():
        if not ps.included():
            continue
        t = torch.sparse_coo_tensor([[r % 4]], [float(r + 1)], (4,))
        got = hvd.sparse_allreduce_async(t, 'ps.sparse.%d' % ps.process_set_id, hvd.Average,
                                         process_set=ps)().to_dense()
        want = sum(torch.sparse_coo_tensor([[q % 4]], [float(q + 1)], (4,)).to_dense()
                   for q in ps.ranks) / len(ps.ranks)
        assert torch.allclose(got, want)


def test_adasum_allreduce_on_set():
    need_sets()
    from hora.torch import adasum
    r = hvd.rank()
    for ps in static_sets():
        if not ps.included() or not adasum.is_power_of_two(len(ps.ranks)):
            continue
        got = hvd.allreduce(x(r), op=hvd.Adasum, process_set=ps)
        want = adasum.reduce_rows(torch.stack([x(q) for q in ps.ranks]))
        assert torch.allclose(got, want)


def test_barrier_on_set():
    need_sets()
    for ps in static_sets():
        if ps.included():
            hvd.barrier(process_set=ps)
        else:
            with pytest.raises(ValueError, match='not a member'):
                hvd.barrier(process_set=ps)


def test_interleaved_sets():
    """Async ops on the global set and on every set this rank is in, submitted interleaved and
    synchronized in reverse order."""
    need_sets()
    n, r = hvd.size(), hvd.rank()
    handles = []
    for i in range(3):
        handles.append((None, i, hvd.allreduce_async(x(r) + i, op=hvd.Sum,
                                                     name='il.global.%d' % i)))
        for ps in static_sets():
            if ps.included():
                handles.append((ps, i, hvd.allreduce_async(x(r) + i, op=hvd.Sum,
                                                           name='il.%d.%d' % (ps.process_set_id,
                                                                              i),
                                                           process_set=ps)))
    for ps, i, h in reversed(handles):
        ranks = ps.ranks if ps is not None else range(n)
        assert torch.equal(hvd.synchronize(h), sum(x(q) + i for q in ranks))


# --- DistributedOptimizer on a set ----------------------------------------------------------

def _model():
    torch.manual_seed(3)
    return torch.nn.Linear(4, 2).double()


def _batch(r, step):
    g = torch.Generator().manual_seed(1000 * step + r)
    return torch.randn(5, 4, generator=g, dtype=torch.float64)


def _train(model, batches_per_step, opt):
    for step, batches in enumerate(batches_per_step):
        opt.zero_grad()
        model(batches).pow(2).mean().backward()
        opt.step()
    return model


@pytest.mark.parametrize('groups', [None, 1])
def test_optimizer_on_set(groups):
    need_sets()
    r, steps = hvd.rank(), 3
    ps = STATIC['even'] if r % 2 == 0 else STATIC['odd']
    other = STATIC['odd'] if r % 2 == 0 else STATIC['even']
    model = _model()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters(), process_set=ps,
                                   groups=groups)
    _train(model, [_batch(r, s) for s in range(steps)], opt)
    # One process on the members' concatenated batches (equal sizes: the mean of the
    # members' mean losses).
    ref = _model()
    _train(ref, [torch.cat([_batch(q, s) for q in ps.ranks]) for s in range(steps)],
           torch.optim.SGD(ref.parameters(), lr=0.1))
    for p, q in zip(model.parameters(), ref.parameters()):
        assert torch.allclose(p, q)
    # The other set's run differs (inputs differ): the set was not ignored.
    wrong = _model()
    _train(wrong, [torch.cat([_batch(q, s) for q in range(hvd.size())]) for s in range(steps)],
           torch.optim.SGD(wrong.parameters(), lr=0.1))
    assert not torch.allclose(model.weight, wrong.weight)
    # A rank outside the optimizer's set steps on its local gradients (as Horovod).
    local = _model()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(local.parameters(), lr=0.1),
                                   named_parameters=local.named_parameters(), process_set=other)
    if r in other.ranks:
        return  # this rank trains nothing on the other set here
    _train(local, [_batch(r, s) for s in range(steps)], opt)
    alone = _model()
    _train(alone, [_batch(r, s) for s in range(steps)], torch.optim.SGD(alone.parameters(),
                                                                       lr=0.1))
    assert torch.allclose(local.weight, alone.weight)


def test_optimizer_adasum_on_set_refused():
    need_sets()
    model = _model()
    with pytest.raises(NotImplementedError, match='Adasum does not support non-global'):
        hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                 named_parameters=model.named_parameters(), op=hvd.Adasum,
                                 process_set=STATIC['even'])


# --- dynamic sets (these re-join the job; keep them last) -------------------------------------

def test_static_duplicate_refused():
    n = hvd.size()
    dup = [hvd.ProcessSet([0]), hvd.ProcessSet([0])] if n > 1 else [hvd.ProcessSet([0])]
    hvd.shutdown()
    with pytest.raises(ValueError, match='is a duplicate'):
        hvd.init(process_sets=dup)
    assert dup[-1].process_set_id is None
    if n > 1:
        assert dup[0].process_set_id is not None


def test_dynamic_sets():
    _reinit('dynamic')
    assert os.environ.get('HOROVOD_DYNAMIC_PROCESS_SETS') == '1'
    n, r = hvd.size(), hvd.rank()
    assert hvd.remove_process_set(hvd.global_process_set) is False
    assert hvd.remove_process_set(hvd.ProcessSet([0])) is False  # never registered
    with pytest.raises(ValueError, match='Attempted to add a duplicate process set'):
        hvd.add_process_set(list(range(n)))  # the global set's ranks
    if n == 1:
        return
    added = [hvd.add_process_set(ranks) for ranks in _subsets(n)]
    ids = [ps.process_set_id for ps in added]
    assert len(set(ids)) == len(ids) and 0 not in ids
    for ps in added:
        with pytest.raises(ValueError, match='Attempted to add a duplicate process set'):
            hvd.add_process_set(hvd.ProcessSet(ps.ranks))
        if ps.included():
            assert torch.equal(hvd.allreduce(x(r), op=hvd.Sum, process_set=ps),
                               _members_sum(ps))
            assert ps.rank() == ps.ranks.index(r)
    first = added[0]
    old_id = first.process_set_id
    assert hvd.remove_process_set(first) is True
    assert first.process_set_id is None
    assert hvd.remove_process_set(first) is False
    with pytest.raises(ValueError, match='does not exist, or has not been registered'):
        hvd.allreduce(x(r), process_set=first)
    again = hvd.add_process_set(first.ranks)  # the same ranks again: a new id
    assert again.process_set_id > max(ids) and again.process_set_id != old_id
    if again.included():
        assert torch.equal(hvd.allreduce(x(r), op=hvd.Sum, process_set=again),
                           _members_sum(again))
    for ps in [again] + added[1:]:
        assert hvd.remove_process_set(ps) is True
    hvd.barrier()


def test_dynamic_env_var():
    _reinit(None, dynamic_env='1')
    if hvd.size() == 1:
        with pytest.raises(ValueError, match='duplicate'):
            hvd.add_process_set([0])
        return
    ps = hvd.add_process_set(hvd.ProcessSet([hvd.size() - 1]))
    if ps.included():
        assert torch.equal(hvd.allreduce(x(hvd.rank()), op=hvd.Sum, process_set=ps),
                           x(hvd.size() - 1))
    assert hvd.remove_process_set(ps) is True
