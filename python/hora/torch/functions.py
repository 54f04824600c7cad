"""Horovod's helper functions (``horovod.torch.functions``) on hora.torch's collectives."""

import io
import pickle

import torch

from hora.torch.mpi_ops import (allgather, broadcast_, broadcast_async_, rank, synchronize,
                                _check_process_set)


def broadcast_parameters(params, root_rank, prefix=None):
    """Overwrites every tensor of ``params`` (a state_dict, or a list of (name, tensor) such as
    model.named_parameters()) with root_rank's, in place."""
    if isinstance(params, dict):
        params = sorted(params.items())
    elif isinstance(params, list):
        if any(not isinstance(p, tuple) for p in params):
            raise ValueError('broadcast_parameters: params should be a list of (name, tensor)')
    else:
        params = list(params)
    handles = []
    for name, p in params:
        if p is None:
            continue
        if prefix is not None:
            name = prefix + name
        handles.append(broadcast_async_(p.data if isinstance(p, torch.nn.Parameter) else p,
                                        root_rank, 'broadcast_parameters.' + name))
    for h in handles:
        synchronize(h)


def broadcast_optimizer_state(optimizer, root_rank, prefix='Parameter.', model=None):
    """Gives every rank root_rank's optimizer state (per-parameter state such as momentum
    buffers, and the hyper-parameters of every param group)."""
    if isinstance(optimizer, torch.optim.LBFGS):
        raise ValueError('cannot broadcast torch.optim.LBFGS state')
    state = broadcast_object(optimizer.state_dict() if rank() == root_rank else None,
                             root_rank, name=(prefix or '') + 'optimizer_state')
    if rank() != root_rank:
        optimizer.load_state_dict(state)


def _dumps(obj):
    b = io.BytesIO()
    pickle.dump(obj, b, protocol=pickle.HIGHEST_PROTOCOL)
    return torch.frombuffer(bytearray(b.getvalue()), dtype=torch.uint8)


def _loads(t):
    return pickle.loads(t.numpy().tobytes())


def broadcast_object(obj, root_rank=0, name=None, process_set=None):
    """Returns root_rank's ``obj`` (any picklable object) on every rank."""
    _check_process_set(process_set)
    name = name or type(obj).__name__
    if rank() == root_rank:
        payload = _dumps(obj)
        length = torch.tensor([payload.numel()], dtype=torch.int64)
    else:
        length = torch.zeros(1, dtype=torch.int64)
    broadcast_(length, root_rank, name + '.len')
    if rank() != root_rank:
        payload = torch.empty(int(length.item()), dtype=torch.uint8)
    broadcast_(payload, root_rank, name + '.data')
    if rank() == root_rank:
        return obj
    return _loads(payload)


def allgather_object(obj, name=None, process_set=None):
    """Returns the list of every rank's ``obj`` (picklable), in rank order."""
    _check_process_set(process_set)
    name = name or type(obj).__name__
    payload = _dumps(obj)
    lengths = allgather(torch.tensor([payload.numel()], dtype=torch.int64),
                        name=name + '.len').tolist()
    data = allgather(payload, name=name + '.data')
    out, offset = [], 0
    for n in lengths:
        out.append(_loads(data[offset:offset + n]))
        offset += n
    return out
