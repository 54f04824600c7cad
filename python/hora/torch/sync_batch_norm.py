"""Horovod's ``SyncBatchNorm`` (``horovod.torch.SyncBatchNorm``) on hora.torch's collectives.

In training mode (and whenever batch statistics are used) the mean and variance of each channel
are those of the batch made of every rank's batch together, so that normalization over a small
per-rank batch behaves like normalization over the global batch. Ranks may have different batch
sizes, zero included. The running statistics are updated with the global mean and unbiased
variance, exactly as ``torch.nn.BatchNorm*d`` would update them on the concatenated batch, and
the input gradient is that of batch norm on the concatenated batch. As in Horovod, the weight
and bias gradients are this rank's own (not reduced): DistributedOptimizer averages them as it
does every other parameter's gradient.

Differences from Horovod 0.28.1, which calls PyTorch's CUDA-only kernels
(``torch.batch_norm_stats`` and friends):

- CPU tensors work as well as CUDA ones: the statistics and gradients are plain tensor ops.
- The statistics are combined from every rank's count, mean and sum of squared deviations from
  its own mean (Chan et al.'s parallel variance), in float64, rather than from per-rank inverse
  standard deviations; the result is the same up to rounding, and stays accurate when a channel's
  mean is large against its spread.
- ``momentum=None`` (a cumulative average) works as in ``torch.nn.BatchNorm*d``; Horovod passes
  None on to the CUDA kernel.
- A global batch with one value per channel raises the ValueError that ``torch.nn.BatchNorm*d``
  raises for it (on every rank, since every rank sees the same global count); a global batch of
  zero values leaves the running statistics alone, as PyTorch does for an empty batch.
- The collectives are named ``sync_batch_norm.<C>.stats`` and ``sync_batch_norm.<C>.grad``
  (C = num_features) rather than with Horovod's fixed names: every rank issues the same names in
  the same order, the names do not depend on how many modules each rank built or on an elastic
  reset, and each name always carries tensors of one shape, so hora's response cache keeps them.
"""

from typing import Optional

import torch
import torch.nn.functional as F
from torch.autograd.function import once_differentiable
from torch.nn.modules.batchnorm import _BatchNorm

from hora.torch import mpi_ops


class SyncBatchNorm(_BatchNorm):
    """Batch norm over N-dimensional input (N, C, ...) whose batch statistics are computed over
    every rank's batch. Arguments as ``torch.nn.BatchNorm2d``'s:

    Arguments:
        num_features: number of channels ``C`` of an input of shape ``(N, C, ...)``
        eps: added to the variance for numerical stability. Default: 1e-5
        momentum: the weight of the new batch in the running mean and variance; None for a
            cumulative moving average (a simple average). Default: 0.1
        affine: whether the module has learnable weight and bias. Default: True
        track_running_stats: whether the module tracks running mean and variance; without them
            it always uses (synchronized) batch statistics, in eval mode too. Default: True

    In eval mode with running statistics, and in a world of one rank, it is plain batch norm.
    """

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats)

    def _check_input_dim(self, input):
        if input.dim() < 2:
            raise ValueError('expected at least 2D input (got {}D input)'.format(input.dim()))

    def forward(self, input):
        self._check_input_dim(input)

        # The same bookkeeping as torch.nn.BatchNorm*d, so that momentum=None and
        # num_batches_tracked behave as there.
        if self.momentum is None:
            average_factor = 0.0
        else:
            average_factor = self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:
                average_factor = 1.0 / float(self.num_batches_tracked)
        use_batch_stats = self.training or (self.running_mean is None and self.running_var is None)
        # Running statistics are read in eval mode and updated while training with them.
        running_mean = self.running_mean if not self.training or self.track_running_stats else None
        running_var = self.running_var if not self.training or self.track_running_stats else None

        if not use_batch_stats:
            return F.batch_norm(input, running_mean, running_var, self.weight, self.bias,
                                False, average_factor, self.eps)
        return self._maybe_sync_batch_norm(input, running_mean, running_var, average_factor)

    # Out of TorchScript's sight (as in Horovod): a scripted module runs eval mode, where it is
    # plain batch norm, and raises if asked for batch statistics.
    @torch.jit.unused
    def _maybe_sync_batch_norm(self, input: torch.Tensor, running_mean: Optional[torch.Tensor],
                               running_var: Optional[torch.Tensor],
                               average_factor: float) -> torch.Tensor:
        if mpi_ops.size() == 1:
            return F.batch_norm(input, running_mean, running_var, self.weight, self.bias,
                                True, average_factor, self.eps)
        return _SyncBatchNormFunction.apply(input, self.weight, self.bias, running_mean,
                                            running_var, self.eps, average_factor)


def _compute_dtype(dtype):
    # Statistics of half-precision inputs in float32, as PyTorch's kernels do; float64 stays.
    return torch.float64 if dtype == torch.float64 else torch.float32


def _reduce_dims(x):
    return [0] + list(range(2, x.dim()))


def _channel_view(t, x):
    """``t`` of shape (C,) shaped to broadcast against ``x`` of shape (N, C, ...)."""
    return t.view([1, -1] + [1] * (x.dim() - 2))


class _SyncBatchNormFunction(torch.autograd.Function):

    @staticmethod
    def forward(ctx, input, weight, bias, running_mean, running_var, eps, average_factor):
        x = input.contiguous()
        channels = x.size(1)
        count = x.numel() // channels if channels else 0
        dtype = _compute_dtype(x.dtype)
        xc = x.to(dtype)
        dims = _reduce_dims(x)

        # This rank's count, mean and sum of squared deviations from its mean. An empty batch
        # contributes zeros (and a weight of zero below), not 0/0.
        local_mean = xc.sum(dims) / max(count, 1)
        local_m2 = (xc - _channel_view(local_mean, xc)).pow(2).sum(dims)
        # One row per rank, in float64 so that counts and the combination below are exact
        # enough; the count travels with the statistics, on the input's device.
        row = torch.cat([torch.full((1,), float(count), dtype=torch.float64, device=x.device),
                         local_mean.to(torch.float64), local_m2.to(torch.float64)]).unsqueeze(0)
        rows = mpi_ops.synchronize(mpi_ops.allgather_async(
            row, name='sync_batch_norm.%d.stats' % channels))
        counts, means, m2s = rows[:, :1], rows[:, 1:channels + 1], rows[:, channels + 1:]

        # Chan et al.: the global M2 is every rank's M2 plus its count times the squared distance
        # of its mean from the global mean; this avoids the cancellation of E[x^2] - E[x]^2.
        total_count = int(counts.sum().item())  # exact: float64 holds counts up to 2**53
        if total_count == 1:
            # What torch.nn.BatchNorm*d says for the concatenated batch; every rank sees the same
            # total, so every rank raises.
            raise ValueError('Expected more than 1 value per channel when training, got %d value '
                             'per channel over all ranks (input size %s on this rank)'
                             % (total_count, list(x.shape)))
        mean = (counts * means).sum(0) / max(total_count, 1)
        m2 = m2s.sum(0) + (counts * (means - mean).pow(2)).sum(0)
        var = m2 / max(total_count, 1)

        if running_mean is not None and total_count > 0:
            # As PyTorch does: the unbiased variance goes into running_var. An empty global batch
            # leaves the running statistics alone, as PyTorch does for an empty batch.
            unbiased = m2 / (total_count - 1)
            running_mean.mul_(1.0 - average_factor).add_(
                mean.to(running_mean.dtype), alpha=average_factor)
            running_var.mul_(1.0 - average_factor).add_(
                unbiased.to(running_var.dtype), alpha=average_factor)

        mean = mean.to(dtype)
        invstd = torch.rsqrt(var.to(dtype) + eps)
        # y = (x - mean) * invstd * weight + bias, as one scale and one shift per channel.
        scale = invstd if weight is None else invstd * weight.to(dtype)
        shift = -mean * scale
        if bias is not None:
            shift = shift + bias.to(dtype)
        out = xc * _channel_view(scale, xc) + _channel_view(shift, xc)

        ctx.save_for_backward(x, weight, mean, invstd)
        ctx.total_count = total_count
        ctx.bias_dtype = None if bias is None else bias.dtype
        return out.to(input.dtype)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_output):
        x, weight, mean, invstd = ctx.saved_tensors
        need_input, need_weight, need_bias = ctx.needs_input_grad[:3]
        channels = x.size(1)
        dtype = mean.dtype
        dims = _reduce_dims(x)

        dy = grad_output.contiguous().to(dtype)
        xhat = (x.to(dtype) - _channel_view(mean, x)) * _channel_view(invstd, x)
        sum_dy = dy.sum(dims)
        sum_dy_xhat = (dy * xhat).sum(dims)

        grad_input = None
        if need_input:
            # The input gradient of batch norm over the concatenated batch:
            #   dx = weight * invstd * (dy - mean(dy) - xhat * mean(dy * xhat))
            # with both means over every rank's elements. Horovod reduces these sums only when
            # the input needs a gradient, and so do we: every rank decides alike.
            sums = mpi_ops.synchronize(mpi_ops.allreduce_async(
                torch.stack([sum_dy, sum_dy_xhat]), op=mpi_ops.Sum,
                name='sync_batch_norm.%d.grad' % channels))
            n = max(ctx.total_count, 1)
            mean_dy = _channel_view(sums[0] / n, x)
            mean_dy_xhat = _channel_view(sums[1] / n, x)
            scale = invstd if weight is None else invstd * weight.to(dtype)
            grad_input = ((dy - mean_dy - xhat * mean_dy_xhat) * _channel_view(scale, x))
            grad_input = grad_input.to(x.dtype)

        # This rank's weight and bias gradients, not reduced: the optimizer (DistributedOptimizer)
        # reduces them like every other parameter's, as in Horovod.
        grad_weight = sum_dy_xhat.to(weight.dtype) if weight is not None and need_weight else None
        grad_bias = sum_dy.to(ctx.bias_dtype) if ctx.bias_dtype is not None and need_bias else None
        return grad_input, grad_weight, grad_bias, None, None, None, None
