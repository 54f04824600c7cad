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
    _initialize_optimizer_state(optimizer, model)
    state = broadcast_object(optimizer.state_dict() if rank() == root_rank else None,
                             root_rank, name=(prefix or '') + 'optimizer_state')
    if rank() != root_rank:
        optimizer.load_state_dict(state)


def _initialize_optimizer_state(optimizer, model):
    """As Horovod's broadcast_optimizer_state does first: an optimizer without state (a fresh
    one) takes one step with zero gradients (set as every trainable parameter's .grad; sparse
    for SparseAdam, and for SGD on a sparse Embedding of ``model``), so that it has its state
    (momentum buffers, Adam's moments) on every rank before root_rank's is broadcast. A
    DistributedOptimizer takes its wrapped optimizer's step, without allreducing the zeros."""
    if optimizer.state_dict()['state']:
        return
    sparse = set()
    if model is not None:
        for m in model.modules():
            if isinstance(m, torch.nn.Embedding) and m.sparse:
                sparse.update(id(p) for p in m.parameters())
    for group in optimizer.param_groups:
        for p in group['params']:
            if p.requires_grad:
                p.grad = p.data.new(p.size()).zero_()
                if isinstance(optimizer, torch.optim.SparseAdam) or \
                        (isinstance(optimizer, torch.optim.SGD) and id(p) in sparse):
                    p.grad = p.grad.to_sparse()
    if type(optimizer).__module__ == 'hora.torch.optimizer':
        super(type(optimizer), optimizer).step()
    else:
        optimizer.step()


# Objects travel as cloudpickle's bytes (as in Horovod), so lambdas, closures and classes defined
# in __main__ work too; plain pickle where cloudpickle is not installed.
try:
    import cloudpickle as _pickler
except ImportError:  # pragma: no cover (Debian's python3-cloudpickle is a dependency)
    _pickler = pickle

# A header says, per rank, how many bytes follow and whether they are the object (_OK) or the
# text of the error that serializing it raised (_FAILED), so that every rank reports that error
# instead of waiting for a collective the failed rank never submits.
_OK = 0
_FAILED = 1


def _bytes_tensor(data):
    return torch.frombuffer(bytearray(data), dtype=torch.uint8)


def _serialize(obj):
    """Returns (status, uint8 tensor): the pickled object, or the error's text."""
    try:
        b = io.BytesIO()
        _pickler.dump(obj, b, protocol=pickle.HIGHEST_PROTOCOL)
        return _OK, _bytes_tensor(b.getvalue())
    except Exception as e:  # any error the pickler raises (PicklingError, TypeError, ...)
        text = '%s: %s' % (type(e).__name__, e)
        return _FAILED, _bytes_tensor(text.encode('utf-8', 'replace'))


def _loads(t):
    return _pickler.loads(t.numpy().tobytes())


def _text(t):
    return t.numpy().tobytes().decode('utf-8', 'replace')


def broadcast_object(obj, root_rank=0, name=None, process_set=None):
    """Returns root_rank's ``obj`` on every rank; anything cloudpickle serializes (lambdas and
    closures too). If the root cannot serialize it, every rank raises pickle.PicklingError with
    the root's error. With ``process_set``, only its ranks call it and root_rank is a global
    rank in the set."""
    _check_process_set(process_set, 'broadcast_object')
    name = name or type(obj).__name__
    root = rank() == root_rank
    if root:
        status, payload = _serialize(obj)
        header = torch.tensor([payload.numel(), status], dtype=torch.int64)
    else:
        header = torch.zeros(2, dtype=torch.int64)
    broadcast_(header, root_rank, name + '.len', process_set)
    length, status = (int(v) for v in header.tolist())
    if not root:
        payload = torch.empty(length, dtype=torch.uint8)
    broadcast_(payload, root_rank, name + '.data', process_set)
    if status != _OK:
        raise pickle.PicklingError('broadcast_object %r: the root rank %d failed to serialize '
                                   'the object: %s' % (name, root_rank, _text(payload)))
    if root:
        return obj
    return _loads(payload)


def allgather_object(obj, name=None, process_set=None):
    """Returns the list of every rank's ``obj`` (anything cloudpickle serializes), in rank
    order. If a rank cannot serialize its object, every rank raises pickle.PicklingError naming
    the ranks that failed and their errors. With ``process_set`` (a hora extension: Horovod's
    takes none), the list holds the set's ranks' objects, in set-rank order."""
    _check_process_set(process_set, 'allgather_object')
    name = name or type(obj).__name__
    status, payload = _serialize(obj)
    headers = allgather(torch.tensor([[payload.numel(), status]], dtype=torch.int64),
                        name=name + '.len', process_set=process_set).tolist()
    data = allgather(payload, name=name + '.data', process_set=process_set)
    parts, offset = [], 0
    for n, _ in headers:
        parts.append(data[offset:offset + n])
        offset += n
    failed = [(r, _text(p)) for r, ((_, st), p) in enumerate(zip(headers, parts)) if st != _OK]
    if failed:
        raise pickle.PicklingError('allgather_object %r: %s' % (name, '; '.join(
            'rank %d failed to serialize its object: %s' % f for f in failed)))
    return [_loads(p) for p in parts]
