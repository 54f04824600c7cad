"""Horovod's Adasum reduction (``op=hvd.Adasum``) for hora.torch's allreduces.

Adasum combines two vectors a and b as ``(1 - a.b / (2|a|^2)) a + (1 - a.b / (2|b|^2)) b``
(a coefficient stays 1 where its vector's squared norm is below 1e-8), and reduces n ranks
(a power of two) over a recursive-doubling tree: at level 1 ranks 0+1, 2+3, ... are combined,
at level 2 the results of 0-1 and 2-3, and so on, the lower ranks' vector always being a.
Horovod computes that tree with point-to-point messages (vector halving, distance doubling,
horovod/common/ops/adasum/adasum.h). hora.torch has no point-to-point op, so every rank
allgathers the tensors (flattened, in their own dtype) and computes the same tree locally in
float64, then casts: every rank gets the identical result, for O(size * n) bytes of traffic per
rank instead of Horovod's O(n) (docs/pytorch.md, "Adasum").

As in Horovod, the dot products and norms are per tensor: a grouped allreduce (Horovod's fused
buffer, whose "tensor counts" keep the tensors apart) gathers every tensor in one buffer but
combines each tensor with its own coefficients.
"""

import torch

from hora.torch import _core as _ops

# What Horovod's Adasum reduces (its DispatchComputeDotAndNormSqrds: float16, float32, float64).
_FLOAT_TYPES = (torch.float16, torch.float32, torch.float64)

# Horovod's own words (horovod/torch/mpi_ops.py, _allreduce_async).
NON_POWER_OF_TWO = 'Running Adasum with non-power of 2 ranks is not supported yet.'


def is_power_of_two(n):
    return n > 0 and (n & (n - 1)) == 0


def check_size(what, ps_id=0):
    """Raises NotImplementedError (Horovod's message, with hora's context) when the number of
    ranks reduced over (size(), or process set ``ps_id``'s size) is not a power of two."""
    n = _ops._set_size(ps_id)
    if not is_power_of_two(n):
        lower = 1 << (n.bit_length() - 1)
        raise NotImplementedError(
            '%s (hora.torch %s with op=hvd.Adasum on rank %d: %s is %d; Adasum reduces over a '
            'recursive-doubling tree of 1, 2, 4, 8... ranks: %s %d or %d, or use op=hvd.Average)'
            % (NON_POWER_OF_TWO, what, _ops.rank(),
               'size()' if ps_id == 0 else "the process set's size", n,
               'launch with horarun -np' if ps_id == 0 else 'use a process set of', lower,
               lower * 2))


def check_tensors(tensors, what, ps_id=0):
    """Refuses, before anything is submitted, what Adasum cannot reduce."""
    check_size(what, ps_id)
    for t in tensors:
        if t.is_sparse:
            raise ValueError('hora.torch %s with op=hvd.Adasum: tensor of shape %s is sparse; '
                             'Adasum reduces dense tensors (pass sparse_as_dense=True to '
                             'DistributedOptimizer, or call .to_dense())' % (what, list(t.shape)))
        if t.dtype not in _FLOAT_TYPES:
            raise ValueError('hora.torch %s with op=hvd.Adasum: tensor of shape %s is %s; Adasum '
                             'reduces float16, float32 and float64 tensors only (as Horovod\'s)'
                             % (what, list(t.shape), str(t.dtype).replace('torch.', '')))


def combine(a, b):
    """Adasum of two float64 vectors; ``a`` is the lower ranks' one."""
    dot = torch.dot(a, b).item()
    anormsq = torch.dot(a, a).item()
    bnormsq = torch.dot(b, b).item()
    acoeff = 1.0 - dot / anormsq * 0.5 if anormsq >= 1e-8 else 1.0
    bcoeff = 1.0 - dot / bnormsq * 0.5 if bnormsq >= 1e-8 else 1.0
    return acoeff * a + bcoeff * b


def reduce_rows(rows):
    """The recursive-doubling tree over the rows of a float64 matrix (one row per rank, a
    power of two of them): returns the reduced vector."""
    vectors = list(rows)
    while len(vectors) > 1:
        vectors = [combine(vectors[i], vectors[i + 1]) for i in range(0, len(vectors), 2)]
    return vectors[0]


def allreduce_async(tensors, outputs, name, prescale_factor, postscale_factor, what, ps_id=0):
    """Submits one allgather of ``tensors`` (flattened into one row, over process set ``ps_id``:
    the tree is over the set's ranks in set-rank order) and returns a hora.torch handle whose
    synchronize() writes each tensor's Adasum into ``outputs`` and returns them (the one tensor
    for ``what`` 'allreduce'). CUDA tensors are staged through host memory. Call
    check_tensors() first."""
    name = _ops._auto_name(what, name, ps_id)
    flat = torch.cat([t.detach().reshape(1, -1).cpu() for t in tensors], 1).contiguous()
    counts = [t.numel() for t in tensors]

    def finish(results):
        if not counts or flat.numel() == 0:
            return outputs[0] if what == 'allreduce' else list(outputs)
        gathered = results[0][0].reshape(_ops._set_size(ps_id), -1).to(torch.float64)
        if prescale_factor != 1.0:
            gathered.mul_(prescale_factor)
        offset = 0
        for count, out in zip(counts, outputs):
            reduced = reduce_rows(gathered[:, offset:offset + count])
            offset += count
            if postscale_factor != 1.0:
                reduced.mul_(postscale_factor)
            out.copy_(reduced.view(out.shape).to(out.dtype))
        return outputs[0] if what == 'allreduce' else list(outputs)

    describe = "%s (Adasum) '%s' of %d tensors (%d elements) on rank %d" % (
        what, name, len(tensors), flat.numel(), _ops.rank())
    if not counts or flat.numel() == 0:  # the same on every rank: nothing to exchange
        return _ops._register([], finish, describe)
    hid = _ops._C.allgather_async('%s.adasum' % (name,), flat, process_set=ps_id)
    return _ops._register([hid], finish, describe)
