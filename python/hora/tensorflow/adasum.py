"""Horovod's Adasum reduction (``op=hvd.Adasum``) for hora.tensorflow's allreduces.

libhora has no Adasum of its own (its engine reduces with Sum, Average, Min, Max and Product),
so this is hora.torch's way (python/hora/torch/adasum.py), in TensorFlow ops that run eagerly
and inside tf.function: every rank allgathers the tensors (flattened into one row, in their own
dtype) and computes the same recursive-doubling tree in float64, then casts back. Two vectors
a and b combine as ``(1 - a.b / (2|a|^2)) a + (1 - a.b / (2|b|^2)) b`` (a coefficient stays 1
where its vector's squared norm is below 1e-8); level 1 combines ranks 0+1, 2+3, ..., level 2
the pairs' results, the lower ranks' vector always being a. Dot products and norms are per
tensor, also in a grouped allreduce (Horovod's fused buffer keeps the tensors apart too).
Traffic is O(size x n) bytes per rank, where Horovod's point-to-point tree sends O(n).

The gradient is Horovod's: the Adasum of the incoming gradients, with the same scale factors.
"""

import tensorflow as tf

from hora.tensorflow import mpi_ops as _m

# What Horovod's Adasum reduces (its DispatchComputeDotAndNormSqrds: float16, float32, float64).
_FLOAT_TYPES = (tf.float16, tf.float32, tf.float64)

# Horovod's own words (horovod/tensorflow/mpi_ops.py, _allreduce).
NON_POWER_OF_TWO = 'Running Adasum with non-power of 2 ranks is not supported yet.'


def check(tensors, what, process_set):
    """Refuses, before anything is submitted, what Adasum cannot reduce: a set whose size is
    not a power of two, and non-float tensors."""
    n = process_set.size()
    if not _m.check_num_rank_power_of_2(n):
        lower = 1 << (n.bit_length() - 1)
        raise NotImplementedError(
            '%s (hora.tensorflow %s with op=hvd.Adasum on rank %d: %s is %d; Adasum reduces over '
            'a recursive-doubling tree of 1, 2, 4, 8... ranks: %s %d or %d, or use '
            'op=hvd.Average)' % (
                NON_POWER_OF_TWO, what, _m.rank(),
                'size()' if process_set.process_set_id == 0 else "the process set's size", n,
                'launch with horarun -np' if process_set.process_set_id == 0
                else 'use a process set of', lower, lower * 2))
    for t in tensors:
        if isinstance(t, tf.IndexedSlices):
            continue  # refused with Horovod's message where sparse tensors are reduced
        if t.dtype not in _FLOAT_TYPES:
            raise ValueError('hora.tensorflow %s with op=hvd.Adasum: tensor of shape %s is %s; '
                             'Adasum reduces float16, float32 and float64 tensors only (as '
                             'Horovod\'s)' % (what, t.shape, t.dtype.name))


def _combine(a, b):
    """Adasum of two float64 vectors; ``a`` is the lower ranks' one."""
    dot = tf.reduce_sum(a * b)
    anormsq = tf.reduce_sum(a * a)
    bnormsq = tf.reduce_sum(b * b)
    one = tf.constant(1.0, tf.float64)
    acoeff = tf.where(anormsq >= 1e-8, one - tf.math.divide_no_nan(dot, anormsq) * 0.5, one)
    bcoeff = tf.where(bnormsq >= 1e-8, one - tf.math.divide_no_nan(dot, bnormsq) * 0.5, one)
    return acoeff * a + bcoeff * b


def _tree(rows, n):
    """The recursive-doubling tree over the n rows of a float64 matrix (n a power of two)."""
    vectors = [rows[i] for i in range(n)]
    while len(vectors) > 1:
        vectors = [_combine(vectors[i], vectors[i + 1]) for i in range(0, len(vectors), 2)]
    return vectors[0]


def _reduce(tensors, name, prescale_factor, postscale_factor, process_set, ignore_name_scope):
    n = process_set.size()
    flat = tf.concat([tf.reshape(t, [1, -1]) for t in tensors], axis=1)
    gathered = _m.allgather(flat, name=None if name is None else name + '.adasum',
                            ignore_name_scope=ignore_name_scope, process_set=process_set)
    rows = tf.cast(gathered, tf.float64)
    if prescale_factor != 1.0:
        rows = rows * prescale_factor
    parts = tf.split(rows, [tf.size(t) for t in tensors], axis=1) if len(tensors) > 1 else [rows]
    outs = []
    for t, part in zip(tensors, parts):
        reduced = _tree(part, n)
        if postscale_factor != 1.0:
            reduced = reduced * postscale_factor
        outs.append(tf.reshape(tf.cast(reduced, t.dtype), tf.shape(t)))
    return outs


def grouped_allreduce(tensors, name=None, prescale_factor=1.0, postscale_factor=1.0,
                      process_set=None, ignore_name_scope=False, what='grouped_allreduce'):
    """The Adasum of every tensor of the list (one dtype) over the process set's ranks, as one
    allgather. Call check() first."""
    process_set = process_set or _m.global_process_set
    if process_set.size() == 1:
        return [tf.identity(t) for t in tensors]
    n_grad = [0]

    @tf.custom_gradient
    def adasum(*xs):
        outs = _reduce(list(xs), name, prescale_factor, postscale_factor, process_set,
                       ignore_name_scope)

        def grad(*dys):
            n_grad[0] += 1
            return _reduce([tf.convert_to_tensor(d) for d in dys],
                           None if name is None else '%s.grad%d' % (name, n_grad[0]),
                           prescale_factor, postscale_factor, process_set, ignore_name_scope)
        return outs, grad

    return list(adasum(*tensors))
