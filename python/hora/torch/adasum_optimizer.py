"""Horovod's DistributedOptimizer(op=hvd.Adasum): Adasum of the parameters' deltas.

With Adasum, Horovod does not reduce gradients: once a parameter's gradient is final (after
``backward_passes_per_step`` passes), the wrapped optimizer steps that parameter alone, the
step's delta (new value - old value) is Adasum-allreduced in place of the parameter, and step()
sets the parameter to its old value plus the reduced delta. Each rank keeps its own optimizer
state (momentum, Adam moments), fed by its own gradients. As Horovod's
(horovod/torch/optimizer.py, _DistributedAdasumOptimizer): synchronize() does nothing,
skip_synchronize() raises, and the parameter holds its delta between backward() and step().
"""

from contextlib import contextmanager

import torch

from hora.torch.mpi_ops import Adasum, allreduce_async_, synchronize
from hora.torch.optimizer import _checked_named_parameters


class _DistributedAdasumOptimizer(torch.optim.Optimizer):
    def __init__(self, params, named_parameters, compression, backward_passes_per_step=1):
        super(self.__class__, self).__init__(params)
        self._compression = compression
        named_parameters = _checked_named_parameters(self.param_groups, named_parameters)

        self._parameter_names = {v: k for k, v in named_parameters}
        self.backward_passes_per_step = backward_passes_per_step
        self._allreduce_delay = {v: backward_passes_per_step for _, v in named_parameters}
        self._handles = {}
        self._grad_accs = []
        self._requires_update = set()
        # Each parameter's value before its local step (the delta's origin).
        self._starting_models = {p: torch.zeros_like(p, requires_grad=False)
                                 for _, p in named_parameters}
        self._register_hooks()

    def set_backward_passes_per_step(self, passes):
        self.backward_passes_per_step = passes
        for p in self._allreduce_delay:
            self._allreduce_delay[p] = passes

    def _register_hooks(self):
        for group in self.param_groups:
            for p in group['params']:
                if p.requires_grad:
                    p.grad = torch.zeros_like(p)
                    self._requires_update.add(p)
                    grad_acc = p.expand_as(p).grad_fn.next_functions[0][0]
                    grad_acc.register_hook(self._make_hook(p))
                    self._grad_accs.append(grad_acc)

    def _allreduce_delta_async(self, p):
        """Steps ``p`` alone with the wrapped optimizer, leaves its delta in ``p`` and starts
        the delta's in-place Adasum allreduce."""
        start = self._starting_models[p]
        start.data.copy_(p.data)
        kept = [group['params'] for group in self.param_groups]
        for group in self.param_groups:
            group['params'] = [p] if any(p is v for v in group['params']) else []
        try:
            super(self.__class__, self).step()
        finally:
            for group, params in zip(self.param_groups, kept):
                group['params'] = params
        p.data.sub_(start)
        compressed, ctx = self._compression.compress(p.data)
        handle = allreduce_async_(compressed, name=self._parameter_names.get(p), op=Adasum)
        return handle, ctx

    def _make_hook(self, p):
        def hook(*ignore):
            if p in self._handles and self._handles[p][0] is not None:
                if self._allreduce_delay[p] <= 0:
                    raise AssertionError(
                        'Gradients were computed more than backward_passes_per_step times '
                        'before call to step(). Increase backward_passes_per_step to '
                        'accumulate gradients locally.')
            assert not p.grad.requires_grad
            assert self._allreduce_delay[p] > 0
            handle, ctx = None, None
            self._allreduce_delay[p] -= 1
            if self._allreduce_delay[p] == 0:
                handle, ctx = self._allreduce_delta_async(p)
            self._handles[p] = (handle, ctx)
        return hook

    def synchronize(self):
        """Does nothing, as Horovod's: step() waits for the deltas."""

    @contextmanager
    def skip_synchronize(self):
        raise AssertionError('Skipping synchronization is not supported when using Adasum '
                             'optimizer.')

    def step(self, closure=None):
        loss = closure() if closure is not None else None
        for p in self._requires_update - set(self._handles):
            self._handles[p] = self._allreduce_delta_async(p)
        try:
            for p, (handle, ctx) in list(self._handles.items()):
                if handle is None:  # step() before backward_passes_per_step passes
                    handle, ctx = self._allreduce_delta_async(p)
                delta = self._compression.decompress(synchronize(handle), ctx)
                start = self._starting_models[p]
                start.data.add_(delta.data)
                p.data.copy_(start)
                self._allreduce_delay[p] = self.backward_passes_per_step
        finally:
            self._handles.clear()
        return loss

    def zero_grad(self, *args, **kwargs):
        if self._handles:
            raise AssertionError('optimizer.zero_grad() was called after loss.backward() but '
                                 'before optimizer.step() or optimizer.synchronize()')
        return super(self.__class__, self).zero_grad(*args, **kwargs)
