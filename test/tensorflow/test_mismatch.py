"""Ranks that disagree about an op (run at -np 2 and 3): every rank gets hora's
HoraMismatchError (eager) or TensorFlow's FailedPreconditionError whose message starts with
it (inside tf.function), naming the ranks; the engine stays usable afterwards."""

import numpy as np
import tensorflow as tf

import hora.tensorflow as hvd
from harness import run

hvd.init()
R, N = hvd.rank(), hvd.size()


def expect_mismatch(fn, *words):
    try:
        fn()
    except hvd.HoraMismatchError as e:
        text = str(e)
    except tf.errors.FailedPreconditionError as e:
        text = e.message
        assert 'HoraMismatchError' in text, text
    else:
        raise AssertionError('no mismatch error on rank %d' % R)
    for w in words:
        assert w in text, (w, text)
    # Still usable: a matching op completes.
    assert hvd.allreduce(tf.constant([1.0]), op=hvd.Sum).numpy()[0] == N


def test_allreduce_shapes():
    x = tf.zeros([2, 3] if R == 0 else [3, 3])
    expect_mismatch(lambda: hvd.allreduce(x, name='shapes'), 'shapes', 'rank')


def test_allreduce_dtypes():
    x = tf.zeros([4], dtype=tf.float32 if R == 0 else tf.float64)
    expect_mismatch(lambda: hvd.allreduce(x, name='dtypes'), 'dtypes')


def test_allgather_trailing_dimensions():
    x = tf.zeros([1, 2] if R == 0 else [1, 3])
    expect_mismatch(lambda: hvd.allgather(x, name='trailing'), 'trailing')


def test_broadcast_in_function():
    x = tf.zeros([2] if R == 0 else [5])
    expect_mismatch(lambda: tf.function(lambda: hvd.broadcast(x, 0, name='bcast'))(), 'bcast')


def test_reduce_ops():
    x = tf.ones([2])
    expect_mismatch(lambda: hvd.allreduce(x, op=hvd.Sum if R == 0 else hvd.Max,
                                          name='ops'), 'ops')


run(globals())
