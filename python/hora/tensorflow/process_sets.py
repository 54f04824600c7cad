"""Horovod's process sets for hora.tensorflow, on libhora's (<hora/process_set.h>).

The rules are hora.torch's (docs/pytorch.md, "Process sets"), which are Horovod's: sets formed
at init (``hvd.init(process_sets=[...])``) or, with HOROVOD_DYNAMIC_PROCESS_SETS=1 or
``hvd.init(process_sets="dynamic")``, by add_process_set()/remove_process_set(), which every rank
of the job calls alike. Ops take ``process_set=``; broadcast roots are global ranks.
"""

import ctypes
import os

from hora.tensorflow import _core as _m

NOT_REGISTERED = 'Process set does not exist or has not been registered.'

_dynamic = False


class ProcessSet(object):
    """A set of global ranks that runs collectives together (Horovod's ProcessSet).
    process_set_id is filled in when the set is registered (None before, and after removal)."""
    process_set_id = None
    ranks = None
    mpi_comm = None

    def __init__(self, ranks_or_comm):
        try:
            ranks = list(ranks_or_comm)
        except TypeError:
            raise ValueError('hora.tensorflow.ProcessSet(%r): hora has no MPI, so a process set '
                             'is built from a list of global ranks' % (ranks_or_comm,)) from None
        if any(isinstance(r, bool) or not isinstance(r, int) for r in ranks):
            raise ValueError('ProcessSet should be initialized with a list of process ranks or '
                             'an mpi4py Comm object (hora.tensorflow: got %r)' % (ranks,))
        self.ranks = sorted(ranks)

    def _invalidate(self):
        self.process_set_id = None

    def size(self):
        if self.process_set_id is None:
            return None
        _registered(self.process_set_id, 'ProcessSet.size()')
        return _m._query(_m._C.hora_tf_process_set_size, self.process_set_id)

    def rank(self):
        """This rank's rank in the set; ValueError when it is not a member."""
        if self.process_set_id is None:
            return None
        _registered(self.process_set_id, 'ProcessSet.rank()')
        r = _m._query(_m._C.hora_tf_process_set_rank, self.process_set_id)
        if r < 0:
            raise ValueError('Process is not part of provided process set. (hora.tensorflow: '
                             'rank %d is not in %s)' % (_m.rank(), self))
        return r

    def included(self):
        if self.ranks is None:
            return None
        return _m.rank() in self.ranks

    def __str__(self):
        return 'ProcessSet(process_set_id=%s, ranks=%s, mpi_comm=%s)' % (
            self.process_set_id, self.ranks, self.mpi_comm)


global_process_set = ProcessSet([])
global_process_set.process_set_id = 0


def _ints(fn, *args):
    cap = 64
    while True:
        buf = (ctypes.c_int * cap)()
        n = ctypes.c_int(0)
        _m._check(fn(*args, buf, cap, ctypes.byref(n)))
        if n.value <= cap:
            return list(buf[:n.value])
        cap = n.value


def _ids():
    return _ints(_m._C.hora_tf_process_set_ids)


def _set_ranks(ps_id):
    return _ints(_m._C.hora_tf_process_set_ranks, ps_id)


def _registered(ps_id, what):
    if ps_id not in _ids():
        raise ValueError('%s (hora.tensorflow %s: process set id %r; known ids: %s)'
                         % (NOT_REGISTERED, what, ps_id, _ids()))


def _existing_id(ranks):
    for i in _ids():
        if _set_ranks(i) == list(ranks):
            return i
    return None


def _check_ranks(ranks, what):
    n = _m.size()
    if not ranks or len(set(ranks)) != len(ranks) or any(r < 0 or r >= n for r in ranks):
        raise ValueError('hora.tensorflow %s: ranks %s must be distinct global ranks in [0, %d) '
                         '(at least one)' % (what, ranks, n))


def _add(ranks):
    arr = (ctypes.c_int * len(ranks))(*ranks)
    out = ctypes.c_int(0)
    _m._check(_m._C.hora_tf_add_process_set(arr, len(ranks), ctypes.byref(out)))
    return out.value


def _env_dynamic():
    value = os.environ.get('HOROVOD_DYNAMIC_PROCESS_SETS', '').strip().lower()
    return value not in ('', '0', 'false', 'no', 'off')


def _setup(process_sets):
    """hvd.init()'s part: forms the sets of ``process_sets`` (a list, or "dynamic")."""
    global _dynamic
    if isinstance(process_sets, str):
        if process_sets.lower() != 'dynamic':
            raise ValueError('hora.tensorflow.init(process_sets=%r): pass a list of ProcessSet '
                             'or "dynamic"' % (process_sets,))
        os.environ['HOROVOD_DYNAMIC_PROCESS_SETS'] = '1'
        process_sets = []
    process_sets = list(process_sets or [])
    _dynamic = _env_dynamic()
    global_process_set.ranks = _set_ranks(0)
    seen = {0}
    for index, ps in enumerate(process_sets):
        if not isinstance(ps, ProcessSet) or ps.ranks is None:
            raise ValueError('hora.tensorflow.init(process_sets=...): entry number %d is not a '
                             'ProcessSet of ranks: %r' % (index, ps))
        _check_ranks(ps.ranks, 'init(process_sets=...) entry number %d' % index)
        existing = _existing_id(ps.ranks)
        ps.process_set_id = existing if existing is not None else _add(ps.ranks)
        if ps.process_set_id in seen:
            ps._invalidate()
            raise ValueError('Horovod could not be initialized because process_sets entry number '
                             '%d is a duplicate: %s' % (index, ps))
        seen.add(ps.process_set_id)


def _forget():
    global _dynamic
    _dynamic = False


def _require_dynamic(doing, call, ranks):
    if not _m.is_initialized():
        raise ValueError('Horovod has not been initialized; use hvd.init().')
    if not _dynamic:
        raise ValueError('Set HOROVOD_DYNAMIC_PROCESS_SETS=1 to allow %s process sets after '
                         'Horovod initialization. (hora.tensorflow.%s(%s); or call '
                         'hvd.init(process_sets="dynamic"))' % (doing, call, ranks))


def add_process_set(process_set):
    """Forms a set after init and returns it registered; every rank calls it alike."""
    if not isinstance(process_set, ProcessSet):
        process_set = ProcessSet(process_set)
    _require_dynamic('adding', 'add_process_set', process_set.ranks)
    _check_ranks(process_set.ranks, 'add_process_set')
    if _existing_id(process_set.ranks) is not None:
        raise ValueError('Attempted to add a duplicate process set: %s' % (process_set,))
    process_set.process_set_id = _add(process_set.ranks)
    return process_set


def remove_process_set(process_set):
    """Removes a registered set (every rank calls it alike); False for the global set or an
    unregistered one."""
    ps_id = process_set.process_set_id
    if ps_id is None or ps_id == 0:
        return False
    process_set._invalidate()
    _require_dynamic('removing', 'remove_process_set', process_set.ranks)
    if ps_id not in _ids():
        return False
    _m._check(_m._C.hora_tf_remove_process_set(ps_id))
    return True


def _temp_process_set_object(process_set_id):
    """A ProcessSet for an id read back from an op's attributes (gradients)."""
    if process_set_id == 0:
        return global_process_set
    ps = ProcessSet(_set_ranks(process_set_id))
    ps.process_set_id = process_set_id
    return ps


def _check_member(process_set, what):
    """Horovod's refusals, when the op is built: an unregistered set, or one without this
    rank."""
    if process_set is None or process_set.process_set_id == 0:
        return
    ps_id = process_set.process_set_id
    if ps_id is None or ps_id not in _ids():
        raise ValueError('%s: Process set provided does not exist, or has not been registered. '
                         '(hora.tensorflow: %s)' % (what.capitalize(), process_set))
    if _m._query(_m._C.hora_tf_process_set_rank, ps_id) < 0:
        raise ValueError('%s: Rank %d is not a member of the provided process set. '
                         '(hora.tensorflow: %s)' % (what.capitalize(), _m.rank(), process_set))
