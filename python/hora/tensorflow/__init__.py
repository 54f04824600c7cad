"""hora.tensorflow: Horovod's TensorFlow 2 API on libhora.

A Horovod TensorFlow script runs on hora by changing one line::

    import hora.tensorflow as hvd      # was: import horovod.tensorflow as hvd

and is launched with ``horarun -np 4 .venv-tf/bin/python train.py``. See docs/tensorflow.md.
"""

try:
    import tensorflow as tf
except ImportError as e:  # say which package, and how to get it
    import sys as _sys
    raise ImportError(
        'hora.tensorflow needs TensorFlow (the pip package tensorflow-cpu==2.21.0, with keras 3), '
        'which %s cannot import (%s). Make the project\'s TensorFlow venv with scripts/venv.sh tf '
        '(scripts/setup.sh does it) and run your program with its python: '
        '.venv-tf/bin/python (docs/tensorflow.md)' % (_sys.executable, e)) from e

from hora.tensorflow.compression import Compression
from hora.tensorflow import mpi_ops
from hora.tensorflow.mpi_ops import (
    Average, Sum, Adasum, Min, Max, Product,
    HoraError, HoraUsageError, HoraConnectionError, HoraTimeoutError, HoraPeerFailure,
    HoraMismatchError, HoraAbortedError, HorovodInternalError,
    init, shutdown, is_initialized, start_timeline, stop_timeline,
    size, local_size, cross_size, rank, local_rank, cross_rank, is_homogeneous,
    rank_op, local_rank_op, size_op, local_size_op, process_set_included_op,
    mpi_threads_supported, mpi_enabled, mpi_built, gloo_enabled, gloo_built,
    nccl_built, ddl_built, ccl_built, cuda_built, rocm_built,
    ProcessSet, global_process_set, add_process_set, remove_process_set,
    handle_average_backwards_compatibility, check_num_rank_power_of_2,
    allgather, grouped_allgather, broadcast, broadcast_, alltoall, join, barrier,
    _allreduce, _grouped_allreduce, _reducescatter, _grouped_reducescatter,
)
from hora.tensorflow.util import (  # noqa: F401
    _executing_eagerly, vars_to_refs, refs_to_vars, _tf_var, _var_key)
from hora.tensorflow.functions import (allgather_object, broadcast_object, broadcast_object_fn,
                                       broadcast_variables)
from hora.tensorflow.gradient_aggregation import LocalGradientAggregationHelper
from hora.tensorflow import adasum as _adasum


from hora.tensorflow.collectives import (  # noqa: F401
    _horovod_size, _sparse_allreduce, allreduce, grouped_allreduce, reducescatter,
    grouped_reducescatter, _allreduce_cond, _grouped_allreduce_cond, split_list, check_extension,
    gpu_available, _make_cached_allreduce_grads_fn, _make_allreduce_grads_fn, _check_tape_args,
    _split_list)


class _DistributedGradientTape(tf.GradientTape):
    """The methods a DistributedGradientTape adds to the user's tape's class."""

    def __init__(self, tape, device_dense, device_sparse, compression, sparse_as_dense, op,
                 gradient_predivide_factor, groups, persistent=False,
                 watch_accessed_variables=True, process_set=global_process_set,
                 scale_local_gradients=True, backward_passes_per_step=1,
                 average_aggregated_gradients=False):
        super(self.__class__, self).__init__(persistent, watch_accessed_variables)
        self._tape = tape
        self._allreduce_grads = _make_allreduce_grads_fn(
            'DistributedGradientTape', device_dense, device_sparse, compression,
            sparse_as_dense, op, gradient_predivide_factor, groups, process_set)
        self.process_set = process_set
        self.scale_local_gradients = scale_local_gradients
        self._local_sources = set()
        self._agg_helper = None
        if backward_passes_per_step > 1:
            self._agg_helper = LocalGradientAggregationHelper(
                backward_passes_per_step=backward_passes_per_step,
                allreduce_func=self._allreduce_grads, sparse_as_dense=sparse_as_dense,
                average_aggregated_gradients=average_aggregated_gradients)

    def register_local_source(self, source):
        """Marks a variable whose gradient stays local (not allreduced)."""
        self._local_sources.add(_var_key(source))

    def gradient(self, target, sources, output_gradients=None, use_generic_names=False):
        """The tape's gradients, allreduced over the process set (local sources excepted,
        scaled by 1/size when scale_local_gradients)."""
        gradients = super(self.__class__, self).gradient(target, sources, output_gradients)
        flat_sources = tf.nest.flatten(sources)
        flat_grads = tf.nest.flatten(gradients, expand_composites=False)
        shared = [(s, g) for s, g in zip(flat_sources, flat_grads)
                  if _var_key(s) not in self._local_sources]
        rs = [_tf_var(s) for s, _ in shared]
        rg = [g for _, g in shared]
        if self._agg_helper is not None:
            rg = self._agg_helper.compute_gradients(rg, rs)
        else:
            rg = self._allreduce_grads(rg, rs, use_generic_names)
        s2g = {_var_key(s): g for s, g in zip(flat_sources, flat_grads)}
        for s, g in zip(rs, rg):
            s2g[_var_key(s)] = g
        if self.scale_local_gradients and self._local_sources:
            n = _horovod_size(self.process_set, tf.float32)
            for ref in list(s2g):
                g = s2g[ref]
                if ref in self._local_sources and g is not None:
                    if isinstance(g, tf.IndexedSlices):
                        g = tf.IndexedSlices(g.values / tf.cast(n, g.values.dtype), g.indices,
                                             g.dense_shape)
                    else:
                        g = g / tf.cast(n, g.dtype)
                    s2g[ref] = g
        return tf.nest.pack_sequence_as(sources, [s2g[_var_key(s)] for s in flat_sources])

    def get_local_and_global_gradients(self, target, sources, output_gradients=None,
                                       use_generic_names=False):
        gradients = self.gradient(target, sources, output_gradients, use_generic_names)
        local, shared = [], []
        for s, g in zip(sources, gradients):
            (local if _var_key(s) in self._local_sources else shared).append((s, g))
        return local, shared


def DistributedGradientTape(gradtape, device_dense='', device_sparse='',
                            compression=Compression.none, sparse_as_dense=False, op=Average,
                            gradient_predivide_factor=1.0, num_groups=0, groups=None,
                            process_set=global_process_set, scale_local_gradients=True,
                            backward_passes_per_step=1, average_aggregated_gradients=False):
    """Wraps a tf.GradientTape so that gradient() returns the gradients allreduced over the
    ranks (Average by default). ``groups``: an int (the gradients in that many grouped ops) or
    a list of lists of variables. ``backward_passes_per_step`` > 1 accumulates locally and
    allreduces every that many calls (Horovod's aggregation helper; hora takes it here too)."""
    groups = _check_tape_args(op, gradient_predivide_factor, num_groups, groups)
    cls = type(gradtape.__class__.__name__, (gradtape.__class__,),
               dict(_DistributedGradientTape.__dict__))
    return cls(gradtape._tape, device_dense, device_sparse, compression, sparse_as_dense, op,
               gradient_predivide_factor, groups, gradtape._persistent,
               gradtape._watch_accessed_variables, process_set=process_set,
               scale_local_gradients=scale_local_gradients,
               backward_passes_per_step=backward_passes_per_step,
               average_aggregated_gradients=average_aggregated_gradients)


def PartialDistributedGradientTape(gradtape, device_dense='', device_sparse='',
                                   compression=Compression.none, sparse_as_dense=False,
                                   op=Average, gradient_predivide_factor=1.0, num_groups=0,
                                   groups=None, process_set=global_process_set,
                                   local_layers=None, scale_local_gradients=True):
    """A DistributedGradientTape whose ``local_layers``' variables keep local gradients."""
    import keras
    if local_layers is None:
        local_layers = []
    elif isinstance(local_layers, keras.layers.Layer):
        local_layers = [local_layers]
    elif not all(isinstance(layer, keras.layers.Layer) for layer in local_layers):
        raise ValueError('All local layers must be of tf.keras.layers.Layer type.')
    tape = DistributedGradientTape(gradtape, device_dense, device_sparse, compression,
                                   sparse_as_dense, op, gradient_predivide_factor, num_groups,
                                   groups, process_set, scale_local_gradients)
    for layer in local_layers:
        for var in layer.trainable_weights:
            tape.register_local_source(var)
    return tape


def DistributedOptimizer(optimizer, name=None, use_locking=False, device_dense='',
                         device_sparse='', compression=Compression.none, sparse_as_dense=False,
                         backward_passes_per_step=1, op=Average, gradient_predivide_factor=1.0,
                         average_aggregated_gradients=False, num_groups=0, groups=None,
                         process_set=global_process_set, scale_local_gradients=True):
    """Horovod's horovod.tensorflow.DistributedOptimizer: with TF 2.16+ every optimizer is a
    Keras 3 optimizer, so this is hora.keras.DistributedOptimizer (TF1's tf.compat.v1.train
    optimizers are not supported: docs/tensorflow.md)."""
    if op == Adasum:
        raise ValueError('op == Adasum is not supported yet with Keras')
    if gradient_predivide_factor != 1.0 and op != Average:
        raise ValueError('gradient_predivide_factor not supported with op != Average')
    from hora.tensorflow import keras_optimizer
    return keras_optimizer.DistributedOptimizer(
        optimizer, name=name, device_dense=device_dense, device_sparse=device_sparse,
        compression=compression, sparse_as_dense=sparse_as_dense,
        gradient_predivide_factor=gradient_predivide_factor,
        backward_passes_per_step=backward_passes_per_step,
        average_aggregated_gradients=average_aggregated_gradients, op=op, groups=groups,
        num_groups=num_groups, process_set=process_set,
        scale_local_gradients=scale_local_gradients)


def broadcast_global_variables(root_rank):
    """TF1's graph-mode call; TF 2 programs broadcast their variables (Horovod's message)."""
    if _executing_eagerly():
        raise RuntimeError(
            'hvd.broadcast_global_variables() does not support eager execution. '
            'Please use `hvd.broadcast_variables(<model/optimizer variables>)` instead.')
    return broadcast_variables(tf.compat.v1.global_variables(), root_rank)


from hora.tensorflow.sync_batch_norm import SyncBatchNormalization  # noqa: E402
from hora.tensorflow import elastic  # noqa: E402
