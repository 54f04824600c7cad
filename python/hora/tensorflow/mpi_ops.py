"""hora.tensorflow's ops (Horovod's ``horovod.tensorflow.mpi_ops``): the op library, the basics
(init, rank, size, process sets) and the collectives with their gradients.

The collectives are TensorFlow ops of the library ``hora_tf_ops.so`` (python/src/tf_ops.cc),
AsyncOpKernels on libhora's async engine: they run in eager mode and inside ``tf.function``
alike. What is not an op (init, shutdown, the queries, process sets) is called through ctypes
in the same library (python/src/tf_basics.cc).
"""

import os
import re

import tensorflow as tf
from tensorflow.python.framework import ops

from hora.common.exceptions import HorovodInternalError
from hora.tensorflow.util import _executing_eagerly

# The op library, the exceptions and the queries process sets need live in _core (which
# process_sets imports instead of this module); exported here as in Horovod's mpi_ops.
from hora.tensorflow._core import (  # noqa: F401
    MPI_LIB, _C, HoraAbortedError, HoraConnectionError, HoraError, HoraMismatchError,
    HoraPeerFailure, HoraTimeoutError, HoraUsageError, _BY_NAME, _HERE, _KINDS, _LIB_PATH,
    _PREFIX, _built_tf_version, _check, _load_library, _query, _run, _skip_autograph, _translate,
    is_initialized, rank, size)

# --- Basics ---------------------------------------------------------------------------------------

# Horovod's reduce op numbers (horovod.common.basics).
Average = 0
Sum = 1
Adasum = 2
Min = 3
Max = 4
Product = 5


def init(comm=None, process_sets=None):
    """Joins the job horarun started (a world of one without horarun). Calling it twice is
    harmless; after shutdown() it joins again. ``process_sets``: a list of ProcessSet formed
    now, or "dynamic" to allow add_process_set() later (Horovod's)."""
    if comm is not None:
        raise NotImplementedError('hora.tensorflow.init(comm=...): hora has no MPI communicators; '
                                  'use process sets (docs/tensorflow.md)')
    _check(_C.hora_tf_init())
    from hora.tensorflow import process_sets as _ps
    _ps._setup(process_sets)


def shutdown():
    """Leaves the job (safe to call twice)."""
    from hora.tensorflow import process_sets as _ps
    _ps._forget()
    _check(_C.hora_tf_shutdown())


def local_rank():
    return _query(_C.hora_tf_local_rank)


def local_size():
    return _query(_C.hora_tf_local_size)


def cross_rank():
    return _query(_C.hora_tf_cross_rank)


def cross_size():
    return _query(_C.hora_tf_cross_size)


def is_homogeneous():
    """Whether every host runs the same number of ranks."""
    return size() == local_size() * cross_size()


def start_timeline(file_path, mark_cycles=False):
    if not is_initialized():
        raise ValueError('Horovod has not been initialized; use hvd.init().')
    _check(_C.hora_tf_start_timeline(os.fsencode(file_path), int(bool(mark_cycles))))


def stop_timeline():
    if not is_initialized():
        raise ValueError('Horovod has not been initialized; use hvd.init().')
    _check(_C.hora_tf_stop_timeline())


def mpi_threads_supported():
    return False


def mpi_enabled():
    return False


def mpi_built():
    return False


def gloo_enabled():
    return True


def gloo_built():
    return True


def nccl_built():
    return 0


def ddl_built():
    return False


def ccl_built():
    return False


def cuda_built():
    return False


def rocm_built():
    return False


def handle_average_backwards_compatibility(op, average):
    """Horovod's rule for the deprecated ``average=`` argument."""
    if op is not None:
        if average is not None:
            raise ValueError('The op parameter supersedes average. Please provide only one of '
                             'them.')
        return op
    if average is not None:
        import warnings
        warnings.warn('Parameter `average` has been replaced with `op` and will be removed in '
                      'v1.0', DeprecationWarning)
        return Average if average else Sum
    return Average


def check_num_rank_power_of_2(num_rank):
    return num_rank != 0 and (num_rank & (num_rank - 1)) == 0


# --- Process sets (imported here for Horovod's module layout) -------------------------------------

from hora.tensorflow.process_sets import (  # noqa: E402
    ProcessSet, global_process_set, add_process_set, remove_process_set,
    _temp_process_set_object, _check_member)

# --- Names ------------------------------------------------------------------------------------------


def _normalize_name(name):
    """Normalizes an op name to TensorFlow's rules (as Horovod does)."""
    return re.sub('[^a-zA-Z0-9_]', '_', name)


def _tensor_name(tensor):
    """The graph name of ``tensor``; an eager tensor captured by a tf.function has none (the
    graph then makes the node names derived from it unique)."""
    try:
        return tensor.name
    except AttributeError:
        return 'captured'


def _names(name, default):
    """(node name, engine name attribute). Graph ops (tf.function) are named by their node (a
    default derived from the input's name, as in Horovod); eager ops have no node names, so the
    name travels as an attribute, and an unnamed eager op is numbered by the kernel."""
    if _executing_eagerly():
        return None, name or ''
    return name or default(), ''


def _ps_id(process_set):
    return process_set.process_set_id


# --- Collectives --------------------------------------------------------------------------------


def _allreduce(tensor, name=None, op=Sum, prescale_factor=1.0, postscale_factor=1.0,
               ignore_name_scope=False, process_set=global_process_set):
    """Reduces ``tensor`` over the process set's ranks (the op behind allreduce())."""
    _check_member(process_set, 'allreduce')
    node, attr = _names(name, lambda: 'HoraAllreduce_%s' % _normalize_name(_tensor_name(tensor)))
    return _run(MPI_LIB.hora_allreduce, tensor, reduce_op=op, prescale_factor=prescale_factor,
                postscale_factor=postscale_factor, tensor_name=attr,
                ignore_name_scope=ignore_name_scope, process_set_id=_ps_id(process_set),
                name=node)


@ops.RegisterGradient('HoraAllreduce')
def _allreduce_grad(op, grad):
    """The gradient of an allreduce is the allreduce of the gradient, with the same op and
    factors (Horovod's)."""
    return _allreduce(grad, op=op.get_attr('reduce_op'),
                      prescale_factor=op.get_attr('prescale_factor'),
                      postscale_factor=op.get_attr('postscale_factor'),
                      ignore_name_scope=op.get_attr('ignore_name_scope'),
                      process_set=_temp_process_set_object(op.get_attr('process_set_id')))


def _grouped_allreduce(tensors, name=None, op=Sum, prescale_factor=1.0, postscale_factor=1.0,
                       ignore_name_scope=False, process_set=global_process_set):
    _check_member(process_set, 'grouped_allreduce')
    node, attr = _names(name, lambda: _normalize_name(
        'HoraGroupedAllreduce_%s_%s' % (_tensor_name(tensors[0]), _tensor_name(tensors[-1]))))
    return _run(MPI_LIB.hora_grouped_allreduce, tensors, reduce_op=op,
                prescale_factor=prescale_factor, postscale_factor=postscale_factor,
                tensor_name=attr, ignore_name_scope=ignore_name_scope,
                process_set_id=_ps_id(process_set), name=node)


@ops.RegisterGradient('HoraGroupedAllreduce')
def _grouped_allreduce_grad(op, *grads):
    return _grouped_allreduce(list(grads), op=op.get_attr('reduce_op'),
                              prescale_factor=op.get_attr('prescale_factor'),
                              postscale_factor=op.get_attr('postscale_factor'),
                              ignore_name_scope=op.get_attr('ignore_name_scope'),
                              process_set=_temp_process_set_object(
                                  op.get_attr('process_set_id')))


def allgather(tensor, name=None, ignore_name_scope=False, process_set=global_process_set):
    """Concatenates ``tensor`` of every rank along the first dimension (which may differ
    between ranks; the other dimensions must match)."""
    _check_member(process_set, 'allgather')
    node, attr = _names(name, lambda: 'HoraAllgather_%s' % _normalize_name(_tensor_name(tensor)))
    return _run(MPI_LIB.hora_allgather, tensor, tensor_name=attr,
                ignore_name_scope=ignore_name_scope, process_set_id=_ps_id(process_set),
                name=node)


def _gathered_split(grad, x, ignore_name_scope, ps):
    """This rank's slice of an allgather's (averaged) gradient."""
    with tf.device('/cpu:0'):
        d = tf.reshape(tf.shape(x)[0] if x.shape.rank != 0 else tf.constant(1), [1])
        d = tf.reshape(allgather(d, ignore_name_scope=ignore_name_scope, process_set=ps),
                       [ps.size()])
    return tf.split(grad, num_or_size_splits=d, axis=0)[ps.rank()]


@ops.RegisterGradient('HoraAllgather')
def _allgather_grad(op, grad):
    """Horovod's: the gradient is averaged over the ranks, then this rank's slice is kept."""
    ignore = op.get_attr('ignore_name_scope')
    ps = _temp_process_set_object(op.get_attr('process_set_id'))
    grad = _allreduce(grad, op=Average, ignore_name_scope=ignore, process_set=ps)
    out = _gathered_split(grad, op.inputs[0], ignore, ps)
    if op.inputs[0].shape.rank == 0:
        out = tf.reshape(out, [])
    return out


def grouped_allgather(tensors, name=None, ignore_name_scope=False,
                      process_set=global_process_set):
    """allgather of every tensor of the list, as one op."""
    _check_member(process_set, 'grouped_allgather')
    node, attr = _names(name, lambda: _normalize_name(
        'HoraGroupedAllgather_%s_%s' % (_tensor_name(tensors[0]), _tensor_name(tensors[-1]))))
    return _run(MPI_LIB.hora_grouped_allgather, tensors, tensor_name=attr,
                ignore_name_scope=ignore_name_scope, process_set_id=_ps_id(process_set),
                name=node)


@ops.RegisterGradient('HoraGroupedAllgather')
def _grouped_allgather_grad(op, *grads):
    ignore = op.get_attr('ignore_name_scope')
    ps = _temp_process_set_object(op.get_attr('process_set_id'))
    grads = [_allreduce(g, op=Average, ignore_name_scope=ignore, process_set=ps) for g in grads]
    return [_gathered_split(g, x, ignore, ps) for g, x in zip(grads, op.inputs)]


def broadcast(tensor, root_rank, name=None, ignore_name_scope=False,
              process_set=global_process_set):
    """``root_rank``'s tensor on every rank (root_rank is a global rank, as in Horovod)."""
    _check_member(process_set, 'broadcast')
    node, attr = _names(name, lambda: 'HoraBroadcast_%s' % _normalize_name(_tensor_name(tensor)))
    return _run(MPI_LIB.hora_broadcast, tensor, root_rank=root_rank, tensor_name=attr,
                ignore_name_scope=ignore_name_scope, process_set_id=_ps_id(process_set),
                name=node)


@ops.RegisterGradient('HoraBroadcast')
def _broadcast_grad(op, grad):
    """Horovod's: the averaged gradient on the root, zeros elsewhere."""
    root_rank = op.get_attr('root_rank')
    grad_reduced = _allreduce(grad, op=Average, ignore_name_scope=op.get_attr('ignore_name_scope'),
                              process_set=_temp_process_set_object(op.get_attr('process_set_id')))
    if rank() != root_rank:
        return grad_reduced * 0
    return grad_reduced


def _grouped_broadcast(tensors, root_rank, name=None, process_set=global_process_set):
    """broadcast of every tensor of the list (any dtypes), as one op."""
    _check_member(process_set, 'broadcast')
    node, attr = _names(name, lambda: _normalize_name(
        'HoraGroupedBroadcast_%s_%s' % (_tensor_name(tensors[0]), _tensor_name(tensors[-1]))))
    return _run(MPI_LIB.hora_grouped_broadcast, tensors, root_rank=root_rank, tensor_name=attr,
                process_set_id=_ps_id(process_set), name=node)


ops.NotDifferentiable('HoraGroupedBroadcast')


def broadcast_(variables, root_rank, name=None, process_set=global_process_set):
    """Broadcasts ``variables`` from ``root_rank`` into the variables themselves and returns
    their new values. hora assigns the broadcast values (one grouped op) where Horovod's kernel
    writes the variables' buffers; the result is the same."""
    from hora.tensorflow.util import _tf_var
    variables = [_tf_var(v) for v in variables]
    if not variables:
        return []
    values = _grouped_broadcast([tf.convert_to_tensor(v) for v in variables], root_rank,
                                name=name, process_set=process_set)
    return [v.assign(x) for v, x in zip(variables, values)]


def alltoall(tensor, splits=None, name=None, ignore_name_scope=False,
             process_set=global_process_set):
    """Sends ``splits[i]`` first-dimension slices to rank i (equal parts without ``splits``);
    returns what every rank sent here, in rank order, and, when ``splits`` was given, the
    number of slices received from each rank."""
    _check_member(process_set, 'alltoall')
    splits_ = (tf.cast(tf.convert_to_tensor(splits), tf.int32) if splits is not None
               else tf.constant([], dtype=tf.int32))
    node, attr = _names(name, lambda: 'HoraAlltoall_%s' % _normalize_name(_tensor_name(tensor)))
    output, rsplits = _run(MPI_LIB.hora_alltoall, tensor, splits=splits_, tensor_name=attr,
                           ignore_name_scope=ignore_name_scope,
                           process_set_id=_ps_id(process_set), name=node)
    return (output, rsplits) if splits is not None else output


@ops.RegisterGradient('HoraAlltoall')
def _alltoall_grad(op, grad_wrt_output, grad_wrt_received_splits):
    """Horovod's: the gradient goes back the way the slices came."""
    grad, _ = alltoall(grad_wrt_output, splits=op.outputs[1],
                       ignore_name_scope=op.get_attr('ignore_name_scope'),
                       process_set=_temp_process_set_object(op.get_attr('process_set_id')))
    return [grad, None]


def _reducescatter(tensor, name=None, op=Sum, ignore_name_scope=False,
                   process_set=global_process_set, prescale_factor=1.0, postscale_factor=1.0):
    _check_member(process_set, 'reducescatter')
    node, attr = _names(name, lambda: 'HoraReducescatter_%s' % _normalize_name(_tensor_name(tensor)))
    return _run(MPI_LIB.hora_reducescatter, tensor, reduce_op=op,
                prescale_factor=prescale_factor, postscale_factor=postscale_factor,
                tensor_name=attr, ignore_name_scope=ignore_name_scope,
                process_set_id=_ps_id(process_set), name=node)


def _scatter_grad_scale(op, grads, ps):
    """Horovod's gradient of a reducescatter: Sum's gradient is scaled by the set's size (the
    allgather below carries an average's), and by the op's factors."""
    reduce_op = op.get_attr('reduce_op')
    pre, post = op.get_attr('prescale_factor'), op.get_attr('postscale_factor')
    out = []
    for g in grads:
        if reduce_op == Sum:
            g = g * ps.size()
        if pre != 1.0:
            g = g * pre
        if post != 1.0:
            g = g * post
        out.append(g)
    return out


@ops.RegisterGradient('HoraReducescatter')
def _reducescatter_grad(op, grad):
    ps = _temp_process_set_object(op.get_attr('process_set_id'))
    grad, = _scatter_grad_scale(op, [grad], ps)
    return allgather(grad, ignore_name_scope=op.get_attr('ignore_name_scope'), process_set=ps)


def _grouped_reducescatter(tensors, name=None, op=Sum, ignore_name_scope=False,
                           process_set=global_process_set, prescale_factor=1.0,
                           postscale_factor=1.0):
    _check_member(process_set, 'grouped_reducescatter')
    node, attr = _names(name, lambda: _normalize_name(
        'HoraGroupedReducescatter_%s_%s' % (_tensor_name(tensors[0]), _tensor_name(tensors[-1]))))
    return _run(MPI_LIB.hora_grouped_reducescatter, tensors, reduce_op=op,
                prescale_factor=prescale_factor, postscale_factor=postscale_factor,
                tensor_name=attr, ignore_name_scope=ignore_name_scope,
                process_set_id=_ps_id(process_set), name=node)


@ops.RegisterGradient('HoraGroupedReducescatter')
def _grouped_reducescatter_grad(op, *grads):
    ps = _temp_process_set_object(op.get_attr('process_set_id'))
    grads = _scatter_grad_scale(op, grads, ps)
    return [allgather(g, ignore_name_scope=op.get_attr('ignore_name_scope'), process_set=ps)
            for g in grads]


def join():
    """This rank has no more data: until every rank has joined, it takes part in the others'
    allreduces with zeros. Returns the last rank to join (an int32 scalar tensor)."""
    return _run(MPI_LIB.hora_join)


def barrier(process_set=global_process_set):
    """Waits until every rank of the process set has reached the barrier."""
    _check_member(process_set, 'barrier')
    if _executing_eagerly():
        return _check(_C.hora_tf_barrier(_ps_id(process_set)))
    return MPI_LIB.hora_barrier(process_set_id=_ps_id(process_set))


# --- Ops that read the job when the graph runs -----------------------------------------------------


def size_op(process_set_id=0, name=None):
    """The number of ranks (of the process set), computed when the graph runs."""
    return MPI_LIB.hora_size(process_set_id=process_set_id, name=name)


def process_set_included_op(process_set_id=0, name=None):
    """1 when this rank is in the process set, 0 when not; -1 before init, -2 for an unknown
    set (Horovod's codes)."""
    return MPI_LIB.hora_process_set_included(process_set_id=process_set_id, name=name)


def local_size_op(name=None):
    return MPI_LIB.hora_local_size(name=name)


def rank_op(name=None):
    return MPI_LIB.hora_rank(name=name)


def local_rank_op(name=None):
    return MPI_LIB.hora_local_rank(name=name)


for _op in ('HoraSize', 'HoraProcessSetIncluded', 'HoraLocalSize', 'HoraRank', 'HoraLocalRank',
            'HoraJoin', 'HoraBarrier'):
    ops.NotDifferentiable(_op)
