"""broadcast_object and allgather_object for hora.mxnet (pickle over the byte collectives)."""

import pickle

import numpy as np
import mxnet as mx

from hora.mxnet.mpi_ops import allgather, broadcast_, global_process_set, rank


def broadcast_object(obj, root_rank=0, name=None, process_set=global_process_set):
    """The root's ``obj`` on every rank (pickled)."""
    name = name or type(obj).__name__
    data = pickle.dumps(obj) if rank() == root_rank else b''
    size = broadcast_(mx.nd.array([len(data)], dtype=np.int64), root_rank, name=name + '.sz',
                      process_set=process_set)
    buf = mx.nd.zeros((int(size.asscalar()),), dtype=np.uint8)
    if rank() == root_rank:
        buf[:] = mx.nd.array(np.frombuffer(data, np.uint8), dtype=np.uint8)
    broadcast_(buf, root_rank, name=name + '.data', process_set=process_set)
    return pickle.loads(buf.asnumpy().tobytes())


def allgather_object(obj, name=None, process_set=global_process_set):
    """Every rank's ``obj``, in rank order (pickled)."""
    name = name or type(obj).__name__
    data = np.frombuffer(pickle.dumps(obj), np.uint8)
    sizes = allgather(mx.nd.array([data.size], dtype=np.int64), name=name + '.sz',
                      process_set=process_set).asnumpy()
    gathered = allgather(mx.nd.array(data, dtype=np.uint8), name=name + '.data',
                         process_set=process_set).asnumpy()
    out, offset = [], 0
    for n in sizes:
        out.append(pickle.loads(gathered[offset:offset + n].tobytes()))
        offset += n
    return out
