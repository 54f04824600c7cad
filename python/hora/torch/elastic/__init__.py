"""Horovod's elastic API for PyTorch (``horovod.torch.elastic``) on hora: docs/elastic.md.

    import hora.torch as hvd

    state = hvd.elastic.TorchState(model, optimizer, epoch=0, batch=0)

    @hvd.elastic.run
    def train(state):
        for state.epoch in range(state.epoch, epochs):
            ...
            state.commit()

    train(state)

The same program runs in a fixed-size job (no HORA_ELASTIC): train() syncs and runs once.
"""

import os

from hora.common.elastic import ObjectState, State, run_fn, set_runtime
from hora.common.exceptions import HorovodInternalError, HostsUpdatedInterrupt
from hora.torch import mpi_ops as _mpi_ops
from hora.torch import process_sets as _process_sets
from hora.torch.elastic.sampler import ElasticSampler
from hora.torch.elastic.state import TorchState
from hora.torch import _hora_torch as _C
from hora.torch.mpi_ops import init, shutdown  # noqa: F401 (there in Horovod's module too)

set_runtime(enabled=_C.elastic_enabled, reset_pending=_C.elastic_reset_pending)

DEFAULT_ELASTIC_TIMEOUT = 600.0


def run(func):
    """Decorator for the elastic training function ``func(state, *args, **kwargs)``.

    In an elastic job, every call syncs ``state`` from rank 0 and runs ``func``; when a rank is
    lost (a collective raises HorovodInternalError) it restores the last commit, moves to the
    launcher's next round and tries again; when hosts were added (commit() raised
    HostsUpdatedInterrupt) it moves to the next round without restoring. Reset callbacks run
    after every reset. Waiting for a round longer than HORA_ELASTIC_TIMEOUT seconds (horarun's
    --elastic-timeout) raises HoraTimeoutError.

    Collectives must not run between the start of the program and the call of the wrapped
    function, other than in state.sync(): new workers joining in a reset go straight to sync().
    """
    return run_fn(func, _reset)


def _reset():
    timeout = float(os.environ.get('HORA_ELASTIC_TIMEOUT', DEFAULT_ELASTIC_TIMEOUT))
    _mpi_ops._forget_ops()
    _C.elastic_reset(timeout)
    # The new round's job: the global set's ranks follow it (process sets added before the
    # reset are gone with the old round's communicators; add them again if needed).
    _process_sets.global_process_set.ranks = list(_C.process_set_ranks(0))


def round():
    """The round of the elastic job this process is in (0 at the start, +1 at every reset)."""
    return _C.elastic_round()


__all__ = [
    'run', 'State', 'ObjectState', 'TorchState', 'ElasticSampler',
    'HorovodInternalError', 'HostsUpdatedInterrupt',
]
