"""hora.keras: Horovod's Keras API (horovod.tensorflow.keras) for Keras 3 on TensorFlow, on
libhora. A Horovod Keras script runs on hora by changing one line::

    import hora.keras as hvd      # was: import horovod.tensorflow.keras as hvd

``hora.tensorflow.keras`` is this module too. See docs/tensorflow.md ("Keras 3").
"""

import hora.tensorflow as _hvd  # raises the ImportError that says how to get TensorFlow

import keras
import tensorflow as tf
from keras import backend as K  # noqa: F401 (Horovod's module has it)

from hora.tensorflow import (
    init, shutdown, is_initialized, start_timeline, stop_timeline,
    size, local_size, cross_size, rank, local_rank, cross_rank,
    mpi_threads_supported, mpi_enabled, mpi_built, gloo_enabled, gloo_built,
    nccl_built, ddl_built, ccl_built, cuda_built, rocm_built,
    ProcessSet, global_process_set, add_process_set, remove_process_set,
    Average, Sum, Compression, HoraError, HoraMismatchError, HorovodInternalError)

from hora.tensorflow.keras_optimizer import (  # noqa: E402,F401
    DistributedOptimizer, _distributed_class)


def broadcast_global_variables(root_rank):
    """TF1 only (graph mode); Keras 3 programs use BroadcastGlobalVariablesCallback or
    hvd.broadcast_variables (Horovod's message)."""
    return _hvd.broadcast_global_variables(root_rank)


def allreduce(value, name=None, average=None, prescale_factor=1.0, postscale_factor=1.0,
              op=None, compression=Compression.none):
    """The average (or ``op``) of ``value`` (a number, array or tensor) over the ranks."""
    return _hvd.allreduce(tf.constant(value, name=name), average=average,
                          prescale_factor=prescale_factor, postscale_factor=postscale_factor,
                          op=op, compression=compression, name=name)


def allgather(value, name=None):
    """Every rank's ``value`` concatenated along the first dimension."""
    return _hvd.allgather(tf.constant(value, name=name), name=name)


def broadcast(value, root_rank, name=None):
    """``root_rank``'s ``value`` on every rank."""
    return _hvd.broadcast(tf.constant(value, name=name), root_rank, name=name)


def reducescatter(value, name=None, op=Average):
    """This rank's block of the reduction of ``value`` over the ranks."""
    return _hvd.reducescatter(tf.constant(value, name=name), op=op, name=name)


def load_model(filepath, custom_optimizers=None, custom_objects=None,
               compression=Compression.none, legacy_opts=False):
    """keras.models.load_model with the model's optimizer made a DistributedOptimizer (with
    ``compression``). ``custom_optimizers``: optimizer classes of your own to wrap as well.
    ``legacy_opts`` is Keras 2's and refused."""
    if legacy_opts:
        raise ValueError('hora.keras.load_model: legacy_opts=True is for Keras 2\'s legacy '
                         'optimizers, which Keras 3 does not have')
    objects = {}

    def add(cls):
        wrapped = _distributed_class(cls)
        objects[cls.__name__] = wrapped
        objects[cls.__name__.lower()] = wrapped

    def subclasses(cls):
        for sub in cls.__subclasses__():
            if not getattr(sub, '_hora_distributed', False):
                yield sub
                yield from subclasses(sub)
    for cls in set(subclasses(keras.optimizers.Optimizer)):
        if cls.__module__.startswith('keras'):
            add(cls)
    for cls in custom_optimizers or []:
        add(cls)
    objects.update(custom_objects or {})
    model = keras.models.load_model(filepath, custom_objects=objects)
    if getattr(model.optimizer, '_hora_distributed', False):
        model.optimizer._hora_configure(compression=compression)
    return model


from hora.keras import callbacks  # noqa: E402
from hora.keras import elastic  # noqa: E402
