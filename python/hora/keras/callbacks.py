"""Horovod's Keras callbacks (horovod.tensorflow.keras.callbacks) for Keras 3."""

import keras
import numpy as np
import tensorflow as tf

import hora.tensorflow as hvd
from hora.tensorflow.util import _var_key


def _variables(obj):
    v = obj.variables
    return list(v() if callable(v) else v)


class BroadcastGlobalVariablesCallback(keras.callbacks.Callback):
    """Gives every rank ``root_rank``'s model and optimizer state when training starts, so
    that all ranks begin alike (with random initial weights, or a checkpoint only rank 0
    read). The model's weights are broadcast at the start of training, and the model's and the
    optimizer's variables again after the first batch, once the optimizer has built its own
    (Horovod broadcasts after the first batch only)."""

    def __init__(self, root_rank, device=''):
        super(BroadcastGlobalVariablesCallback, self).__init__()
        self.root_rank = root_rank
        self.device = device
        self.broadcast_done = False
        self._local_vars = set()

    def register_local_var(self, var):
        """A variable that stays as each rank has it."""
        self._local_vars.add(_var_key(var))

    def _broadcast(self, with_optimizer):
        variables = [v for v in self.model.variables if _var_key(v) not in self._local_vars]
        if with_optimizer and self.model.optimizer is not None:
            variables += _variables(self.model.optimizer)
        with tf.device(self.device):
            hvd.broadcast_variables(variables, root_rank=self.root_rank)

    def on_train_begin(self, logs=None):
        if self.model.built:
            self._broadcast(False)

    def on_batch_end(self, batch, logs=None):
        if self.broadcast_done:
            return
        self._broadcast(True)
        self.broadcast_done = True


class MetricAverageCallback(keras.callbacks.Callback):
    """Averages the epoch's metrics (``logs``) over the ranks at the end of every epoch, so
    every rank (and the callbacks after this one) sees the job's values. Put it before the
    callbacks that read metrics."""

    def __init__(self, device=''):
        super(MetricAverageCallback, self).__init__()
        self.device = device

    def _average_metrics_in_place(self, logs):
        if not logs:
            return
        names = sorted(k for k, v in logs.items() if np.ndim(v) == 0)
        if not names:
            return
        values = tf.constant([float(logs[k]) for k in names], dtype=tf.float64)
        with tf.device(self.device):
            averaged = hvd.allreduce(values, op=hvd.Average,
                                     name='MetricAverageCallback').numpy()
        for k, v in zip(names, averaged):
            logs[k] = float(v)

    def on_epoch_end(self, epoch, logs=None):
        self._average_metrics_in_place(logs)


def _get_lr(optimizer):
    return float(keras.ops.convert_to_numpy(optimizer.learning_rate))


def _set_lr(optimizer, value):
    optimizer.learning_rate = value


class LearningRateScheduleCallback(keras.callbacks.Callback):
    """Sets the learning rate to ``initial_lr * multiplier(epoch)`` from ``start_epoch`` until
    ``end_epoch`` (``multiplier`` a function of the epoch, or a number raised to the epochs
    since start_epoch); per epoch with ``staircase``, else per batch (fractional epochs).
    ``momentum_correction`` scales an SGD momentum by new/old rate for the batch where the
    rate changes (Goyal et al.), as Horovod's."""

    def __init__(self, initial_lr, multiplier, start_epoch=0, end_epoch=None, staircase=True,
                 momentum_correction=True, steps_per_epoch=None):
        super(LearningRateScheduleCallback, self).__init__()
        if initial_lr is None:
            raise ValueError('Parameter `initial_lr` is required')
        self.initial_lr = initial_lr
        self.start_epoch = start_epoch
        self.end_epoch = end_epoch
        self.staircase = staircase
        self.momentum_correction = momentum_correction
        self.steps_per_epoch = steps_per_epoch
        self.current_epoch = None
        self.restore_momentum = None
        if callable(multiplier):
            self.multiplier = multiplier
        else:
            self.multiplier = lambda epoch: multiplier ** (epoch - start_epoch)

    def _autodetect_steps_per_epoch(self):
        if self.params.get('steps'):
            return self.params['steps']
        raise ValueError('Could not autodetect the number of steps per epoch. Please specify '
                         'the steps_per_epoch parameter to the %s()' % self.__class__.__name__)

    def _adjust_learning_rate(self, epoch):
        opt = self.model.optimizer
        old_lr = _get_lr(opt)
        new_lr = self.initial_lr * self.multiplier(epoch)
        _set_lr(opt, new_lr)
        momentum = getattr(opt, 'momentum', None)
        if self.momentum_correction and isinstance(momentum, (int, float)) and momentum and \
                old_lr:
            self.restore_momentum = momentum
            opt.momentum = momentum * new_lr / old_lr

    def _restore_momentum_if_needed(self):
        if self.restore_momentum:
            self.model.optimizer.momentum = self.restore_momentum
            self.restore_momentum = None

    def on_train_begin(self, logs=None):
        if not self.staircase and not self.steps_per_epoch:
            self.steps_per_epoch = self._autodetect_steps_per_epoch()

    def on_epoch_begin(self, epoch, logs=None):
        self.current_epoch = epoch

    def on_batch_begin(self, batch, logs=None):
        if self.current_epoch < self.start_epoch or (
                self.end_epoch is not None and self.current_epoch >= self.end_epoch):
            return
        if self.staircase and batch == 0:
            self._adjust_learning_rate(self.current_epoch)
        elif not self.staircase:
            self._adjust_learning_rate(self.current_epoch + float(batch) / self.steps_per_epoch)

    def on_batch_end(self, batch, logs=None):
        self._restore_momentum_if_needed()

    def on_epoch_end(self, epoch, logs=None):
        if logs is not None:
            logs['lr'] = _get_lr(self.model.optimizer)


class LearningRateWarmupCallback(LearningRateScheduleCallback):
    """Raises the learning rate from ``initial_lr / size()`` to ``initial_lr`` over
    ``warmup_epochs`` epochs, batch by batch (Goyal et al.'s warmup, as Horovod's)."""

    def __init__(self, initial_lr, warmup_epochs=5, momentum_correction=True,
                 steps_per_epoch=None, verbose=0):
        def multiplier(epoch):
            epoch += 1. / self.steps_per_epoch
            return 1. / hvd.size() * (epoch * (hvd.size() - 1) / warmup_epochs + 1)
        super(LearningRateWarmupCallback, self).__init__(
            initial_lr, multiplier, start_epoch=0, end_epoch=warmup_epochs, staircase=False,
            momentum_correction=momentum_correction, steps_per_epoch=steps_per_epoch)
        self.verbose = verbose

    def on_epoch_end(self, epoch, logs=None):
        super(LearningRateWarmupCallback, self).on_epoch_end(epoch, logs)
        if epoch == self.end_epoch - 1 and self.verbose > 0 and hvd.rank() == 0:
            print('\nEpoch %d: finished gradual learning rate warmup to %g.'
                  % (epoch + 1, _get_lr(self.model.optimizer)))


class BestModelCheckpoint(keras.callbacks.ModelCheckpoint):
    """A ModelCheckpoint that keeps the best model only (save_best_only). Horovod's takes no
    path (its Spark estimator sets one); Keras 3's needs one at construction, so ``filepath``
    is an extra keyword (default 'best_model.keras', or 'best_model.weights.h5' with
    save_weights_only). Save on rank 0 only: add it there."""

    def __init__(self, monitor='val_loss', verbose=0, save_weights_only=False, mode='auto',
                 save_freq='epoch', filepath=None):
        if filepath is None:
            filepath = 'best_model.weights.h5' if save_weights_only else 'best_model.keras'
        super(BestModelCheckpoint, self).__init__(
            filepath=filepath, monitor=monitor, verbose=verbose, save_best_only=True,
            save_weights_only=save_weights_only, mode=mode, save_freq=save_freq)
