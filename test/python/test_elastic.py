"""hora.torch.elastic in a fixed-size job (run under horarun at -np 2 by meson; any size works):
run() syncs and calls the function once, commit() saves, restore() goes back, sync() gives every
rank rank 0's state, ElasticSampler partitions like Horovod's, and shutdown() then init() joins
the job again. Every rank runs the same tests in the same order."""

import random

import pytest
import torch

import hora.torch as hvd
from hora.common.exceptions import HorovodInternalError, HostsUpdatedInterrupt


@pytest.fixture(autouse=True)
def _init(world):
    yield


def flat(model):
    return torch.cat([p.detach().reshape(-1) for p in model.state_dict().values()])


def same_on_every_rank(obj, name):
    everyone = hvd.allgather_object(obj, name=name)
    return all(o == everyone[0] for o in everyone)


def test_not_an_elastic_job():
    assert hvd._hora_torch.elastic_enabled() is False
    assert hvd._hora_torch.elastic_reset_pending() is False
    assert hvd.elastic.round() == 0


def test_exceptions_are_horovods():
    assert hvd.elastic.HorovodInternalError is HorovodInternalError
    assert hvd.HorovodInternalError is HorovodInternalError
    assert hvd.elastic.HostsUpdatedInterrupt is HostsUpdatedInterrupt
    assert issubclass(HorovodInternalError, RuntimeError)
    assert issubclass(HostsUpdatedInterrupt, RuntimeError)
    # A lost rank, one that stopped answering, or a reset: recoverable in an elastic job.
    for cls in (hvd.HoraPeerFailure, hvd.HoraAbortedError, hvd.HoraConnectionError,
                hvd.HoraTimeoutError):
        assert issubclass(cls, HorovodInternalError) and issubclass(cls, hvd.HoraError)
    # The program's own mistakes are not.
    for cls in (hvd.HoraUsageError, hvd.HoraMismatchError):
        assert issubclass(cls, hvd.HoraError) and not issubclass(cls, HorovodInternalError)
    e = hvd.HoraPeerFailure('peer rank 1 closed the connection')
    assert isinstance(e, RuntimeError) and 'rank 1' in str(e)


def test_training_under_run_ends_with_the_same_weights_on_every_rank():
    torch.manual_seed(100 + hvd.rank())  # different on purpose: sync() makes them rank 0's
    model = torch.nn.Sequential(torch.nn.Linear(6, 10), torch.nn.ReLU(), torch.nn.Linear(10, 2))
    rank0_initial = hvd.broadcast_object(flat(model), 0, name='test.rank0_initial')
    optimizer = hvd.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9),
        named_parameters=model.named_parameters())
    state = hvd.elastic.TorchState(model, optimizer, epoch=0, batch=0)
    calls, resets = [], []
    state.register_reset_callbacks([lambda: resets.append(1)])

    @hvd.elastic.run
    def train(state, epochs, batches, scale=1.0):
        calls.append(flat(model))
        for state.epoch in range(state.epoch, epochs):
            for state.batch in range(state.batch, batches):
                if state.batch % 3 == 0:
                    state.commit()
                g = torch.Generator().manual_seed(state.epoch * 100 + state.batch * 10 + hvd.rank())
                x = torch.randn(8, 6, generator=g)
                y = torch.randint(0, 2, (8,), generator=g)
                optimizer.zero_grad()
                loss = torch.nn.functional.cross_entropy(model(x), y) * scale
                loss.backward()
                optimizer.step()
            state.batch = 0
            state.commit()
        return 'done after %d epochs' % state.epoch

    assert train(state, 3, 7, scale=0.5) == 'done after 2 epochs'
    assert len(calls) == 1 and not resets  # a fixed-size job never resets
    assert torch.equal(calls[0], rank0_initial)  # sync() gave every rank rank 0's weights
    assert (state.epoch, state.batch) == (2, 0)
    assert not torch.equal(flat(model), rank0_initial)
    weights = flat(model)
    assert same_on_every_rank(weights.numpy().tobytes(), 'test.final_weights')
    # The last commit holds the final weights: restore() changes nothing.
    state.restore()
    assert torch.equal(flat(model), weights)


def test_restore_goes_back_to_the_last_commit():
    torch.manual_seed(3)
    model = torch.nn.Linear(4, 3)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.1)
    model(torch.ones(2, 4)).sum().backward()
    optimizer.step()
    state = hvd.elastic.TorchState(model, optimizer, epoch=1, batch=5, history=[1.0])
    assert (state.epoch, state.batch, state.history) == (1, 5, [1.0])
    state.commit()  # outside an elastic job: save(), and no collective
    saved_weights = flat(model).clone()
    saved_exp_avg = [s['exp_avg'].clone() for s in optimizer.state.values()]

    with torch.no_grad():
        for p in model.parameters():
            p.add_(1.0)
    optimizer.zero_grad()
    model(torch.ones(2, 4)).sum().backward()
    optimizer.step()
    state.epoch, state.batch = 4, 0
    state.history.append(2.0)  # in place: the saved list is the same object, as in Horovod
    state.history = [9.0]
    assert not torch.equal(flat(model), saved_weights)

    state.restore()
    assert torch.equal(flat(model), saved_weights)
    for s, e in zip(optimizer.state.values(), saved_exp_avg):
        assert torch.equal(s['exp_avg'], e)
    assert optimizer.state_dict()['state'][0]['step'] == 1
    assert (state.epoch, state.batch, state.history) == (1, 5, [1.0, 2.0])

    # A new module assigned to a handled attribute is saved at once.
    other = torch.nn.Linear(4, 3)
    state.model = other
    before = flat(other).clone()
    with torch.no_grad():
        other.weight.zero_()
    state.restore()
    assert state.model is other and torch.equal(flat(other), before)


def test_sync_gives_every_rank_rank_0s_state():
    torch.manual_seed(200 + hvd.rank())
    model = torch.nn.Linear(3, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1 * (hvd.rank() + 1), momentum=0.5)
    model(torch.ones(1, 3)).sum().backward()
    optimizer.step()  # a momentum buffer that differs per rank
    state = hvd.elastic.TorchState(model, optimizer, epoch=hvd.rank(), tag='rank%d' % hvd.rank())
    state.sync()
    assert (state.epoch, state.tag) == (0, 'rank0')
    assert optimizer.param_groups[0]['lr'] == pytest.approx(0.1)
    assert same_on_every_rank(flat(model).numpy().tobytes(), 'test.sync_weights')
    buffers = [s['momentum_buffer'].numpy().tobytes() for s in optimizer.state.values()]
    assert same_on_every_rank(buffers, 'test.sync_momentum')


def test_object_state_with_hora_broadcast():
    state = hvd.elastic.ObjectState(hvd.broadcast_object, hvd.rank, lr=0.1 * hvd.rank(),
                                    names=['r%d' % hvd.rank()])
    state.lr = 5.0
    state.commit()
    state.lr = 6.0
    state.restore()
    assert state.lr == 5.0
    state.sync()  # rank 0's saved objects
    assert state.lr == 5.0 and state.names == ['r0']


def test_run_outside_an_elastic_job_does_not_catch_failures():
    state = hvd.elastic.ObjectState(hvd.broadcast_object, hvd.rank, n=0)
    calls = []

    @hvd.elastic.run
    def fails(state):
        calls.append(1)
        raise hvd.HoraPeerFailure('peer rank 9 closed the connection')

    with pytest.raises(HorovodInternalError, match='rank 9'):
        fails(state)
    assert calls == [1]


def horovod_partition(n, size, rank, seed, epoch, processed):
    """What Horovod's ElasticSampler gives rank `rank` (its algorithm, written out)."""
    order = list(range(n))
    random.Random(seed + epoch).shuffle(order)
    rest = order[processed:]
    per_rank = -(-len(rest) // size)
    rest += rest[:per_rank * size - len(rest)]
    return rest[rank::size]


def test_elastic_sampler_partitions_every_index_once():
    dataset = list(range(100 * hvd.size()))
    sampler = hvd.elastic.ElasticSampler(dataset, shuffle=True, seed=5)
    mine = list(sampler)
    assert len(sampler) == len(mine) == 100
    assert mine == horovod_partition(len(dataset), hvd.size(), hvd.rank(), 5, 0, 0)
    everyone = hvd.allgather_object(mine, name='test.sampler_indices')
    assert sorted(i for part in everyone for i in part) == dataset  # disjoint and complete
    assert mine != sorted(mine)  # shuffled

    # Two batches of 7 on every rank, recorded: the rest of the epoch is partitioned again.
    sampler.record_batch(0, 7)
    sampler.record_batch(1, 7)
    assert sampler.state_dict() == {'epoch': 0, 'processed_num': 14 * hvd.size()}
    sampler.reset()
    rest = list(sampler)
    done = {i for part in everyone for i in part[:14]}
    everyone_rest = hvd.allgather_object(rest, name='test.sampler_rest')
    rest_all = [i for part in everyone_rest for i in part]
    assert done.isdisjoint(rest_all) and sorted(done | set(rest_all)) == dataset
    assert rest == horovod_partition(len(dataset), hvd.size(), hvd.rank(), 5, 0, 14 * hvd.size())

    sampler.set_epoch(1)  # a new order, nothing processed
    assert sampler.processed_num == 0
    assert list(sampler) == horovod_partition(len(dataset), hvd.size(), hvd.rank(), 5, 1, 0)

    # Not a multiple of size(): padded with the first indices, as Horovod does.
    odd = hvd.elastic.ElasticSampler(list(range(101)), shuffle=False)
    assert len(list(odd)) == len(odd) == -(-101 // hvd.size())
    assert list(odd)[:3] == [hvd.rank(), hvd.rank() + hvd.size(), hvd.rank() + 2 * hvd.size()]


def test_sampler_in_torch_state_is_saved_restored_and_synced():
    sampler = hvd.elastic.ElasticSampler(list(range(40)), seed=1)
    state = hvd.elastic.TorchState(train_sampler=sampler, epoch=0)
    sampler.record_batch(0, 4)
    state.commit()
    sampler.record_batch(1, 4)
    sampler.set_epoch(3)
    state.restore()
    assert sampler.state_dict() == {'epoch': 0, 'processed_num': 4 * hvd.size()}
    if hvd.rank() != 0:
        sampler.set_epoch(9)
    state.sync()
    assert sampler.state_dict() == {'epoch': 0, 'processed_num': 4 * hvd.size()}


# With shared memory on (the default) each init() forms new segments under keys of its own
# (runtime/shm/form_group.cc); HORA_SHM=0: test_elastic_local.py's
# test_shutdown_then_init_over_gloo.
def test_shutdown_then_init_joins_the_job_again():
    first = hvd.allreduce(torch.ones(3) * (hvd.rank() + 1), op=hvd.Sum)  # an unnamed op
    hvd.shutdown()
    assert not hvd.is_initialized()
    hvd.init()
    assert hvd.is_initialized()
    assert hvd.size() >= 1 and 0 <= hvd.rank() < hvd.size()
    again = hvd.allreduce(torch.ones(3) * (hvd.rank() + 1), op=hvd.Sum)
    assert torch.equal(first, again)
    assert torch.equal(hvd.broadcast(torch.full((2,), float(hvd.rank())), 0), torch.zeros(2))
    got = hvd.allgather(torch.tensor([hvd.rank()]))
    assert got.tolist() == list(range(hvd.size()))
