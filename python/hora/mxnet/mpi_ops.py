"""hora.mxnet's collectives: NDArrays handed to libhora through hora_mx_ops.so (ctypes).

Each op reads its input's memory after ``wait_to_read()`` (MXNet's engine has finished every
write to it); the in-place ops (allreduce_, broadcast_) first wait for every op pushed to
MXNet's engine (``mx.nd.waitall()``), since they write behind its back. The calls are
synchronous, where Horovod's MXNet ops are pushed onto MXNet's engine. Ops are named
(``name=``, else numbered per kind: unnamed ops must come in the same order on every rank, as
in Horovod); libhora's engine matches the ranks' ops by name, so named ops may be called in any
order, and checks that the ranks agree (shapes, dtypes, ops, roots: HoraMismatchError).
"""

import ctypes
import itertools
import os

import numpy as np
import mxnet as mx

_LIB_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'hora_mx_ops.so')
if not os.path.exists(_LIB_PATH):
    raise ImportError('hora.mxnet: %s is missing: build hora (meson compile -C build), then put '
                      'build/python on PYTHONPATH (docs/tensorflow.md, "MXNet")' % _LIB_PATH)
_C = ctypes.CDLL(_LIB_PATH)
_C.hora_mx_last_error.restype = ctypes.c_char_p
_C.hora_mx_free.argtypes = [ctypes.c_void_p]

# Horovod's reduce ops (horovod/common/basics.py numbering).
Average, Sum, Adasum, Min, Max, Product = 0, 1, 2, 3, 4, 5
# ... and libhora's (hora::ReduceOp).
_HORA_OP = {Sum: 0, Average: 1, Min: 2, Max: 3, Product: 4}
# numpy dtype -> hora::DataType; bool and int16 travel as uint8 / int16 bytes where only moved.
_HORA_TYPE = {np.dtype(np.uint8): 0, np.dtype(np.int8): 1, np.dtype(np.int32): 2,
              np.dtype(np.int64): 3, np.dtype(np.float16): 4, np.dtype(np.float32): 6,
              np.dtype(np.float64): 7}


class HoraError(RuntimeError):
    """A collective failed (hora's error classes, as in hora.torch and hora.tensorflow)."""


class HoraUsageError(HoraError):
    pass


class HorovodInternalError(HoraError):
    """A lost rank or an aborted job (Horovod's name)."""


class HoraConnectionError(HorovodInternalError):
    pass


class HoraTimeoutError(HorovodInternalError):
    pass


class HoraPeerFailure(HorovodInternalError):
    pass


class HoraAbortedError(HorovodInternalError):
    pass


class HoraMismatchError(HoraError):
    pass


_KINDS = {1: HoraUsageError, 2: HoraConnectionError, 3: HoraTimeoutError, 4: HoraPeerFailure,
          5: HoraMismatchError, 6: HoraAbortedError, 7: HoraError}


def _check(code):
    if code:
        raise _KINDS.get(code, HoraError)(_C.hora_mx_last_error().decode('utf-8', 'replace'))


# --- Basics ------------------------------------------------------------------------------------


class ProcessSet(object):
    """A set of global ranks that runs collectives together (Horovod's ProcessSet)."""
    process_set_id = None

    def __init__(self, ranks):
        self.ranks = sorted(int(r) for r in ranks)

    def _query(self):
        if self.process_set_id is None:
            raise ValueError('Process set does not exist or has not been registered.')
        size, rank = ctypes.c_int(), ctypes.c_int()
        _check(_C.hora_mx_set_query(self.process_set_id, ctypes.byref(size), ctypes.byref(rank)))
        return size.value, rank.value

    def size(self):
        return self._query()[0]

    def rank(self):
        r = self._query()[1]
        if r < 0:
            raise ValueError('Process is not part of provided process set. (hora.mxnet: rank '
                             '%d is not in %s)' % (rank(), self))
        return r

    def included(self):
        return self._query()[1] >= 0

    def __repr__(self):
        return 'ProcessSet(process_set_id=%s, ranks=%s)' % (self.process_set_id, self.ranks)


global_process_set = ProcessSet([])
global_process_set.process_set_id = 0


def add_process_set(process_set):
    """Registers a set on every rank (every rank calls it alike); returns it."""
    ps = process_set if isinstance(process_set, ProcessSet) else ProcessSet(process_set)
    ranks = (ctypes.c_int * len(ps.ranks))(*ps.ranks)
    pid = ctypes.c_int()
    _check(_C.hora_mx_add_process_set(ranks, len(ps.ranks), ctypes.byref(pid)))
    ps.process_set_id = pid.value
    return ps


def remove_process_set(process_set):
    _check(_C.hora_mx_remove_process_set(process_set.process_set_id))
    process_set.process_set_id = None
    return True


def init(comm=None, process_sets=None):
    """Joins the job horarun started (a world of one outside it); ``process_sets``: sets to
    register at once. ``comm`` (MPI) is not supported: hora has no MPI."""
    if comm is not None:
        raise NotImplementedError('hora.mxnet.init(comm=...): hora has no MPI; launch with '
                                  'horarun')
    _check(_C.hora_mx_init())
    for ps in process_sets or []:
        add_process_set(ps)


def shutdown():
    _check(_C.hora_mx_shutdown())


def is_initialized():
    return bool(_C.hora_mx_is_initialized())


def _query(what):
    out = ctypes.c_int()
    _check(_C.hora_mx_query(what, ctypes.byref(out)))
    return out.value


def rank():
    return _query(0)


def size():
    return _query(1)


def local_rank():
    return _query(2)


def local_size():
    return _query(3)


def cross_rank():
    return _query(4)


def cross_size():
    return _query(5)


def is_homogeneous():
    return True


def mpi_built():
    return False


def mpi_enabled():
    return False


def gloo_built():
    return True


def gloo_enabled():
    return True


def nccl_built():
    return 0


def cuda_built():
    return False


def rocm_built():
    return False


# --- Collectives -------------------------------------------------------------------------------

_counters = {}


def _name(kind, name, process_set):
    if name is not None:
        return str(name)
    key = (kind, process_set.process_set_id)
    counter = _counters.setdefault(key, itertools.count())
    return '%s.noname.%s%d' % (kind, 'set%d.' % key[1] if key[1] else '', next(counter))


def _ptr(array):
    p = ctypes.c_void_p()
    mx.base.check_call(mx.base._LIB.MXNDArrayGetData(array.handle, ctypes.byref(p)))
    return p


def _dims(array):
    return (ctypes.c_int64 * max(array.ndim, 1))(*array.shape), array.ndim


def _wire_type(array, what, reducing):
    dtype = np.dtype(array.dtype)
    if dtype in _HORA_TYPE:
        return _HORA_TYPE[dtype], array
    if reducing:
        raise ValueError('hora.mxnet %s: %s tensors cannot be reduced (uint8, int8, int32, '
                         'int64, float16, float32, float64 can)' % (what, dtype))
    return None, array


def _cpu(tensor, what):
    if tensor.context.device_type != 'cpu':
        raise NotImplementedError('hora.mxnet %s: the tensor is on %s; hora.mxnet moves CPU '
                                  'NDArrays only' % (what, tensor.context))


def _reduce_op(op, average, what):
    if op is None:
        op = Average if (average is None or average) else Sum
    elif average is not None:
        raise ValueError('The op parameter supersedes average. Please provide only one of them.')
    if op == Adasum:
        raise NotImplementedError('hora.mxnet %s: op=Adasum is not implemented for MXNet '
                                  '(hora.torch and hora.tensorflow have it)' % what)
    if op not in _HORA_OP:
        raise ValueError('hora.mxnet %s: unknown reduce op %r' % (what, op))
    return op


def allreduce_(tensor, average=None, name=None, priority=0, prescale_factor=1.0,
               postscale_factor=1.0, process_set=global_process_set, op=None):
    """Reduces ``tensor`` over the process set's ranks in place (Average by default) and
    returns it. ``priority`` is accepted for Horovod's signature (the engine orders ops by
    name)."""
    op = _reduce_op(op, average, 'allreduce')
    _cpu(tensor, 'allreduce')
    dtype, _ = _wire_type(tensor, 'allreduce', True)
    if prescale_factor != 1.0:
        tensor *= prescale_factor
    # Written behind MXNet's engine: every op pushed so far, writers and readers, is done first.
    mx.nd.waitall()
    dims, ndim = _dims(tensor)
    p = _ptr(tensor)
    _check(_C.hora_mx_allreduce(_name('allreduce', name, process_set).encode(), p, p, dims,
                                ndim, dtype, _HORA_OP[op], process_set.process_set_id))
    if postscale_factor != 1.0:
        tensor *= postscale_factor
    return tensor


def allreduce(tensor, average=None, name=None, priority=0, prescale_factor=1.0,
              postscale_factor=1.0, process_set=global_process_set, op=None):
    """allreduce_ of a copy: ``tensor`` is unchanged."""
    return allreduce_(tensor.copy(), average=average, name=name, priority=priority,
                      prescale_factor=prescale_factor, postscale_factor=postscale_factor,
                      process_set=process_set, op=op)


def grouped_allreduce_(tensors, average=None, name=None, priority=0, prescale_factor=1.0,
                       postscale_factor=1.0, process_set=global_process_set, op=None):
    """allreduce_ of every tensor (tensor i named '<name>.<i>')."""
    base = _name('grouped_allreduce', name, process_set)
    for i, t in enumerate(tensors):
        allreduce_(t, average=average, name='%s.%d' % (base, i), prescale_factor=prescale_factor,
                   postscale_factor=postscale_factor, process_set=process_set, op=op)
    return tensors


def grouped_allreduce(tensors, average=None, name=None, priority=0, prescale_factor=1.0,
                      postscale_factor=1.0, process_set=global_process_set, op=None):
    return grouped_allreduce_([t.copy() for t in tensors], average=average, name=name,
                              prescale_factor=prescale_factor, postscale_factor=postscale_factor,
                              process_set=process_set, op=op)


def allgather(tensor, name=None, priority=0, process_set=global_process_set):
    """The concatenation of every rank's ``tensor`` along the first dimension (which may
    differ between ranks; the others must match)."""
    _cpu(tensor, 'allgather')
    arr = tensor.reshape((1,)) if tensor.ndim == 0 else tensor
    dtype, _ = _wire_type(arr, 'allgather', False)
    src = arr
    if dtype is None:  # moved as bytes
        src = mx.nd.array(arr.asnumpy().view(np.uint8).reshape(arr.shape + (-1,)),
                          dtype=np.uint8)
        dtype = 0
    src.wait_to_read()
    dims, ndim = _dims(src)
    out, count = ctypes.c_void_p(), ctypes.c_int64()
    _check(_C.hora_mx_allgather(_name('allgather', name, process_set).encode(), _ptr(src), dims,
                                ndim, dtype, process_set.process_set_id, ctypes.byref(out),
                                ctypes.byref(count)))
    try:
        raw = np.ctypeslib.as_array(ctypes.cast(out, ctypes.POINTER(ctypes.c_uint8)),
                                    (count.value * np.dtype(src.dtype).itemsize,))
        gathered = raw.view(src.dtype).reshape((-1,) + tuple(src.shape[1:]))
        if src is not arr:
            gathered = gathered.reshape(gathered.shape[0], -1).copy().view(arr.dtype).reshape(
                (-1,) + tuple(arr.shape[1:]))
        return mx.nd.array(gathered, dtype=arr.dtype, ctx=tensor.context)
    finally:
        _C.hora_mx_free(out)


def broadcast_(tensor, root_rank, name=None, priority=0, process_set=global_process_set):
    """``tensor`` becomes the root's (a global rank), in place; returns it."""
    _cpu(tensor, 'broadcast')
    dtype, _ = _wire_type(tensor, 'broadcast', False)
    if process_set.process_set_id != 0:
        if root_rank not in process_set.ranks:
            raise ValueError('hora.mxnet broadcast: root rank %d is not in %s'
                             % (root_rank, process_set))
        root = process_set.ranks.index(root_rank)
    else:
        root = root_rank
    mx.nd.waitall()  # written behind MXNet's engine, as in allreduce_
    if dtype is None:  # moved as bytes, through a uint8 copy
        raw = mx.nd.array(tensor.asnumpy().view(np.uint8), dtype=np.uint8)
        broadcast_(raw, root_rank, name=name, process_set=process_set)
        tensor[:] = mx.nd.array(raw.asnumpy().view(tensor.dtype).reshape(tensor.shape),
                                dtype=tensor.dtype)
        return tensor
    dims, ndim = _dims(tensor)
    _check(_C.hora_mx_broadcast(_name('broadcast', name, process_set).encode(), _ptr(tensor),
                                dims, ndim, dtype, root, process_set.process_set_id))
    return tensor


def broadcast(tensor, root_rank, name=None, priority=0, process_set=global_process_set):
    """The root's ``tensor`` (a copy; ``tensor`` is unchanged)."""
    return broadcast_(tensor.copy(), root_rank, name=name, process_set=process_set)


def barrier(process_set=global_process_set):
    _check(_C.hora_mx_barrier())
