"""Horovod's DistributedOptimizer on hora's engine.

Each parameter's gradient is submitted to hora's engine, under the parameter's name, as soon as
its backward hook fires (after ``backward_passes_per_step`` accumulations), so communication
overlaps the rest of the backward pass and the engine fuses small gradients into one buffer.
step() waits for every gradient, then runs the wrapped optimizer's step.
"""

from contextlib import contextmanager

import torch

from hora.torch.compression import Compression
from hora.torch.mpi_ops import Average, allreduce_async_, size, synchronize


class _DistributedOptimizer(torch.optim.Optimizer):
    def __init__(self, params, named_parameters, compression, backward_passes_per_step=1,
                 op=Average, gradient_predivide_factor=1.0):
        super(self.__class__, self).__init__(params)
        self._compression = compression

        if named_parameters is not None:
            named_parameters = list(named_parameters)
        else:
            named_parameters = [('allreduce.noname.%d.%d' % (i, j), v)
                                for i, group in enumerate(self.param_groups)
                                for j, v in enumerate(group['params'])]
        if any(not isinstance(p, tuple) for p in named_parameters):
            raise ValueError('named_parameters should be a sequence of (name, parameter) tuples, '
                             'usually model.named_parameters()')
        names = [k for k, _ in named_parameters]
        dups = sorted({k for k in names if names.count(k) > 1})
        if dups:
            raise ValueError('Parameter names in named_parameters must be unique. '
                             'Found duplicates: %s' % ', '.join(dups))
        all_ids = {id(v) for group in self.param_groups for v in group['params']}
        unnamed = all_ids - {id(v) for _, v in named_parameters}
        if unnamed:
            raise ValueError('named_parameters was given, but %d model parameters are not named '
                             'in it' % len(unnamed))

        self._parameter_names = {v: k for k, v in named_parameters}
        self.backward_passes_per_step = backward_passes_per_step
        self._allreduce_delay = {v: backward_passes_per_step for _, v in named_parameters}
        self.op = op
        self.gradient_predivide_factor = gradient_predivide_factor
        if gradient_predivide_factor != 1.0 and op != Average:
            raise ValueError('gradient_predivide_factor needs op == Average')
        self._handles = {}
        self._grad_accs = []
        self._requires_update = set()
        self._synchronized = False
        self._should_synchronize = True
        if size() > 1:
            self._register_hooks()

    def load_state_dict(self, *args, **kwargs):
        self._handles = {}
        self._synchronized = False
        self._should_synchronize = True
        for p in self._allreduce_delay:
            self._allreduce_delay[p] = self.backward_passes_per_step
        super(self.__class__, self).load_state_dict(*args, **kwargs)

    def set_backward_passes_per_step(self, passes):
        self.backward_passes_per_step = passes
        for p in self._allreduce_delay:
            self._allreduce_delay[p] = passes

    def _register_hooks(self):
        for group in self.param_groups:
            for p in group['params']:
                if p.requires_grad:
                    self._requires_update.add(p)
                    # The gradient accumulator of p: its hook fires once p.grad is final for
                    # this backward pass.
                    grad_acc = p.expand_as(p).grad_fn.next_functions[0][0]
                    grad_acc.register_hook(self._make_hook(p))
                    self._grad_accs.append(grad_acc)

    def _allreduce_grad_async(self, p):
        if p.grad is None:
            p.grad = torch.zeros_like(p)
        tensor, ctx = self._compression.compress(p.grad)
        if self.op == Average:
            # hora's Average divides by size(); the predivide factor moves part of that
            # division before the sum (for float16 range).
            prescale = 1.0 / self.gradient_predivide_factor
            postscale = self.gradient_predivide_factor
        else:
            prescale = postscale = 1.0
        handle = allreduce_async_(tensor, name=self._parameter_names.get(p), op=self.op,
                                  prescale_factor=prescale, postscale_factor=postscale)
        return handle, ctx, tensor

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
            entry = (None, None, None)
            self._allreduce_delay[p] -= 1
            if self._allreduce_delay[p] == 0:
                entry = self._allreduce_grad_async(p)
            self._handles[p] = entry
        return hook

    def synchronize(self):
        """Waits for every gradient's allreduce (submitting those whose hook did not fire)."""
        for p in self._requires_update - set(self._handles):
            self._handles[p] = self._allreduce_grad_async(p)
        for p, (handle, ctx, tensor) in list(self._handles.items()):
            if handle is None:
                self._handles[p] = self._allreduce_grad_async(p)
        try:
            for p, (handle, ctx, tensor) in self._handles.items():
                output = synchronize(handle)
                self._allreduce_delay[p] = self.backward_passes_per_step
                result = self._compression.decompress(output, ctx)
                if result.data_ptr() != p.grad.data_ptr():
                    p.grad.copy_(result)
        finally:
            self._handles.clear()
        self._synchronized = True

    @contextmanager
    def skip_synchronize(self):
        """Within it, step() does not synchronize (call synchronize() yourself before)."""
        self._should_synchronize = False
        try:
            yield
        finally:
            self._should_synchronize = True

    def step(self, closure=None):
        if self._should_synchronize:
            if self._synchronized:
                import warnings
                warnings.warn('optimizer.step() called without optimizer.skip_synchronize() '
                              'after optimizer.synchronize(); this may use stale gradients')
            self.synchronize()
        self._synchronized = False
        return super(self.__class__, self).step(closure)

    def zero_grad(self, *args, **kwargs):
        if self._handles:
            raise AssertionError('optimizer.zero_grad() was called after loss.backward() but '
                                 'before optimizer.step() or optimizer.synchronize()')
        return super(self.__class__, self).zero_grad(*args, **kwargs)


def DistributedOptimizer(optimizer, named_parameters=None, compression=Compression.none,
                         backward_passes_per_step=1, op=Average, gradient_predivide_factor=1.0):
    """Wraps ``optimizer`` so that step() applies gradients averaged (``op``) over all ranks.

    named_parameters: model.named_parameters(); the names key the allreduces, so every rank
        must give the same names. compression: Compression.none or Compression.fp16.
    backward_passes_per_step: backward passes accumulated locally before the allreduce.
    op: Average (default), Sum, Min, Max or Product.
    gradient_predivide_factor: with Average, gradients are divided by this factor before the sum
        and by size()/factor after it.
    """
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,),
               dict(_DistributedOptimizer.__dict__))
    return cls(optimizer.param_groups, named_parameters, compression, backward_passes_per_step,
               op, gradient_predivide_factor)
