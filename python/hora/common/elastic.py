"""Horovod's elastic machinery (``horovod.common.elastic``), framework-neutral: State,
ObjectState and run_fn. hora.torch.elastic builds TorchState and run() on them.

In an elastic job (horarun with --min-np, --max-np or --host-discovery-script; docs/elastic.md)
the training function runs under run(): a lost rank makes collectives raise
HorovodInternalError, run() restores the last commit, moves to the launcher's next round
(``reset``) and calls the function again after sync(); new hosts make commit() raise
HostsUpdatedInterrupt on every rank together, and run() resets without restoring. Outside an
elastic job nothing ever resets: run() syncs and calls the function once; commit() saves.
"""

import functools
import os

from hora.common.exceptions import HorovodInternalError, HostsUpdatedInterrupt


class _Runtime(object):
    """What State and run_fn ask the runtime: whether this is an elastic job, and whether the
    launcher announced a round this rank has not joined. A framework binding (hora.torch)
    installs its own with set_runtime(); this default reads the environment only."""

    @staticmethod
    def enabled():
        return os.environ.get('HORA_ELASTIC') == '1'

    @staticmethod
    def reset_pending():
        return False


_runtime = _Runtime()


def set_runtime(enabled, reset_pending):
    """Installs the binding's ``enabled()`` and ``reset_pending()`` (hora.torch.elastic does)."""
    _runtime.enabled = enabled
    _runtime.reset_pending = reset_pending


class State(object):
    """State tracked across the workers of an elastic job.

    Args:
        bcast_object: broadcasts a picklable object from rank 0 to every rank (returns it).
        get_rank: returns this worker's current rank.
    """

    def __init__(self, bcast_object, get_rank):
        self._bcast_object = bcast_object
        self._rank = get_rank
        self._reset_callbacks = []

    def register_reset_callbacks(self, callbacks):
        """Registers functions called after every reset (a worker added or removed), e.g. to
        scale the learning rate by the new size()."""
        self._reset_callbacks.extend(callbacks)

    def on_reset(self):
        self.reset()
        for callback in self._reset_callbacks:
            callback()

    def commit(self):
        """Saves the state (what a failure goes back to), then check_host_updates(): raises
        HostsUpdatedInterrupt on every rank when the launcher announced new hosts.

        A commit copies the state, so commit every few batches rather than every one: that
        trades the time of a commit against the work lost when a worker fails."""
        self.save()
        self.check_host_updates()

    def check_host_updates(self):
        """Raises HostsUpdatedInterrupt, on every rank together, when the launcher announced a
        new round. Rank 0 decides and broadcasts its view, so no rank goes on alone. Outside an
        elastic job it does nothing (no collective)."""
        if not _runtime.enabled():
            return
        pending = bool(_runtime.reset_pending()) if self._rank() == 0 else False
        if self._bcast_object(pending):
            raise HostsUpdatedInterrupt(False)

    def save(self):
        """Saves the state in host memory."""
        raise NotImplementedError()

    def restore(self):
        """Goes back to the last save(), undoing the changes since."""
        raise NotImplementedError()

    def sync(self):
        """Gives every worker rank 0's state."""
        raise NotImplementedError()

    def reset(self):
        """Resets objects after a reset event, before sync() (nothing by default)."""


class ObjectState(State):
    """State of plain Python objects, given as keyword arguments and exposed as attributes.

    Args:
        bcast_object: broadcasts the saved objects from rank 0 (sync()).
        get_rank: returns this worker's rank.
        kwargs: the objects; ``state.<name>`` reads and writes them.
    """

    def __init__(self, bcast_object, get_rank, **kwargs):
        self._saved_state = kwargs
        self._set_attrs()
        super(ObjectState, self).__init__(bcast_object=bcast_object, get_rank=get_rank)

    def save(self):
        self._saved_state = {name: getattr(self, name) for name in self._saved_state}

    def restore(self):
        self._set_attrs()

    def sync(self):
        # Rank 0's last saved values (as Horovod: changes since the last commit are not sent).
        if self._saved_state:
            self._saved_state = self._bcast_object(self._saved_state)
            self._set_attrs()

    def _set_attrs(self):
        for name, value in self._saved_state.items():
            setattr(self, name, value)


def run_fn(func, reset):
    """Wraps ``func(state, *args, **kwargs)`` in the elastic loop; ``reset()`` moves the runtime
    to the launcher's next round. hora.torch.elastic.run is run_fn with hora.torch's reset."""

    @functools.wraps(func)
    def wrapper(state, *args, **kwargs):
        if not _runtime.enabled():
            # A fixed-size job: nothing resets, so failures are the program's end.
            state.sync()
            return func(state, *args, **kwargs)
        skip_sync = False
        while True:
            try:
                if not skip_sync:
                    state.sync()
                return func(state, *args, **kwargs)
            except HorovodInternalError:
                # A rank was lost: the work since the last commit is gone everywhere.
                state.restore()
                skip_sync = False
            except HostsUpdatedInterrupt as e:
                skip_sync = e.skip_sync
            reset()
            state.on_reset()

    return wrapper
