"""Where hora.torch once answered differently from Horovod 0.28.1's horovod.torch, it now answers
as Horovod does: the gradients of allgather, broadcast and reducescatter, int16 tensors,
nccl_built(), prescale/postscale of integer tensors, duplicate names, 0-dimensional
reducescatter, broadcast_optimizer_state on a fresh optimizer, HOROVOD_TIMELINE set by the
program, and errors that only one rank raises (the ranks stay in step). Run at -np 1..4
(run_pytest.sh); the cross-rank cases skip at -np 1. A hang fails the job through the
deadline fixture."""

import os
import tempfile

import pytest
import torch

import hora.torch as hvd

DEADLINE_S = 90


@pytest.fixture(autouse=True)
def _deadline(world_with_deadline):
    yield


def needs_two():
    if hvd.size() < 2:
        pytest.skip('needs two ranks')


def still_in_step(tag):
    """An unnamed allreduce and a named one both give the sum of every rank's rank: the ranks
    still pair their ops (and their unnamed ops' numbers) after an error."""
    n = hvd.size()
    want = torch.full((3,), float(n * (n - 1) // 2))
    got = hvd.allreduce(torch.full((3,), float(hvd.rank())), op=hvd.Sum)
    assert torch.equal(got, want), (tag, got)
    got = hvd.allreduce(torch.full((3,), float(hvd.rank())), op=hvd.Sum, name=tag + '.check')
    assert torch.equal(got, want), (tag, got)


# --- gradients (Horovod's backward passes) ---------------------------------------------------

def test_allgather_gradient_is_horovods_average():
    x = torch.ones(2, 3, requires_grad=True)
    hvd.allgather(x, name='grad.ag').sum().backward()
    assert torch.equal(x.grad, torch.ones(2, 3)), x.grad


def test_grouped_allgather_gradient_is_horovods_average():
    xs = [torch.ones(2, requires_grad=True), torch.ones(1, 4, requires_grad=True)]
    outs = hvd.grouped_allgather(xs, name='grad.gag')
    (outs[0].sum() + 2 * outs[1].sum()).backward()
    assert torch.equal(xs[0].grad, torch.ones(2)), xs[0].grad
    assert torch.equal(xs[1].grad, torch.full((1, 4), 2.0)), xs[1].grad


def test_broadcast_gradient_is_horovods_average_on_the_root():
    x = torch.ones(4, requires_grad=True)
    hvd.broadcast(x, root_rank=0, name='grad.bc').sum().backward()
    want = torch.ones(4) if hvd.rank() == 0 else torch.zeros(4)
    assert torch.equal(x.grad, want), x.grad


@pytest.mark.parametrize('op,scale', [(hvd.Sum, 'size'), (hvd.Average, 1.0)])
def test_reducescatter_gradient_is_horovods(op, scale):
    n = hvd.size()
    x = torch.ones(2 * n, 3, requires_grad=True)
    hvd.reducescatter(x, op=op, name='grad.rs.%d' % op).sum().backward()
    want = float(n) if scale == 'size' else scale
    assert torch.equal(x.grad, torch.full((2 * n, 3), want)), x.grad


def test_reducescatter_gradient_carries_the_scale_factors():
    n = hvd.size()
    x = torch.ones(2 * n, requires_grad=True)
    hvd.reducescatter(x, op=hvd.Sum, name='grad.rs.scaled', prescale_factor=0.5,
                      postscale_factor=3.0).sum().backward()
    assert torch.equal(x.grad, torch.full((2 * n,), 1.5 * n)), x.grad


def test_sum_gradients_opt_in(monkeypatch):
    """HORA_TORCH_SUM_GRADIENTS=1: the derivative of the sum of every rank's loss."""
    monkeypatch.setenv('HORA_TORCH_SUM_GRADIENTS', '1')
    n = hvd.size()
    x = torch.ones(2, requires_grad=True)
    hvd.allgather(x, name='grad.sum.ag').sum().backward()
    assert torch.equal(x.grad, torch.full((2,), float(n))), x.grad
    y = torch.ones(2 * n, requires_grad=True)
    hvd.reducescatter(y, op=hvd.Average, name='grad.sum.rs').sum().backward()
    assert torch.allclose(y.grad, torch.full((2 * n,), 1.0 / n)), y.grad


# --- int16 ----------------------------------------------------------------------------------

def test_int16_broadcast_allgather_alltoall_allreduce():
    n, r = hvd.size(), hvd.rank()
    t = torch.arange(4, dtype=torch.int16) + 1000 * (r + 1)
    out = hvd.broadcast(t, root_rank=0, name='i16.bc')
    assert out.dtype == torch.int16 and torch.equal(out, torch.arange(4, dtype=torch.int16) + 1000)
    out = hvd.allgather(t, name='i16.ag')
    assert out.dtype == torch.int16
    assert torch.equal(out, torch.cat([torch.arange(4, dtype=torch.int16) + 1000 * (q + 1)
                                       for q in range(n)]))
    out = hvd.alltoall(torch.full((n,), r, dtype=torch.int16), name='i16.a2a')
    assert out.dtype == torch.int16 and torch.equal(out, torch.arange(n, dtype=torch.int16))
    out = hvd.allreduce(t, op=hvd.Sum, name='i16.ar')
    want = sum(torch.arange(4, dtype=torch.int16) + 1000 * (q + 1) for q in range(n))
    assert out.dtype == torch.int16 and torch.equal(out, want.to(torch.int16))


# --- alltoall splits -------------------------------------------------------------------------

def test_alltoall_splits_must_be_integers_in_one_dimension():
    # Float splits that would truncate to valid ones (one row for each rank) are still refused,
    # as Horovod refuses them: its own test passes uninitialised float32 splits and wants the
    # error whatever the memory held.
    n = hvd.size()
    rows = torch.arange(n, dtype=torch.float32)
    for bad, says in ((torch.ones(n, dtype=torch.float32), 'integers'),
                      (torch.ones(n, dtype=torch.float64), 'integers'),
                      (torch.ones(n, dtype=torch.bool), 'integers'),
                      (torch.ones(1, n, dtype=torch.int32), '1D')):
        with pytest.raises(ValueError, match=says):
            hvd.alltoall(rows, splits=bad, name='a2a.badsplits')
    # Integer tensors give the splits they hold: int32 (Horovod's) and int64 (hora takes it too).
    for dtype in (torch.int32, torch.int64):
        out, received = hvd.alltoall(rows, splits=torch.ones(n, dtype=dtype), name='a2a.splits')
        assert torch.equal(out, torch.full((n,), float(hvd.rank()))), out
        assert received.tolist() == [1] * n, received


# --- nccl_built -----------------------------------------------------------------------------

def test_nccl_built_is_a_version_code():
    v = hvd.nccl_built()
    assert type(v) is int, type(v)
    if hvd.cuda_built():
        assert v >= 2000, v  # NCCL 2.x: 2xxxx (or 2xxx before 2.9)
    else:
        assert v == 0


# --- prescale and postscale of integer tensors ----------------------------------------------

def test_prescale_of_integers_is_float64_then_truncated():
    n = hvd.size()
    t = torch.tensor([3, -3, 5, 7], dtype=torch.int32)
    out = hvd.allreduce(t, op=hvd.Sum, prescale_factor=0.5, name='scale.pre')
    assert out.dtype == torch.int32
    assert torch.equal(out, torch.tensor([1, -1, 2, 3], dtype=torch.int32) * n), out


def test_postscale_of_integers_is_float64_then_truncated():
    n = hvd.size()
    t = torch.tensor([3, -3, 5], dtype=torch.int64)
    out = hvd.allreduce(t, op=hvd.Sum, postscale_factor=0.3, name='scale.post')
    assert out.dtype == torch.int64
    want = torch.tensor([int(0.3 * 3 * n), int(-0.3 * 3 * n), int(0.3 * 5 * n)])
    assert torch.equal(out, want), (out, want)


def test_scaled_reducescatter_of_integers_keeps_the_dtype():
    n = hvd.size()
    t = torch.full((2 * n,), 3, dtype=torch.int32)
    out = hvd.reducescatter(t, op=hvd.Sum, prescale_factor=0.5, name='scale.rs')
    assert out.dtype == torch.int32 and torch.equal(out, torch.full((2,), n, dtype=torch.int32))


# --- duplicate names ------------------------------------------------------------------------

@pytest.mark.parametrize('kind', ['allreduce', 'allgather', 'broadcast', 'reducescatter'])
def test_duplicate_name_is_a_value_error(kind):
    needs_two()
    n = hvd.size()
    # reducescatter of n + 1 rows of 3 takes hora's allreduce path: its message must still say
    # reducescatter.
    t = torch.ones(n + 1, 3)
    submit = {'allreduce': lambda: hvd.allreduce_async(t, name='dup'),
              'allgather': lambda: hvd.allgather_async(t, name='dup'),
              'broadcast': lambda: hvd.broadcast_async(t, 0, name='dup'),
              'reducescatter': lambda: hvd.reducescatter_async(t, name='dup')}[kind]
    handle = submit()
    with pytest.raises(ValueError) as err:
        submit()
    assert isinstance(err.value, hvd.HoraUsageError)
    assert 'allreduce_async' not in str(err.value) or kind == 'allreduce', str(err.value)
    assert '%s.dup' % kind in str(err.value), str(err.value)
    hvd.synchronize(handle)
    still_in_step('dup.' + kind)


# --- 0-dimensional reducescatter ------------------------------------------------------------

def test_scalar_reducescatter_is_refused():
    with pytest.raises(ValueError, match='0-dimensional'):
        hvd.reducescatter(torch.tensor(float(hvd.rank())))
    with pytest.raises(ValueError, match='0-dimensional'):
        hvd.grouped_reducescatter([torch.ones(2 * hvd.size()), torch.tensor(1.0)])
    still_in_step('scalar.rs')


# --- broadcast_optimizer_state on a fresh optimizer -----------------------------------------

@pytest.mark.parametrize('distributed', [False, True])
def test_broadcast_optimizer_state_initializes_a_fresh_optimizer(distributed):
    torch.manual_seed(hvd.rank())
    model = torch.nn.Linear(3, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    if distributed:
        opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    for p in model.parameters():
        assert p.grad is not None and torch.equal(p.grad, torch.zeros_like(p)), p.grad
        assert 'momentum_buffer' in opt.state[p], opt.state[p]
    # The parameters are still root's: the zero step moved nothing.
    for p in model.parameters():
        assert torch.equal(hvd.broadcast(p.detach(), 0, name='opt.check'), p.detach())


# --- HOROVOD_TIMELINE -----------------------------------------------------------------------

def test_horovod_timeline_set_by_the_program_writes_the_timeline(monkeypatch):
    folder = tempfile.mkdtemp(prefix='hora_parity_tl.')
    path = hvd.broadcast_object(os.path.join(folder, 'timeline.json'), root_rank=0,
                                name='tl.path')
    monkeypatch.delenv('HORA_TIMELINE', raising=False)
    monkeypatch.delenv('HORA_TIMELINE_MARK_CYCLES', raising=False)
    monkeypatch.setenv('HOROVOD_TIMELINE', path)
    monkeypatch.setenv('HOROVOD_TIMELINE_MARK_CYCLES', '1')
    hvd.shutdown()
    try:
        hvd.init()
        hvd.allreduce(torch.ones(3), name='tl_env')
        hvd.barrier()
    finally:
        hvd.shutdown()  # closes the timeline
        monkeypatch.undo()
        hvd.init()
    try:
        if hvd.rank() == 0:
            with open(path) as f:
                text = f.read()
            # A world of one runs its ops without negotiating, in no cycles.
            wants = ['allreduce.tl_env'] + (['NEGOTIATE_ALLREDUCE', 'CYCLE_START']
                                            if hvd.size() > 1 else [])
            for want in wants:
                assert want in text, (want, text[:2000])
    finally:
        hvd.barrier()
        # Only rank 0's folder holds the timeline (the path is rank 0's): one rank removes it,
        # where every rank checking and then removing would race.
        if hvd.rank() == 0 and os.path.exists(path):
            os.unlink(path)
        os.rmdir(folder)


# --- an error on one rank only --------------------------------------------------------------

def test_a_dtype_only_one_rank_refuses_fails_every_rank():
    needs_two()
    t = torch.ones(4, dtype=torch.bool) if hvd.rank() == 0 else torch.ones(4)
    expected = TypeError if hvd.rank() == 0 else hvd.HoraMismatchError
    with pytest.raises(expected):
        hvd.allreduce(t, name='one.dtype')
    with pytest.raises(expected):
        hvd.allgather(t)  # unnamed: the numbering stays in step too
    still_in_step('one.dtype')


def test_a_scalar_only_one_rank_sends_to_reducescatter_fails_every_rank():
    needs_two()
    n = hvd.size()
    t = torch.tensor(1.0) if hvd.rank() == 1 else torch.ones(2 * n)
    expected = ValueError if hvd.rank() == 1 else hvd.HoraMismatchError
    with pytest.raises(expected):
        hvd.reducescatter(t)
    with pytest.raises(expected):
        hvd.synchronize(hvd.grouped_reducescatter_async([torch.ones(2 * n), t], name='one.grs'))
    still_in_step('one.scalar')


def test_splits_only_one_rank_gets_wrong_fail_every_rank():
    needs_two()
    n = hvd.size()
    splits = [1] * n if hvd.rank() == 0 else [2] * n  # rank 0's do not add up to its 2n rows
    expected = ValueError if hvd.rank() == 0 else hvd.HoraMismatchError
    with pytest.raises(expected):
        hvd.alltoall(torch.ones(2 * n, 3), splits=splits, name='one.splits')
    still_in_step('one.splits')


def test_an_error_every_rank_raises_leaves_them_in_step():
    with pytest.raises(TypeError):
        hvd.broadcast(torch.ones(2, dtype=torch.complex64), root_rank=0)
    with pytest.raises(ValueError):
        hvd.allreduce(torch.ones(2), op=42)
    still_in_step('every')
