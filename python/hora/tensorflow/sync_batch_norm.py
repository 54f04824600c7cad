"""SyncBatchNormalization: Keras 3's BatchNormalization with the batch statistics of every
rank (Horovod's horovod.tensorflow.sync_batch_norm)."""

import keras
import tensorflow as tf

from hora.tensorflow.mpi_ops import _allreduce, Sum, size


class SyncBatchNormalization(keras.layers.BatchNormalization):
    """Normalizes with the mean and variance of the global batch: each rank's mean and mean of
    squares are summed over the ranks (one allreduce per call) and divided by size(), as
    Horovod's does (every rank's batch counts the same)."""

    def __init__(self, **kwargs):
        kwargs.pop('fused', None)  # Keras 3 has no fused kernels to turn off
        super(SyncBatchNormalization, self).__init__(**kwargs)

    def _moments(self, inputs, mask):
        mean, variance = super(SyncBatchNormalization, self)._moments(inputs, mask)
        n = size()
        if n == 1:
            return mean, variance
        stack = tf.stack([mean, variance + tf.math.square(mean)])
        stack = _allreduce(stack, op=Sum) / n
        group_mean, group_mean_of_square = tf.unstack(stack)
        return group_mean, group_mean_of_square - tf.math.square(group_mean)
