"""Cross-rank shape checks with Horovod's rules: every rank gets the same
HoraMismatchError naming the ranks and shapes instead of wrong data or a hang; alltoall splits that
overflow 64 bits are a ValueError naming the rank and the splits."""

import pytest
import torch

import hora.torch as hvd


@pytest.fixture(autouse=True)
def _init(world):
    yield


def needs_two():
    if hvd.size() < 2:
        pytest.skip('needs two ranks')


def still_works():
    """The engine stays usable after a refused op."""
    assert torch.equal(hvd.allreduce(torch.ones(2), op=hvd.Sum),
                       torch.full((2,), float(hvd.size())))


def test_allgather_different_trailing_dimensions_is_refused():
    needs_two()
    r = hvd.rank()
    t = torch.arange(2 * (3 + r)).reshape(2, 3 + r)
    with pytest.raises(hvd.HoraMismatchError) as err:
        hvd.allgather(t, name='ag_trailing')
    msg = str(err.value)
    assert "Mismatched allgather tensor shapes for tensor 'allgather.ag_trailing'" in msg
    assert 'different dimensions after the first (dimension 1)' in msg
    assert 'rank 0 sent [2, 3] but rank 1 sent [2, 4]' in msg
    still_works()


def test_allgather_different_ranks_of_tensor_is_refused():
    needs_two()
    t = torch.ones(2, 3) if hvd.rank() == 0 else torch.ones(2, 3, 1)
    with pytest.raises(hvd.HoraMismatchError) as err:
        hvd.allgather(t, name='ag_ndims')
    msg = str(err.value)
    assert 'One or more ranks sent tensors of rank 2, but another rank sent a tensor of rank 3' \
        in msg
    assert 'rank 0 sent [2, 3] but rank 1 sent [2, 3, 1]' in msg
    still_works()


def test_allgather_different_first_dimension_is_allowed():
    t = torch.full((hvd.rank() + 1, 2), float(hvd.rank()))
    out = hvd.allgather(t, name='ag_ok')
    expect = torch.cat([torch.full((r + 1, 2), float(r)) for r in range(hvd.size())])
    assert torch.equal(out, expect)


def test_allreduce_same_count_different_shape_is_refused():
    needs_two()
    t = torch.ones(2, 3) if hvd.rank() == 0 else torch.ones(3, 2)
    with pytest.raises(hvd.HoraMismatchError) as err:
        hvd.allreduce(t, name='ar_shape')
    assert ("Mismatched allreduce tensor shapes for tensor 'allreduce.ar_shape': rank 0 sent "
            "[2, 3] but rank 1 sent [3, 2]") in str(err.value)
    still_works()


def test_broadcast_same_count_different_shape_is_refused():
    needs_two()
    t = torch.ones(6) if hvd.rank() == 0 else torch.ones(2, 3)
    with pytest.raises(hvd.HoraMismatchError) as err:
        hvd.broadcast(t, root_rank=0, name='bc_shape')
    assert ("Mismatched broadcast tensor shapes for tensor 'broadcast.bc_shape': rank 0 sent "
            "[6] but rank 1 sent [2, 3]") in str(err.value)
    still_works()


def test_broadcast_root_mismatch_is_refused():
    needs_two()
    with pytest.raises(hvd.HoraMismatchError) as err:
        hvd.broadcast(torch.ones(3), root_rank=hvd.rank(), name='bc_root')
    assert ("Mismatched broadcast root ranks for tensor 'broadcast.bc_root': rank 0 sent root 0 "
            "but rank 1") in str(err.value)
    still_works()


def test_alltoall_different_trailing_dimensions_is_refused():
    needs_two()
    n = hvd.size()
    t = torch.ones(n, 2 + hvd.rank())
    with pytest.raises(hvd.HoraMismatchError) as err:
        hvd.alltoall(t, splits=[1] * n, name='a2a_trailing')
    msg = str(err.value)
    assert "Mismatched alltoall tensor shapes for tensor 'alltoall.a2a_trailing'" in msg
    assert 'rank 0 sent [{}, 2] but rank 1 sent [{}, 3]'.format(n, n) in msg
    still_works()


def test_reducescatter_different_shape_is_refused():
    needs_two()
    n = hvd.size()
    t = torch.ones(n, 2 * n) if hvd.rank() == 0 else torch.ones(2 * n, n)
    with pytest.raises(hvd.HoraMismatchError) as err:
        hvd.reducescatter(t, name='rs_shape')
    assert ("Mismatched reducescatter tensor shapes for tensor 'reducescatter.rs_shape': rank 0 "
            "sent") in str(err.value)
    still_works()


def test_dtype_mismatch_is_refused():
    needs_two()
    t = torch.ones(3) if hvd.rank() == 0 else torch.ones(3, dtype=torch.float64)
    with pytest.raises(hvd.HoraMismatchError) as err:
        hvd.allgather(t, name='ag_dtype')
    assert ("Mismatched allgather data types for tensor 'allgather.ag_dtype': rank 0 sent "
            "float32 but rank 1 sent float64") in str(err.value)
    still_works()


def test_grouped_allgather_trailing_mismatch_is_refused():
    needs_two()
    r = hvd.rank()
    with pytest.raises(hvd.HoraMismatchError) as err:
        hvd.grouped_allgather([torch.ones(1, 2), torch.ones(1, 2 + r)], name='gag')
    assert 'Mismatched allgather tensor shapes' in str(err.value)
    assert 'rank 0 sent [1, 2] but rank 1 sent [1, 3]' in str(err.value)
    still_works()


def test_alltoall_splits_overflowing_int64_are_refused_on_the_rank():
    n = hvd.size()
    big = 2**63 - 1
    splits = [big, big] + [6] * (n - 2) if n >= 2 else [big]
    t = torch.ones(4 if n != 1 else 3, 2)
    with pytest.raises(ValueError) as err:
        hvd.alltoall(t, splits=splits, name='a2a_overflow')
    msg = str(err.value)
    assert 'rank {}: hora.torch.alltoall: splits ['.format(hvd.rank()) in msg
    assert str(big) in msg
    assert '_M_default_append' not in msg
    still_works()
