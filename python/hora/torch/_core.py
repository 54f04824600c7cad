"""The core of hora.torch that its op modules build on: the extension (``_C``), the queries
adasum needs, and the bookkeeping of ops in flight: the Python handles (``_register``) and the
engine's names of ops (``_auto_name``, numbered per op kind and process set).

Its own module so that mpi_ops and adasum each import it and not each other: mpi_ops hands
op=Adasum to adasum, and adasum submits through this.
"""

import itertools
import threading

from hora.torch import _hora_torch as _C

rank = _C.rank
size = _C.size


class _Pending(object):
    """What a Python handle stands for: engine handles and how to build the result."""
    __slots__ = ('ids', 'finish', 'describe')

    def __init__(self, ids, finish, describe):
        self.ids = ids            # _hora_torch handle ids
        self.finish = finish      # list of engine results -> the value synchronize() returns
        self.describe = describe  # "allreduce 'name' of shape [..] float32 on rank r" for errors


_pending = {}
_handle_counter = itertools.count(1)
_name_counters = {}
_lock = threading.Lock()
_tls = threading.local()


def _auto_name(op, name, ps_id=0):
    """The engine's name of an op: ``<op>.<name>`` (as Horovod names them, so the same name may
    be used by ops of different kinds, and timelines show Horovod's names), or without a name
    the next ``<op>.noname.<n>`` (``<op>.noname.set<id>.<n>`` on a process set): numbered per op
    and per set, so unnamed ops on a set need the same order only on its members."""
    names = getattr(_tls, 'names', None)
    if name is not None:
        name = '%s.%s' % (op, name)
        if names is not None:
            names.append(name)
        return name
    key = (op, ps_id) if ps_id else op  # the global set's keys as before sets existed
    with _lock:
        n = _name_counters.get(key, 0)
        _name_counters[key] = n + 1
    name = '%s.noname.set%d.%d' % (op, ps_id, n) if ps_id else '%s.noname.%d' % (op, n)
    if names is not None:
        names.append(name)
    return name


def _register(ids, finish, describe):
    handle = next(_handle_counter)
    _pending[handle] = _Pending(ids, finish, describe)
    return handle


def _set_size(ps_id):
    return size() if ps_id == 0 else _C.process_set_size(ps_id)
