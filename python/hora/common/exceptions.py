"""Horovod's exceptions (``horovod.common.exceptions``), so that Horovod programs' imports work:

    from hora.common.exceptions import HorovodInternalError, HostsUpdatedInterrupt

hora.torch's errors that mean "a rank was lost or the job is being reset" — HoraPeerFailure,
HoraAbortedError, HoraConnectionError, and HoraTimeoutError (a peer that stopped answering, e.g.
its host cut off the network) — are subclasses of HorovodInternalError, so elastic
run() (and a user's ``except HorovodInternalError``) catches them.
"""


class HorovodInternalError(RuntimeError):
    """A collective failed because a peer was lost or the job is being reset (a rank died, its
    connection closed, or horarun aborted or reset the job). An elastic run() restores the last
    commit and resets to the next round when it catches one."""


class HostsUpdatedInterrupt(RuntimeError):
    """Raised by State.commit() (check_host_updates()) on every rank at the same commit when the
    launcher announced a new round (hosts were added). An elastic run() resets without restoring:
    nothing was lost. ``skip_sync``: whether the state need not be synced after the reset (only
    when no new rank joins, as in Horovod)."""

    def __init__(self, skip_sync=False):
        super(HostsUpdatedInterrupt, self).__init__(
            'the launcher announced a new round of the elastic job (hosts were updated)')
        self.skip_sync = skip_sync
