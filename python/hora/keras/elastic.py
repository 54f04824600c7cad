"""Elastic Keras training (Horovod's horovod.tensorflow.keras.elastic): KerasState, the
callbacks that keep it current, and run()."""

import keras

from hora.tensorflow.elastic import TensorFlowKerasState, run  # noqa: F401


class KerasState(TensorFlowKerasState):
    """The model, its optimizer and ``kwargs`` (e.g. epoch=0, batch=0) of an elastic Keras
    job."""

    def __init__(self, model, optimizer=None, **kwargs):
        super(KerasState, self).__init__(model, optimizer=optimizer, **kwargs)


class CommitStateCallback(keras.callbacks.Callback):
    """Commits the state every ``batches_per_commit`` batches (and at every epoch's end)."""

    def __init__(self, state, batches_per_commit=1):
        super(CommitStateCallback, self).__init__()
        self.state = state
        self.batches_per_commit = batches_per_commit
        self.batches_remaining = batches_per_commit

    def on_train_begin(self, logs=None):
        # Every worker counts from the start of each fit() and each epoch. After a reset the
        # workers that were there call fit() again from the epoch's start, as a new worker does;
        # a count carried over from the interrupted fit() made the old workers commit (a
        # collective) at other batches than the new one, and the job stalled.
        self.batches_remaining = self.batches_per_commit

    def on_epoch_begin(self, epoch, logs=None):
        self.batches_remaining = self.batches_per_commit

    def on_batch_end(self, batch, logs=None):
        self.batches_remaining -= 1
        if self.batches_remaining == 0:
            self.state.commit()
            self.batches_remaining = self.batches_per_commit

    def on_epoch_end(self, epoch, logs=None):
        self.state.commit()
        self.batches_remaining = self.batches_per_commit


class UpdateBatchStateCallback(keras.callbacks.Callback):
    """Keeps ``state.batch`` current (and resets it at each epoch's end)."""

    def __init__(self, state):
        super(UpdateBatchStateCallback, self).__init__()
        self.state = state

    def on_batch_end(self, batch, logs=None):
        self.state.batch = batch

    def on_epoch_end(self, epoch, logs=None):
        self.state.batch = 0


class UpdateEpochStateCallback(keras.callbacks.Callback):
    """Keeps ``state.epoch`` current."""

    def __init__(self, state):
        super(UpdateEpochStateCallback, self).__init__()
        self.state = state

    def on_epoch_end(self, epoch, logs=None):
        self.state.epoch = epoch + 1
