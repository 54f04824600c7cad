"""hora.tensorflow's reductions and the gradient function its tapes and optimizers share:
allreduce (dense, or a tf.IndexedSlices as Horovod reduces it), grouped_allreduce,
reducescatter and their grouped forms, and the cached function that allreduces a step's
gradients. hora.tensorflow exports every name here; the Keras optimizer
(hora/tensorflow/keras_optimizer.py) imports this module and not the package, so that the
package can hand Keras optimizers to it without an import circle.
"""

import functools
import os
import warnings

import tensorflow as tf

from hora.tensorflow.compression import Compression
from hora.tensorflow.mpi_ops import (
    Average, Sum, Adasum, global_process_set, handle_average_backwards_compatibility, size_op,
    allgather, _allreduce, _grouped_allreduce, _reducescatter, _grouped_reducescatter)
from hora.tensorflow.util import (_executing_eagerly, _make_subgraph, _cache, vars_to_refs,
                                  refs_to_vars, _var_key)
from hora.tensorflow import adasum as _adasum


def _horovod_size(process_set, dtype):
    """The divisor of a framework-side average: read when the graph runs in an elastic job
    (the size changes between rounds), else now (Horovod's rule)."""
    if int(os.environ.get('HOROVOD_ELASTIC', 0)) or os.environ.get('HORA_ELASTIC') == '1':
        n = size_op(process_set_id=process_set.process_set_id)
    else:
        n = process_set.size()
    return tf.cast(n, dtype=dtype)


def _sparse_allreduce(tensor, op, process_set, ignore_name_scope, prescale_factor,
                      postscale_factor, name=None):
    """A tf.IndexedSlices is reduced as Horovod does: its values and indices are allgathered
    (the sum of the slices is then implied; an average divides the values by the size)."""
    if op == Adasum:
        raise NotImplementedError('The Adasum reduction does not currently support sparse '
                                  'tensors. As a workaround please pass sparse_as_dense=True to '
                                  'DistributedOptimizer')
    if op != Sum and op != Average:
        raise NotImplementedError('Only Sum and Average ops are supported with tf.IndexedSlices')
    if prescale_factor != 1.0 or postscale_factor != 1.0:
        raise NotImplementedError('Pre/postscale_factor are not supported with tf.IndexedSlices')
    values = allgather(tensor.values, process_set=process_set,
                       ignore_name_scope=ignore_name_scope,
                       name=None if name is None else name + '.values')
    indices = allgather(tensor.indices, process_set=process_set,
                        ignore_name_scope=ignore_name_scope,
                        name=None if name is None else name + '.indices')
    if op == Average:
        values = values / _horovod_size(process_set, values.dtype)
    return tf.IndexedSlices(values, indices, dense_shape=tensor.dense_shape)


def allreduce(tensor, average=None, device_dense='', device_sparse='',
              compression=Compression.none, op=None, prescale_factor=1.0, postscale_factor=1.0,
              name=None, process_set=global_process_set, ignore_name_scope=False):
    """Reduces ``tensor`` over the ranks (Average by default): a tensor of the same shape and
    type. A tf.IndexedSlices is allgathered (values and indices) as Horovod does.
    ``compression`` compresses on the wire; prescale/postscale multiply before/after."""
    op = handle_average_backwards_compatibility(op, average)
    if isinstance(tensor, tf.IndexedSlices):
        with tf.device(device_sparse):
            return _sparse_allreduce(tensor, op, process_set, ignore_name_scope,
                                     prescale_factor, postscale_factor, name)
    if op == Adasum:
        _adasum.check([tensor], 'allreduce', process_set)
    with tf.device(device_dense):
        compressed, ctx = compression.compress(tensor)
        if op == Adasum:
            reduced = _adasum.grouped_allreduce(
                [compressed], name=name, prescale_factor=prescale_factor,
                postscale_factor=postscale_factor, process_set=process_set,
                ignore_name_scope=ignore_name_scope)[0]
        else:
            reduced = _allreduce(compressed, op=op, prescale_factor=prescale_factor,
                                 postscale_factor=postscale_factor, name=name,
                                 process_set=process_set, ignore_name_scope=ignore_name_scope)
        return compression.decompress(reduced, ctx)


def grouped_allreduce(tensors, average=None, device_dense='', device_sparse='',
                      compression=Compression.none, op=None, prescale_factor=1.0,
                      postscale_factor=1.0, process_set=global_process_set,
                      ignore_name_scope=False, name=None):
    """allreduce of every tensor of the list, as one op (the engine fuses them); IndexedSlices
    among them are allgathered."""
    if not tensors:
        return tensors
    op = handle_average_backwards_compatibility(op, average)
    if op == Adasum:
        _adasum.check(tensors, 'grouped_allreduce', process_set)
    results = [None] * len(tensors)
    dense = [(i, t) for i, t in enumerate(tensors) if not isinstance(t, tf.IndexedSlices)]
    for i, t in enumerate(tensors):
        if isinstance(t, tf.IndexedSlices):
            with tf.device(device_sparse):
                results[i] = _sparse_allreduce(
                    t, op, process_set, ignore_name_scope, prescale_factor, postscale_factor,
                    None if name is None else '%s.%d' % (name, i))
    if dense:
        with tf.device(device_dense):
            compressed, ctxs = zip(*[compression.compress(t) for _, t in dense])
            # One dtype per op: tensors of different dtypes go in one op per dtype.
            by_dtype = {}
            for k, c in enumerate(compressed):
                by_dtype.setdefault(c.dtype, []).append(k)
            reduced = [None] * len(dense)
            for n, (dtype, ks) in enumerate(sorted(by_dtype.items(), key=lambda kv: kv[1][0])):
                group_name = name if name is None or len(by_dtype) == 1 else '%s.%d' % (name, n)
                reduce = _adasum.grouped_allreduce if op == Adasum else functools.partial(
                    _grouped_allreduce, op=op)
                outs = reduce([compressed[k] for k in ks], prescale_factor=prescale_factor,
                              postscale_factor=postscale_factor, process_set=process_set,
                              name=group_name, ignore_name_scope=ignore_name_scope)
                for k, o in zip(ks, outs):
                    reduced[k] = o
            for (i, _), r, ctx in zip(dense, reduced, ctxs):
                results[i] = compression.decompress(r, ctx)
    return results


def reducescatter(tensor, device_dense='', compression=Compression.none, op=Average, name=None,
                  process_set=global_process_set, ignore_name_scope=False, prescale_factor=1.0,
                  postscale_factor=1.0):
    """Reduces ``tensor`` over the ranks; rank r gets its block of first-dimension slices
    (rows / size, the first rows % size ranks one more)."""
    with tf.device(device_dense):
        compressed, ctx = compression.compress(tensor)
        reduced = _reducescatter(compressed, op=op, name=name, process_set=process_set,
                                 ignore_name_scope=ignore_name_scope,
                                 prescale_factor=prescale_factor,
                                 postscale_factor=postscale_factor)
        return compression.decompress(reduced, ctx)


def grouped_reducescatter(tensors, device_dense='', compression=Compression.none, op=Average,
                          process_set=global_process_set, prescale_factor=1.0,
                          postscale_factor=1.0):
    """reducescatter of every tensor of the list (one dtype), as one op."""
    if not tensors:
        return tensors
    with tf.device(device_dense):
        compressed, ctxs = zip(*[compression.compress(t) for t in tensors])
        reduced = _grouped_reducescatter(list(compressed), op=op, process_set=process_set,
                                         prescale_factor=prescale_factor,
                                         postscale_factor=postscale_factor)
        return [compression.decompress(t, c) for t, c in zip(reduced, ctxs)]


def _allreduce_cond(tensor, *args, process_set=global_process_set, **kwargs):
    """allreduce where it does anything (a member of a set of more than one rank), else the
    tensor itself (Horovod's)."""
    if process_set.included() is False or process_set.size() == 1:
        return tensor
    return allreduce(tensor, *args, process_set=process_set, **kwargs)


def _grouped_allreduce_cond(tensors, *args, process_set=global_process_set, **kwargs):
    if process_set.included() is False or process_set.size() == 1:
        return tensors
    return grouped_allreduce(tensors, *args, process_set=process_set, **kwargs)


def split_list(items, n):
    """``items`` in ``n`` consecutive groups of nearly equal size (Horovod's helper, which
    DistributedOptimizer(groups=n) splits the gradients with)."""
    d, r = divmod(len(items), n)
    return [items[i * d + min(i, r):(i + 1) * d + min(i + 1, r)] for i in range(n)]


_split_list = split_list


def check_extension(ext_name, ext_env_var, pkg_path, *args):
    """Horovod checks that its extension was built; hora.tensorflow's import already failed
    with the reason if the op library is missing or built for another TensorFlow."""


def gpu_available(ext_base_name, verbose=False):
    """Whether TensorFlow sees a GPU (Horovod's helper)."""
    return bool(tf.config.list_physical_devices('GPU'))


@_cache
def _make_cached_allreduce_grads_fn(name, device_dense, device_sparse, compression,
                                    sparse_as_dense, op, gradient_predivide_factor, groups,
                                    process_set):
    groups = refs_to_vars(groups) if isinstance(groups, tuple) else groups
    if op == Average:
        prescale_factor = 1.0 / gradient_predivide_factor
        postscale_factor = gradient_predivide_factor
    else:
        prescale_factor = postscale_factor = 1.0

    def allreduce_grads(grads, variables=None, use_generic_names=False):
        with tf.name_scope(name + '_Allreduce'):
            if sparse_as_dense:
                grads = [tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g
                         for g in grads]
            kwargs = dict(device_dense=device_dense, device_sparse=device_sparse,
                          compression=compression, op=op, prescale_factor=prescale_factor,
                          postscale_factor=postscale_factor, process_set=process_set)
            present = [(i, g) for i, g in enumerate(grads) if g is not None]
            if groups is None:
                # One grouped op for every gradient: the engine fuses them into buffers of
                # HORA_FUSION_THRESHOLD bytes, as Horovod's does with separate ops.
                split = [present] if present else []
            elif isinstance(groups, list):
                by_key = {_var_key(v): (i, grads[i]) for i, v in enumerate(variables)
                          if grads[i] is not None}
                split = []
                for group in groups:
                    split.append([by_key.pop(_var_key(v)) for v in group
                                  if _var_key(v) in by_key])
                split += [[x] for x in by_key.values()]
            else:
                split = _split_list(present, groups)
            out = list(grads)
            for n, group in enumerate(split):
                if not group:
                    continue
                index, tensors = zip(*group)
                reduced = _grouped_allreduce_cond(
                    list(tensors), name='grad_%d' % n if use_generic_names else None,
                    ignore_name_scope=use_generic_names, **kwargs)
                for i, r in zip(index, reduced):
                    out[i] = r
            return out

    if _executing_eagerly():
        return _make_subgraph(allreduce_grads)
    return allreduce_grads


def _make_allreduce_grads_fn(name, device_dense, device_sparse, compression, sparse_as_dense,
                             op, gradient_predivide_factor, groups, process_set):
    groups = vars_to_refs(groups) if isinstance(groups, list) else groups
    return _make_cached_allreduce_grads_fn(name, device_dense, device_sparse, compression,
                                           sparse_as_dense, op, gradient_predivide_factor,
                                           groups, process_set)


def _check_tape_args(op, gradient_predivide_factor, num_groups, groups):
    """Horovod's checks of the tapes' and optimizers' arguments; returns the groups."""
    if gradient_predivide_factor != 1.0 and op != Average:
        raise ValueError('gradient_predivide_factor not supported with op != Average')
    if num_groups != 0:
        warnings.warn('Parameter `num_groups` has been replaced by `groups` and will be removed '
                      'in v0.23.0.', DeprecationWarning)
        if groups is None:
            groups = num_groups
    if groups is not None and not (isinstance(groups, list) or groups > 0):
        raise ValueError('groups should be a non-negative integer or a list of list of '
                         'tf.Variable.')
    return groups
