"""Horovod's process sets (``horovod.common.process_sets``) on libhora's (<hora/process_set.h>).

A ProcessSet names a subset of the job's ranks that runs collectives on its own: pass it as
``process_set=`` to any op or to DistributedOptimizer. Sets are formed at init
(``hvd.init(process_sets=[...])``, every rank passing the same list) or, with
HOROVOD_DYNAMIC_PROCESS_SETS=1 or ``hvd.init(process_sets="dynamic")``, later with
add_process_set() / remove_process_set(), which every rank of the job must call alike (members
and non-members). Ops take GLOBAL ranks where Horovod does (broadcast's root_rank); rank() of a
set is this rank's position in its ascending ranks.
"""

import os

from hora.torch import _hora_torch as _C

# Horovod's messages (horovod/common/basics.py, process_sets.py), with hora's context added.
NOT_REGISTERED = 'Process set does not exist or has not been registered.'
NOT_MEMBER = 'Process is not part of provided process set.'

_dynamic = False  # set by init: HOROVOD_DYNAMIC_PROCESS_SETS=1 or process_sets="dynamic"


class ProcessSet(object):
    """A set of ranks that runs collectives together (Horovod's ProcessSet). Build it from a
    list of global ranks, then pass it to hvd.init(process_sets=[...]) or
    hvd.add_process_set(); process_set_id is filled in then (None until, and after removal)."""
    process_set_id = None
    ranks = None
    mpi_comm = None

    def __init__(self, ranks_or_comm):
        try:
            ranks = list(ranks_or_comm)
        except TypeError:  # not iterable: Horovod's mpi4py communicator
            raise ValueError('hora.torch.ProcessSet(%r): hora has no MPI, so a process set is '
                             'built from a list of global ranks (Horovod also takes an mpi4py '
                             'Comm when built with MPI)' % (ranks_or_comm,)) from None
        if any(isinstance(r, bool) or not isinstance(r, int) for r in ranks):
            raise ValueError('ProcessSet should be initialized with a list of process ranks or '
                             'an mpi4py Comm object (hora.torch: got %r)' % (ranks,))
        self.ranks = sorted(ranks)

    def _invalidate(self):
        self.process_set_id = None

    def size(self):
        """The number of ranks in the set, or None when it is not registered."""
        if self.process_set_id is None:
            return None
        return set_size(self.process_set_id)

    def rank(self):
        """This rank's rank within the set (its position among the set's ascending global
        ranks), or None when the set is not registered. ValueError when this rank is not in it.
        Ops such as broadcast still take global ranks, as in Horovod."""
        if self.process_set_id is None:
            return None
        r = set_rank(self.process_set_id)
        if r < 0:
            raise ValueError('%s (hora.torch: rank %d is not in %s)' % (NOT_MEMBER, _C.rank(),
                                                                        self))
        return r

    def included(self):
        """Whether this rank is in the set (None when the set has no ranks list)."""
        if self.ranks is None:
            return None
        return _C.rank() in self.ranks

    def __str__(self):
        return 'ProcessSet(process_set_id=%s, ranks=%s, mpi_comm=%s)' % (
            self.process_set_id, self.ranks, self.mpi_comm)


global_process_set = ProcessSet([])
global_process_set.process_set_id = 0


def _registered(process_set_id, what):
    """Raises ValueError (Horovod's words) unless libhora knows the set."""
    if process_set_id not in _C.process_set_ids():
        raise ValueError('%s (hora.torch %s: process set id %r; known ids: %s)'
                         % (NOT_REGISTERED, what, process_set_id, _C.process_set_ids()))


def set_size(process_set_id):
    """The size of a registered set (0: the global set)."""
    _registered(process_set_id, 'ProcessSet.size()')
    return _C.process_set_size(process_set_id)


def set_rank(process_set_id):
    """This rank's rank within a registered set, -1 when it is not a member."""
    _registered(process_set_id, 'ProcessSet.rank()')
    return _C.process_set_rank(process_set_id)


def set_ranks(process_set_id):
    """The global ranks of a registered set, ascending."""
    _registered(process_set_id, 'process set ranks')
    return list(_C.process_set_ranks(process_set_id))


def _env_dynamic():
    value = os.environ.get('HOROVOD_DYNAMIC_PROCESS_SETS', '').strip().lower()
    return value not in ('', '0', 'false', 'no', 'off')


def _existing_id(ranks):
    """The id of the registered set with exactly these ranks, or None."""
    for i in _C.process_set_ids():
        if list(_C.process_set_ranks(i)) == list(ranks):
            return i
    return None


def _check_ranks(ranks, what):
    n = _C.size()
    bad = [r for r in ranks if r < 0 or r >= n]
    if bad or len(set(ranks)) != len(ranks) or not ranks:
        raise ValueError('hora.torch %s: ranks %s must be distinct global ranks in [0, %d) '
                         '(at least one)' % (what, ranks, n))


def init_process_sets(process_sets):
    """Called by hvd.init() once libhora is up: forms every set of ``process_sets`` (a list of
    ProcessSet, or "dynamic"), in list order, and fills in their ids. Every rank passes the
    same list. Raises ValueError for a duplicate entry, as Horovod's init."""
    global _dynamic
    if isinstance(process_sets, str):
        if process_sets.lower() != 'dynamic':
            raise ValueError('hora.torch.init(process_sets=%r): pass a list of ProcessSet or '
                             '"dynamic"' % (process_sets,))
        os.environ['HOROVOD_DYNAMIC_PROCESS_SETS'] = '1'  # as Horovod's init does
        process_sets = []
    process_sets = list(process_sets or [])
    _dynamic = _env_dynamic()
    global_process_set.ranks = list(_C.process_set_ranks(0))
    for ps in process_sets:
        if not isinstance(ps, ProcessSet):
            raise ValueError('hora.torch.init(process_sets=...): entries must be ProcessSet '
                             'objects, got %r' % (ps,))
    seen = {0}
    for index, ps in enumerate(process_sets):
        if ps.ranks is None:
            raise ValueError('hora.torch.init: process_sets entry number %d has no ranks: %s'
                             % (index, ps))
        _check_ranks(ps.ranks, 'init(process_sets=...) entry number %d' % (index,))
        existing = _existing_id(ps.ranks)
        ps.process_set_id = existing if existing is not None else _C.add_process_set(ps.ranks)
        if ps.process_set_id in seen:
            ps._invalidate()
            raise ValueError('Horovod could not be initialized because process_sets entry number '
                             '%d is a duplicate: %s' % (index, ps))
        seen.add(ps.process_set_id)


def _require_dynamic(doing, call, ranks):
    """Horovod's refusals of add/remove_process_set: before init, or without dynamic sets."""
    if not _C.is_initialized():
        raise ValueError('Horovod has not been initialized; use hvd.init().')
    if not _dynamic:
        raise ValueError('Set HOROVOD_DYNAMIC_PROCESS_SETS=1 to allow %s process sets after '
                         'Horovod initialization. (hora.torch.%s(%s); or call '
                         'hvd.init(process_sets="dynamic"))' % (doing, call, ranks))


def add_process_set(process_set):
    """Forms a new set after init and returns it, registered (HOROVOD_DYNAMIC_PROCESS_SETS=1
    or init(process_sets="dynamic") needed). A collective of the whole job: every rank calls it
    with the same ranks, in the same order. ValueError when a set with the same ranks exists."""
    if not isinstance(process_set, ProcessSet):
        process_set = ProcessSet(process_set)
    _require_dynamic('adding', 'add_process_set', process_set.ranks)
    _check_ranks(process_set.ranks, 'add_process_set')
    if _existing_id(process_set.ranks) is not None:
        raise ValueError('Attempted to add a duplicate process set: %s' % (process_set,))
    process_set.process_set_id = _C.add_process_set(process_set.ranks)
    return process_set


def remove_process_set(process_set):
    """Removes a set formed at init or by add_process_set() and invalidates ``process_set``
    (its process_set_id becomes None). A collective of the whole job. Returns whether a set was
    removed: False for the global set or an unregistered one."""
    process_set_id = process_set.process_set_id
    if process_set_id is None or process_set_id == 0:
        return False
    process_set._invalidate()  # as Horovod: before the removal, whatever its outcome
    _require_dynamic('removing', 'remove_process_set', process_set.ranks)
    if process_set_id not in _C.process_set_ids():
        return False
    _C.remove_process_set(process_set_id)
    return True


def resolve(process_set, what):
    """The libhora id an op runs on: 0 for None or the global set; ValueError (Horovod's words)
    for an unregistered set or one this rank is not in."""
    if process_set is None or process_set is global_process_set:
        return 0
    if not isinstance(process_set, ProcessSet):
        raise ValueError('hora.torch %s: process_set must be a hvd.ProcessSet, got %r'
                         % (what, process_set))
    ps_id = process_set.process_set_id
    if ps_id == 0:
        return 0
    if ps_id is None or ps_id not in _C.process_set_ids():
        raise ValueError('%s: Process set provided does not exist, or has not been registered. '
                         '(hora.torch: %s; form it with hvd.init(process_sets=[...]) or '
                         'hvd.add_process_set())' % (what.capitalize(), process_set))
    if _C.process_set_rank(ps_id) < 0:
        raise ValueError('%s: Rank %d is not a member of the provided process set. '
                         '(hora.torch: %s; call it only where process_set.included())'
                         % (what.capitalize(), _C.rank(), process_set))
    return ps_id
