"""Horovod's helpers on top of the collectives (horovod.tensorflow.functions): variables and
Python objects from one rank to all."""

import io
import pickle

import numpy as np
import tensorflow as tf

from hora.tensorflow.mpi_ops import (allgather, broadcast, broadcast_, _grouped_broadcast, rank,
                                     global_process_set)
from hora.tensorflow.util import _cache, _executing_eagerly, _make_subgraph, _tf_var


@_cache
def _make_broadcast_group_fn():
    def broadcast_group(variables, root_rank, process_set):
        if not variables:
            return tf.no_op()
        # One op for all of them: every variable is its own engine op, fused by the engine.
        values = _grouped_broadcast([tf.convert_to_tensor(v) for v in variables], root_rank,
                                    process_set=process_set)
        return tf.group(*[v.assign(x) for v, x in zip(variables, values)])
    if _executing_eagerly():
        graph = _make_subgraph(lambda *args: broadcast_group(*args) and None)
        return lambda variables, root_rank, process_set: (
            graph(variables, root_rank, process_set) if variables else None)
    return broadcast_group


def broadcast_variables(variables, root_rank, process_set=global_process_set, inplace=False):
    """Gives every rank ``root_rank``'s values of ``variables`` (a global rank). ``inplace``
    is accepted for Horovod's signature; hora assigns the broadcast values either way."""
    variables = [_tf_var(v) for v in variables]
    if inplace:
        return broadcast_(variables, root_rank, process_set=process_set)
    return _make_broadcast_group_fn()(variables, root_rank, process_set)


def _to_numpy(v, session):
    if _executing_eagerly():
        return v.numpy()
    sess = session or tf.compat.v1.get_default_session()
    return sess.run(v)


def broadcast_object(obj, root_rank=0, session=None, name=None,
                     process_set=global_process_set):
    """``root_rank``'s picklable ``obj`` on every rank (pickled, broadcast as bytes)."""
    if name is None:
        name = type(obj).__name__
    if rank() == root_rank:
        b = io.BytesIO()
        pickle.dump(obj, b)
        t = tf.convert_to_tensor(np.frombuffer(b.getvalue(), dtype=np.uint8))
        sz = tf.constant([t.shape[0]], dtype=tf.int32)
        _to_numpy(broadcast(sz, root_rank, name + '.sz', process_set=process_set), session)
    else:
        sz = tf.constant([0], dtype=tf.int32)
        sz = _to_numpy(broadcast(sz, root_rank, name + '.sz', process_set=process_set), session)
        t = tf.zeros(sz.tolist()[0], dtype=tf.uint8)
    t = _to_numpy(broadcast(t, root_rank, name + '.t', process_set=process_set), session)
    if rank() != root_rank:
        obj = pickle.loads(t.tobytes())
    return obj


def broadcast_object_fn(root_rank=0, session=None, name=None, process_set=global_process_set):
    """A function that broadcasts an object from ``root_rank`` (Horovod builds TF1
    placeholders for it; in TF 2 it is broadcast_object with these arguments bound)."""
    name = name or 'broadcast_object_fn'

    def _bcast(obj):
        return broadcast_object(obj, root_rank=root_rank, session=session, name=name,
                                process_set=process_set)
    return _bcast


def allgather_object(obj, session=None, name=None, process_set=global_process_set):
    """The list of every rank's picklable ``obj``, in rank order."""
    if name is None:
        name = type(obj).__name__
    b = io.BytesIO()
    pickle.dump(obj, b)
    t = tf.convert_to_tensor(np.frombuffer(b.getvalue(), dtype=np.uint8))
    sz = tf.constant([t.shape[0]], dtype=tf.int32)
    sizes = _to_numpy(allgather(sz, name=name + '.sz', process_set=process_set), session)
    gathered = _to_numpy(allgather(t, name=name + '.t', process_set=process_set), session)
    out, start = [], 0
    for n in sizes:
        out.append(pickle.loads(gathered[start:start + n].tobytes()))
        start += n
    return out
