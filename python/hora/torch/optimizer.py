"""Horovod's DistributedOptimizer on hora's engine.

Each parameter's gradient is submitted to hora's engine, under the parameter's name, as soon as
its backward hook fires (after ``backward_passes_per_step`` accumulations), so communication
overlaps the rest of the backward pass and the engine fuses small gradients into one buffer.
step() waits for every gradient, then runs the wrapped optimizer's step.

As in Horovod: ``groups`` (or the older ``num_groups``) submits each group's gradients as one
grouped allreduce once the whole group is ready; sparse gradients (``nn.Embedding(sparse=True)``)
are allgathered as indices and values (``sparse_allreduce_async``), or allreduced as dense
tensors with ``sparse_as_dense=True``.
"""

import warnings
from contextlib import contextmanager

import torch

from hora.torch.compression import Compression
from hora.torch.functions import broadcast_object
from hora.torch import process_sets as _ps
from hora.torch.mpi_ops import (Adasum, Average, allreduce_async_, global_process_set,
                                grouped_allreduce_async_, size, sparse_allreduce_async,
                                synchronize)


def _split_list(items, n):
    """Horovod's split_list: ``items`` in ``n`` chunks of nearly equal size, in order."""
    d, r = divmod(len(items), n)
    return [items[i * d + min(i, r):(i + 1) * d + min(i + 1, r)] for i in range(n)]


def _checked_named_parameters(param_groups, named_parameters):
    """The (name, parameter) pairs both distributed optimizers key their work by: the user's,
    checked as Horovod checks them (tuples, unique names, every parameter named), or generated
    names when none were given."""
    if named_parameters is not None:
        named_parameters = list(named_parameters)
    else:
        named_parameters = [('allreduce.noname.%d.%d' % (i, j), v)
                            for i, group in enumerate(param_groups)
                            for j, v in enumerate(group['params'])]
    if any(not isinstance(p, tuple) for p in named_parameters):
        raise ValueError('named_parameters should be a sequence of (name, parameter) tuples, '
                         'usually model.named_parameters()')
    names = [k for k, _ in named_parameters]
    dups = sorted({k for k in names if names.count(k) > 1})
    if dups:
        raise ValueError('Parameter names in named_parameters must be unique. '
                         'Found duplicates: %s' % ', '.join(dups))
    all_ids = {id(v) for group in param_groups for v in group['params']}
    unnamed = all_ids - {id(v) for _, v in named_parameters}
    if unnamed:
        raise ValueError('named_parameters was given, but %d model parameters are not named '
                         'in it' % len(unnamed))
    return named_parameters


class _DistributedOptimizer(torch.optim.Optimizer):
    def __init__(self, params, named_parameters, compression, backward_passes_per_step=1,
                 op=Average, gradient_predivide_factor=1.0, groups=None,
                 sparse_as_dense=False, process_set=global_process_set):
        super(self.__class__, self).__init__(params)
        self._compression = compression

        named_parameters = _checked_named_parameters(self.param_groups, named_parameters)

        self._parameter_names = {v: k for k, v in named_parameters}
        self.backward_passes_per_step = backward_passes_per_step
        self._allreduce_delay = {v: backward_passes_per_step for _, v in named_parameters}
        self.op = op
        self.gradient_predivide_factor = gradient_predivide_factor
        if gradient_predivide_factor != 1.0 and op != Average:
            raise ValueError('gradient_predivide_factor needs op == Average')
        self.sparse_as_dense = sparse_as_dense
        self.process_set = process_set if process_set is not None else global_process_set
        if groups is not None:
            if not (isinstance(groups, list) or groups > 0):
                raise ValueError('groups should be a non-negative integer or a list of lists of '
                                 'torch.Tensor')
            if isinstance(groups, list):
                seen = set()
                for group in groups:
                    for p in group:
                        if not isinstance(p, torch.Tensor):
                            raise ValueError('groups must consist of torch.Tensor')
                        if id(p) in seen:
                            raise ValueError('A parameter can only appear once in groups')
                        seen.add(id(p))
        self._groups = groups
        self._p_to_group = {}
        self._group_counts = {}
        self._handles = {}
        self._grad_accs = []
        self._requires_update = set()
        self._synchronized = False
        self._should_synchronize = True
        # As Horovod: a rank outside the process set steps on its own gradients.
        if self.process_set.included() and size() > 1:
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

    def _form_groups(self):
        """Horovod's groups: the parameters in rank 0's order (broadcast, so every rank forms the
        same groups), then split into ``groups`` chunks, or the given lists plus one group per
        parameter left out of them."""
        p_list = [p for group in self.param_groups for p in group['params'] if p.requires_grad]
        # rank 0's order, or the process set's first rank's (Horovod's root_rank=0 would fail
        # on a set without rank 0).
        root = self.process_set.ranks[0] if self.process_set.process_set_id else 0
        names = broadcast_object([self._parameter_names.get(p) for p in p_list], root_rank=root,
                                 name='DistributedOptimizer.groups',
                                 process_set=self.process_set)
        order = {n: i for i, n in enumerate(names)}
        missing = [self._parameter_names.get(p) for p in p_list
                   if self._parameter_names.get(p) not in order]
        if missing:
            raise ValueError('DistributedOptimizer(groups=...): parameters %s are not on rank 0; '
                             'every rank must give the same named_parameters' % missing)
        p_list = sorted(p_list, key=lambda p: order[self._parameter_names.get(p)])
        if isinstance(self._groups, list):
            ids = {id(p) for p in p_list}
            p_groups = [[p for p in group if id(p) in ids] for group in self._groups]
            grouped = {id(p) for group in p_groups for p in group}
            p_groups += [[p] for p in p_list if id(p) not in grouped]
        else:
            p_groups = _split_list(p_list, self._groups)
        for group in p_groups:
            group = tuple(group)
            if not group:
                continue
            for p in group:
                self._p_to_group[p] = group
            self._group_counts[group] = 0

    def _register_hooks(self):
        if self._groups is not None:
            self._form_groups()
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
            # Another rank may have a gradient for p (a dynamic forward): submit zeros.
            p.grad = torch.zeros_like(p)
        name = self._parameter_names.get(p)
        tensor = p.grad
        if tensor.is_sparse:
            if self.sparse_as_dense:
                tensor = tensor.to_dense()
            else:
                return sparse_allreduce_async(tensor, name=name, op=self.op,
                                              process_set=self.process_set), None
        tensor, ctx = self._compression.compress(tensor)
        if self.op == Average:
            # hora's Average divides by size(); the predivide factor moves part of that
            # division before the sum (for float16 range).
            prescale = 1.0 / self.gradient_predivide_factor
            postscale = self.gradient_predivide_factor
        else:
            prescale = postscale = 1.0
        handle = allreduce_async_(tensor, name=name, op=self.op, prescale_factor=prescale,
                                  postscale_factor=postscale, process_set=self.process_set)
        return handle, ctx

    def _grouped_allreduce_grad_async(self, ps):
        if any(p.grad.is_sparse for p in ps):
            raise NotImplementedError(
                'DistributedOptimizer(groups=...): parameter %s has a sparse gradient; '
                'grouped allreduces take dense tensors: pass sparse_as_dense=True or leave the '
                'parameter out of groups' % self._parameter_names.get(
                    next(p for p in ps if p.grad.is_sparse)))
        name = self._parameter_names.get(ps[0])
        compressed, ctxs = zip(*[self._compression.compress(p.grad) for p in ps])
        handle = grouped_allreduce_async_(list(compressed), name=name, op=self.op,
                                          process_set=self.process_set)
        return handle, ctxs

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
                if self._groups is not None:
                    group = self._p_to_group[p]
                    self._group_counts[group] += 1
                    if self._group_counts[group] == len(group):
                        self._handles[group] = self._grouped_allreduce_grad_async(group)
                        for gp in group:  # their no-op entries of earlier passes
                            self._handles.pop(gp, None)
                        self._group_counts[group] = 0
                        return
                else:
                    handle, ctx = self._allreduce_grad_async(p)
            self._handles[p] = (handle, ctx)
        return hook

    def _set_grad(self, p, result):
        if p.grad.is_sparse:
            if not result.is_sparse:  # sparse_as_dense: back to sparse for the update
                result = result.to_sparse()
            p.grad.zero_().add_(result)
        elif result.data_ptr() != p.grad.data_ptr():
            p.grad.copy_(result)

    def synchronize(self):
        """Waits for every gradient's allreduce (submitting those whose hook did not fire). On a
        rank outside the process set, does nothing (as Horovod)."""
        if not self.process_set.included():
            self._synchronized = True
            return
        done = set()
        for key in self._handles:
            done.update(key) if isinstance(key, tuple) else done.add(key)
        for p in self._requires_update - done:
            self._handles[p] = self._allreduce_grad_async(p)
        for p, (handle, ctx) in list(self._handles.items()):
            if handle is None:
                self._handles[p] = self._allreduce_grad_async(p)
        try:
            for p, (handle, ctx) in self._handles.items():
                if isinstance(p, tuple):  # a group: one handle, a list of results
                    outputs = synchronize(handle)
                    for gp, output, gctx in zip(p, outputs, ctx):
                        self._allreduce_delay[gp] = self.backward_passes_per_step
                        self._set_grad(gp, self._compression.decompress(output, gctx))
                    self._group_counts[p] = 0
                else:
                    # sparse_allreduce_async gives a function that returns the result
                    output = handle() if callable(handle) else synchronize(handle)
                    self._allreduce_delay[p] = self.backward_passes_per_step
                    if self._groups is not None:
                        self._group_counts[self._p_to_group[p]] = 0
                    self._set_grad(p, self._compression.decompress(output, ctx))
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


# Horovod's DistributedOptimizer(op=hvd.Adasum): Adasum of the parameters' deltas.
#
# With Adasum, Horovod does not reduce gradients: once a parameter's gradient is final (after
# ``backward_passes_per_step`` passes), the wrapped optimizer steps that parameter alone, the
# step's delta (new value - old value) is Adasum-allreduced in place of the parameter, and step()
# sets the parameter to its old value plus the reduced delta. Each rank keeps its own optimizer
# state (momentum, Adam moments), fed by its own gradients. As Horovod's
# (horovod/torch/optimizer.py, _DistributedAdasumOptimizer): synchronize() does nothing,
# skip_synchronize() raises, and the parameter holds its delta between backward() and step().
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


def DistributedOptimizer(optimizer, named_parameters=None, compression=Compression.none,
                         backward_passes_per_step=1, op=Average, gradient_predivide_factor=1.0,
                         num_groups=0, groups=None, sparse_as_dense=False,
                         process_set=global_process_set):
    """Wraps ``optimizer`` so that step() applies gradients averaged (``op``) over all ranks.

    named_parameters: model.named_parameters(); the names key the allreduces, so every rank
        must give the same names. compression: Compression.none or Compression.fp16.
    backward_passes_per_step: backward passes accumulated locally before the allreduce.
    op: Average (default), Sum, Min, Max or Product (sparse gradients: Average or Sum), or
        Adasum: each rank steps its parameters locally and the steps' deltas are combined by
        Adasum (_DistributedAdasumOptimizer above; power-of-two sizes only, as in Horovod).
    gradient_predivide_factor: with Average, gradients are divided by this factor before the sum
        and by size()/factor after it.
    groups: a number of groups to split the parameters into (in rank 0's order), or a list of
        lists of parameters (the others each form a group of one); each group is one grouped
        allreduce, submitted once all its gradients are ready. num_groups: the older name.
    sparse_as_dense: allreduce sparse gradients as dense tensors (else their indices and
        values are allgathered).
    process_set: average over this ProcessSet's ranks only (registered by init or
        add_process_set); on the other ranks the optimizer steps on local gradients (Horovod).
    """
    if gradient_predivide_factor != 1.0 and op != Average:
        raise ValueError('gradient_predivide_factor not supported with op != Average')
    if num_groups != 0:
        warnings.warn('Parameter `num_groups` has been replaced by `groups` and will be removed '
                      'in v0.23.0.', DeprecationWarning)
        if groups is None:
            groups = num_groups
    if backward_passes_per_step <= 0:
        raise ValueError('backward_passes_per_step must be > 0')
    if process_set is not None and process_set is not global_process_set:
        if not isinstance(process_set, _ps.ProcessSet) or process_set.process_set_id is None:
            raise ValueError('hora.torch.DistributedOptimizer(process_set=%s): the process set is '
                             'not registered; form it with hvd.init(process_sets=[...]) or '
                             'hvd.add_process_set()' % (process_set,))
        if op == Adasum:
            raise NotImplementedError('Adasum does not support non-global process sets yet. '
                                      '(hora.torch.DistributedOptimizer(op=hvd.Adasum, '
                                      'process_set=%s), as Horovod)' % (process_set,))
    if op == Adasum and size() > 1:
        from hora.torch import adasum
        adasum.check_size('DistributedOptimizer')
        cls = type(optimizer.__class__.__name__, (optimizer.__class__,),
                   dict(_DistributedAdasumOptimizer.__dict__))
        return cls(optimizer.param_groups, named_parameters, compression,
                   backward_passes_per_step)
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,),
               dict(_DistributedOptimizer.__dict__))
    return cls(optimizer.param_groups, named_parameters, compression, backward_passes_per_step,
               op, gradient_predivide_factor, groups, sparse_as_dense, process_set)
