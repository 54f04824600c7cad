"""Elastic training with hora.tensorflow (Horovod's horovod.tensorflow.elastic): run(),
TensorFlowKerasState, TensorFlowState, on hora's elastic jobs (docs/elastic.md)."""

import functools

import tensorflow as tf

from hora.common import elastic as _common
from hora.common.elastic import ObjectState, run_fn
from hora.common.exceptions import HorovodInternalError, HostsUpdatedInterrupt  # noqa: F401
from hora.tensorflow import mpi_ops as _m
from hora.tensorflow.functions import broadcast_object, broadcast_variables
from hora.tensorflow.mpi_ops import rank

_common.set_runtime(lambda: bool(_m._C.hora_tf_elastic_enabled()),
                    lambda: bool(_m._C.hora_tf_elastic_reset_pending()))

_LOST = ('HoraPeerFailure', 'HoraAbortedError', 'HoraConnectionError', 'HoraTimeoutError')


def _reset():
    """Moves this rank to the launcher's next round (hora's reset), or, outside an elastic
    job, shuts down and initialises again (Horovod's)."""
    from hora.tensorflow.process_sets import _setup
    if _m._C.hora_tf_elastic_enabled():
        _m._check(_m._C.hora_tf_elastic_reset(600.0))
        _setup(None)
    else:
        _m.shutdown()
        _m.init()


def run(func):
    """Runs ``func(state, ...)`` in the elastic loop: a lost rank (an op failing with one of
    hora's lost-rank errors, inside tf.function too) restores the last commit and resets."""
    @functools.wraps(func)
    def wrapper(state, *args, **kwargs):
        try:
            return func(state, *args, **kwargs)
        except tf.errors.OpError as e:
            if any(k in (e.message or '') for k in _LOST):
                raise HorovodInternalError(e) from e
            raise
    return run_fn(wrapper, _reset)


def _variables(obj):
    v = obj.variables
    return list(v() if callable(v) else v)


class TensorFlowKerasState(ObjectState):
    """A Keras model and its optimizer (and any keyword attributes) saved at commit(),
    restored after a failure and broadcast from rank 0 at sync()."""

    def __init__(self, model, optimizer=None, backend=None, **kwargs):
        self.model = model
        if not model.built:
            raise ValueError('Model must be built first. Run `model.build(input_shape)`.')
        self.optimizer = optimizer or model.optimizer
        self.backend = backend
        self._save_model()
        super(TensorFlowKerasState, self).__init__(bcast_object=broadcast_object, get_rank=rank,
                                                   **kwargs)

    def _all_variables(self):
        self._build_optimizer()
        return list(self.model.variables) + (_variables(self.optimizer) if self.optimizer
                                             else [])

    def _build_optimizer(self):
        # Keras 3 makes an optimizer's slots (momentum, Adam's moments) at its first apply(): a
        # worker that joins a running job has none yet where the others have them, and sync()'s
        # broadcast of rank 0's variables would not match the new worker's list (the job
        # stalled in that broadcast). Built at once, every worker has the same variables.
        opt = self.optimizer
        if opt is not None and hasattr(opt, 'build') and not getattr(opt, 'built', True):
            with tf.init_scope():
                opt.build(self.model.trainable_variables)

    def save(self):
        self._save_model()
        super(TensorFlowKerasState, self).save()

    def restore(self):
        for var, saved in zip(self._all_variables(), self._saved):
            var.assign(saved)
        super(TensorFlowKerasState, self).restore()

    def sync(self):
        broadcast_variables(self._all_variables(), root_rank=0)
        self._save_model()
        super(TensorFlowKerasState, self).sync()

    def _save_model(self):
        self._saved = [tf.identity(v) for v in self._all_variables()]


class TensorFlowState(ObjectState):
    """A list of tf.Variable (and any keyword attributes), as TensorFlowKerasState."""

    def __init__(self, variables=None, session=None, **kwargs):
        if variables is None:
            raise ValueError('hora.tensorflow.elastic.TensorFlowState needs its variables '
                             '(TF 2 has no global variable collection)')
        self.variables = list(variables)
        self.session = session
        self._save_model()
        super(TensorFlowState, self).__init__(bcast_object=broadcast_object, get_rank=rank,
                                              **kwargs)

    def save(self):
        self._save_model()
        super(TensorFlowState, self).save()

    def restore(self):
        for var, value in zip(self.variables, self._values):
            var.assign(value)
        super(TensorFlowState, self).restore()

    def sync(self):
        broadcast_variables(self.variables, root_rank=0)
        self._save_model()
        super(TensorFlowState, self).sync()

    def _save_model(self):
        self._values = [v.numpy() for v in self.variables]


__all__ = ['TensorFlowKerasState', 'TensorFlowState', 'run']
