"""hvd.join() with Horovod's semantics: after uneven numbers of steps, a rank that has
joined takes part in the others' allreduces with zeros (Average still divides by size()), join
returns at once on every rank once the last rank joins, and returns that rank everywhere.

A regression hangs (a joined rank that does not serve the others' allreduces), so every test runs
under a deadline: faulthandler prints the stacks and ends the rank, failing the job long before
the stall check's 180 s or meson's timeout."""


import pytest
import torch

import hora.torch as hvd

DEADLINE_S = 60


@pytest.fixture(autouse=True)
def _deadline(world_with_deadline):
    yield


def expected(step, scale, size):
    """What every rank still stepping receives at `step`: ranks q >= step still step and send
    scale * (q + 1); the joined ranks send zeros."""
    return sum(scale * (q + 1) for q in range(step, size))


def run_uneven_epoch(tag):
    """Rank r runs r + 1 steps of two allreduces (one Average, one Sum, the same names every step
    so the response cache serves them), then joins. Returns (results, last)."""
    r, n = hvd.rank(), hvd.size()
    results = []
    for step in range(r + 1):
        grad = torch.full((5,), float(r + 1))
        count = torch.full((3,), 10 * (r + 1), dtype=torch.int64)
        avg = hvd.allreduce(grad, name=tag + '.grad', op=hvd.Average)
        total = hvd.allreduce(count, name=tag + '.count', op=hvd.Sum)
        results.append((step, avg, total))
    last = hvd.join()
    return results, last


def check_epoch(results, last):
    r, n = hvd.rank(), hvd.size()
    assert len(results) == r + 1
    for step, avg, total in results:
        # Horovod: zeros from joined ranks, Average divided by the whole size.
        want_avg = torch.full((5,), expected(step, 1.0, n) / n)
        want_sum = torch.full((3,), expected(step, 10, n), dtype=torch.int64)
        assert torch.allclose(avg, want_avg), (step, avg, want_avg)
        assert torch.equal(total, want_sum), (step, total, want_sum)
    # Rank n-1 steps longest: its last step can only run once every other rank has joined, so it
    # is the last to join, on every rank.
    assert last == n - 1


def test_join_after_uneven_steps_returns_the_last_rank():
    results, last = run_uneven_epoch('uneven')
    check_epoch(results, last)


def test_join_twice_and_collectives_after_it():
    """A second epoch works the same (join's state was reset), and a plain collective after it
    sees every rank again."""
    check_epoch(*run_uneven_epoch('again'))
    everyone = hvd.allreduce(torch.ones(2), name='after_join', op=hvd.Sum)
    assert torch.equal(everyone, torch.full((2,), float(hvd.size())))


def test_join_agrees_on_every_rank():
    last = hvd.join()
    seen = hvd.allgather(torch.tensor([last]), name='join_results')
    assert 0 <= last < hvd.size()
    assert seen.tolist() == [last] * hvd.size()


def test_allgather_while_a_rank_has_joined_fails():
    """As Horovod's controller does: only allreduce runs alongside a join."""
    if hvd.size() < 2:
        pytest.skip('needs two ranks')
    if hvd.rank() == 0:
        last = hvd.join()
    else:
        with pytest.raises(hvd.HoraMismatchError) as err:
            hvd.allgather(torch.ones(2), name='ag_joined')
        assert "allgather 'allgather.ag_joined' is not supported while a rank has joined" \
            in str(err.value)
        last = hvd.join()
    assert last != 0


def test_unnamed_ops_refused_beside_a_join_in_every_round():
    """Horovod's pattern (its test_horovod_join_allgather): each rank in turn joins first while
    the others submit an unnamed allgather, which is refused, then join. A rank that joined in
    an earlier round numbered one unnamed allgather fewer than the others, so the ranks that are
    refused may submit different names: each must be refused at once, not wait for the others
    (at -np 3 they used to wait forever)."""
    if hvd.size() < 2:
        pytest.skip('needs two ranks')
    for first in range(hvd.size()):
        if hvd.rank() != first:
            with pytest.raises(hvd.HoraMismatchError, match='not supported while a rank has'):
                hvd.allgather(torch.ones(3))
        last = hvd.join()
        assert last != first
        assert hvd.allgather_object(last, name='join.round.%d' % first) == [last] * hvd.size()
    got = hvd.allreduce(torch.ones(2), op=hvd.Sum, name='join.rounds.after')
    assert torch.equal(got, torch.full((2,), float(hvd.size())))
