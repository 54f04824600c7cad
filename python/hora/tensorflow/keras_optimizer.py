"""The Keras 3 optimizer wrapper of hora.keras.DistributedOptimizer (Horovod's
horovod._keras.create_distributed_optimizer), in a module of hora.tensorflow that imports its
siblings and not the package: hora.tensorflow.DistributedOptimizer (which TF 2.16+ programs
call with Keras optimizers) and hora.keras both use it, with no import circle between them.
"""

import keras
import tensorflow as tf

from hora.tensorflow.collectives import _check_tape_args, _horovod_size, _make_allreduce_grads_fn
from hora.tensorflow.compression import Compression
from hora.tensorflow.gradient_aggregation import LocalGradientAggregationHelper
from hora.tensorflow.mpi_ops import Average, Sum, global_process_set
from hora.tensorflow.util import _tf_var, _var_key

_classes = {}


def _distributed_class(base):
    """The subclass of the optimizer class ``base`` whose apply() allreduces the gradients
    first. It keeps ``base``'s name, so saved models name the optimizer as before."""
    if base in _classes:
        return _classes[base]

    class _Distributed(base):
        _hora_distributed = True

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self._hora_configure()

        def _hora_configure(self, name=None, device_dense='', device_sparse='',
                            compression=Compression.none, sparse_as_dense=False,
                            gradient_predivide_factor=1.0, op=Average,
                            backward_passes_per_step=1, average_aggregated_gradients=False,
                            groups=None, process_set=global_process_set,
                            scale_local_gradients=True):
            self._hora_args = (name or 'Distributed%s' % base.__name__, device_dense,
                               device_sparse, compression, sparse_as_dense, op,
                               gradient_predivide_factor, groups, process_set)
            self._hora_process_set = process_set
            self._hora_scale_local = scale_local_gradients
            self._hora_local_vars = set()
            self._hora_agg = None
            if backward_passes_per_step > 1:
                self._hora_agg = LocalGradientAggregationHelper(
                    backward_passes_per_step=backward_passes_per_step,
                    allreduce_func=self._hora_allreduce, sparse_as_dense=sparse_as_dense,
                    average_aggregated_gradients=average_aggregated_gradients)

        def register_local_var(self, var):
            """A variable whose gradient stays local (not allreduced)."""
            self._hora_local_vars.add(_var_key(var))

        def _hora_allreduce(self, grads, variables):
            shared = [i for i, v in enumerate(variables)
                      if _var_key(v) not in self._hora_local_vars]
            fn = _make_allreduce_grads_fn(*self._hora_args)
            reduced = fn([grads[i] for i in shared], [_tf_var(variables[i]) for i in shared])
            out = list(grads)
            for i, g in zip(shared, reduced):
                out[i] = g
            if self._hora_scale_local and self._hora_local_vars:
                for i, v in enumerate(variables):
                    if _var_key(v) in self._hora_local_vars and out[i] is not None:
                        out[i] = out[i] / _horovod_size(self._hora_process_set, out[i].dtype)
            return out

        def apply(self, grads, trainable_variables=None):
            grads = list(grads)
            if trainable_variables is None:
                variables = list(self._trainable_variables)
            else:
                variables = list(trainable_variables)
                if not self.built:
                    # Variables are made here, not inside the tf.cond below.
                    with tf.init_scope():
                        self.build(variables)
                    self.built = True
            if self._hora_agg is None:
                return base.apply(self, self._hora_allreduce(grads, variables), variables)
            grads = self._hora_agg.compute_gradients(grads, variables)

            def step():
                base.apply(self, grads, variables)
                return tf.constant(True)

            def skip():
                # Horovod counts every pass in the optimizer's iterations.
                self.iterations.assign_add(1)
                return tf.constant(False)
            return tf.cond(self._hora_agg.is_aggregation_step(), step, skip)

    _Distributed.__name__ = base.__name__
    _Distributed.__qualname__ = base.__qualname__
    _classes[base] = _Distributed
    return _Distributed


def DistributedOptimizer(optimizer, name=None, device_dense='', device_sparse='',
                         compression=Compression.none, sparse_as_dense=False,
                         gradient_predivide_factor=1.0, op=Average, backward_passes_per_step=1,
                         average_aggregated_gradients=False, num_groups=0, groups=None,
                         process_set=global_process_set, scale_local_gradients=True):
    """Wraps a Keras 3 optimizer (any keras.optimizers.Optimizer, or a name Keras knows such as
    'adam') so that apply() — what model.fit and apply_gradients call — averages the gradients
    over the ranks first (one grouped allreduce, fused by hora's engine).
    ``backward_passes_per_step`` > 1 sums locally and allreduces every that many steps (the
    optimizer steps then only); ``average_aggregated_gradients`` divides those sums by it."""
    if op != Average and op != Sum:
        raise ValueError('op currently only supports Average and Sum')
    groups = _check_tape_args(op, gradient_predivide_factor, num_groups, groups)
    if isinstance(optimizer, (str, dict)):
        # Keras' own shorthand (compile(optimizer='adam')), which Keras' examples use.
        optimizer = keras.optimizers.get(optimizer)
    if not isinstance(optimizer, keras.optimizers.Optimizer):
        raise ValueError('hora.keras.DistributedOptimizer wraps a Keras 3 optimizer '
                         '(keras.optimizers.Optimizer), not %r' % (optimizer,))
    if getattr(optimizer, '_hora_distributed', False):
        raise ValueError('the optimizer is already a hora DistributedOptimizer')
    cls = _distributed_class(optimizer.__class__)
    opt = cls.from_config(optimizer.get_config())
    opt._hora_configure(name, device_dense, device_sparse, compression, sparse_as_dense,
                        gradient_predivide_factor, op, backward_passes_per_step,
                        average_aggregated_gradients, groups, process_set,
                        scale_local_gradients)
    return opt
