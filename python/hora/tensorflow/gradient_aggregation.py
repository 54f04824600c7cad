"""Local gradient aggregation (Horovod's LocalGradientAggregationHelper): with
``backward_passes_per_step`` = N, gradients are summed locally and allreduced once every N
passes; the passes in between return the running sums and the optimizer does not step."""

import tensorflow as tf


class LocalGradientAggregationHelper(object):
    """Accumulates gradients in variables; compute_gradients() returns the allreduced sums on
    every N-th call (divided by N with ``average_aggregated_gradients``)."""

    def __init__(self, backward_passes_per_step, allreduce_func, sparse_as_dense,
                 average_aggregated_gradients, **unused):
        if backward_passes_per_step <= 0:
            raise ValueError('backward_passes_per_step must be > 0')
        self.backward_passes_per_step = backward_passes_per_step
        self.allreduce_grads = allreduce_func
        self.sparse_as_dense = sparse_as_dense
        self.average_aggregated_gradients = average_aggregated_gradients
        self.counter = None
        self.locally_aggregated_grads = {}

    def _init_vars(self, grads):
        if self.counter is None:
            self.counter = tf.Variable(0, trainable=False, dtype=tf.int64)
        for idx, grad in enumerate(grads):
            if grad is not None and idx not in self.locally_aggregated_grads:
                self.locally_aggregated_grads[idx] = tf.Variable(
                    tf.zeros_like(grad), trainable=False, dtype=grad.dtype)

    def compute_gradients(self, grads, variables):
        dense = []
        for grad in grads:
            if isinstance(grad, tf.IndexedSlices):
                if not self.sparse_as_dense:
                    raise ValueError('IndexedSlices are not supported when '
                                     '`backward_passes_per_step` > 1 and `sparse_as_dense` is '
                                     'False.')
                grad = tf.convert_to_tensor(grad)
            dense.append(grad)
        # Variables are made outside any tf.function's trace (init_scope).
        with tf.init_scope():
            self._init_vars(dense)
        summed = []
        for idx, grad in enumerate(dense):
            if grad is None:
                summed.append(None)
                continue
            acc = self.locally_aggregated_grads[idx]
            acc.assign_add(grad)
            summed.append(acc.read_value())
        self.counter.assign_add(1)
        present = [i for i, g in enumerate(summed) if g is not None]

        def reduce_and_clear():
            reduced = self.allreduce_grads([summed[i] for i in present],
                                           [variables[i] for i in present])
            if self.average_aggregated_gradients:
                reduced = [g / self.backward_passes_per_step for g in reduced]
            with tf.control_dependencies([tf.identity(g) for g in reduced]):
                clear = [self.counter.assign(0)] + [
                    self.locally_aggregated_grads[i].assign(tf.zeros_like(summed[i]))
                    for i in present]
            with tf.control_dependencies(clear):
                return [tf.identity(g) for g in reduced]

        def keep():
            return [tf.identity(summed[i]) for i in present]

        out = tf.cond(tf.equal(self.counter, self.backward_passes_per_step), reduce_and_clear,
                      keep)
        result = [None] * len(summed)
        for i, g in zip(present, out):
            result[i] = g
        return result

    def is_aggregation_step(self):
        """True (a tensor) right after the N-th pass's allreduce (the counter was cleared)."""
        return tf.equal(self.counter, 0)
