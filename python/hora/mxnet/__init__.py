"""hora.mxnet: Horovod 0.28.1's MXNet API (horovod.mxnet) on libhora, for MXNet 1.9.1.

A Horovod MXNet script runs on hora by changing one line::

    import hora.mxnet as hvd      # was: import horovod.mxnet as hvd

launched with ``horarun -np 2 .venv-mxnet/bin/python train.py`` (scripts/venv.sh mxnet makes
the venv). CPU NDArrays only. See docs/tensorflow.md, "MXNet".
"""

import types
import warnings

try:
    import mxnet as mx
except ImportError as e:
    import sys as _sys
    raise ImportError(
        'hora.mxnet needs MXNet (the pip package mxnet==1.9.1 with numpy==1.23.5), which %s '
        'cannot import (%s). Make the project\'s MXNet venv with scripts/venv.sh mxnet and run '
        'your program with its python: .venv-mxnet/bin/python' % (_sys.executable, e)) from e

from hora.mxnet.mpi_ops import (  # noqa: F401
    Average, Sum, Adasum, Min, Max, Product,
    HoraError, HoraUsageError, HoraConnectionError, HoraTimeoutError, HoraPeerFailure,
    HoraMismatchError, HoraAbortedError, HorovodInternalError,
    init, shutdown, is_initialized, rank, size, local_rank, local_size, cross_rank, cross_size,
    is_homogeneous, mpi_built, mpi_enabled, gloo_built, gloo_enabled, nccl_built, cuda_built,
    rocm_built, ProcessSet, global_process_set, add_process_set, remove_process_set,
    allreduce, allreduce_, grouped_allreduce, grouped_allreduce_, allgather, broadcast,
    broadcast_, barrier)
from hora.mxnet.functions import allgather_object, broadcast_object  # noqa: F401


class Compression(object):
    """How gradients travel: ``none``, or ``fp16`` (float32/float64 sent as float16)."""

    class none(object):
        @staticmethod
        def compress(tensor):
            return tensor, None

        @staticmethod
        def decompress(tensor, ctx):
            return tensor

    class fp16(object):
        @staticmethod
        def compress(tensor):
            if tensor.dtype in ('float32', 'float64') or str(tensor.dtype).endswith(
                    ('float32', 'float64')):
                return tensor.astype('float16'), tensor.dtype
            return tensor, None

        @staticmethod
        def decompress(tensor, ctx):
            return tensor if ctx is None else tensor.astype(ctx)


class DistributedOptimizer(mx.optimizer.Optimizer):
    """Wraps an MXNet optimizer so that update() sums each gradient over the ranks first; the
    optimizer's ``rescale_grad`` is divided by the size (Horovod's way of averaging), also when
    gluon.Trainer sets it. Use it with ``gluon.Trainer(..., kvstore=None)`` or a Module."""

    def __init__(self, optimizer, gradient_predivide_factor=1.0, num_groups=0,
                 process_set=global_process_set):
        self._optimizer = optimizer
        self._gradient_predivide_factor = gradient_predivide_factor
        self._num_groups = num_groups
        self._process_set = process_set
        self.rescale_grad = optimizer.rescale_grad

    def __getattr__(self, item):
        return getattr(self._optimizer, item)

    # gluon.Trainer sets rescale_grad (1 / batch size) at every step: it reaches the wrapped
    # optimizer divided by the size. Horovod's wrapper keeps such a write to itself, so under a
    # Trainer its optimizer steps with the sum of the ranks' gradients, unscaled.
    @property
    def rescale_grad(self):
        # What was set (gluon.Trainer takes it as its scale when it is made).
        return (self._optimizer.rescale_grad * self._process_set.size() /
                self._gradient_predivide_factor)

    @rescale_grad.setter
    def rescale_grad(self, value):
        self._optimizer.rescale_grad = (value * self._gradient_predivide_factor /
                                        self._process_set.size())

    def create_state_multi_precision(self, index, weight):
        return self._optimizer.create_state_multi_precision(index, weight)

    def _do_allreduce(self, index, grad):
        if self._process_set.size() == 1:
            return
        indices = index if isinstance(index, (tuple, list)) else [index]
        grads = grad if isinstance(grad, (tuple, list)) else [grad]
        for i, g in zip(indices, grads):
            allreduce_(g, op=Sum, name=str(i), prescale_factor=1.0 /
                       self._gradient_predivide_factor, process_set=self._process_set)

    def update(self, index, weight, grad, state):
        self._do_allreduce(index, grad)
        self._optimizer.update(index, weight, grad, state)

    def update_multi_precision(self, index, weight, grad, state):
        self._do_allreduce(index, grad)
        self._optimizer.update_multi_precision(index, weight, grad, state)

    def set_learning_rate(self, lr):
        self._optimizer.set_learning_rate(lr)

    def set_lr_mult(self, args_lr_mult):
        self._optimizer.set_lr_mult(args_lr_mult)

    def set_wd_mult(self, args_wd_mult):
        self._optimizer.set_wd_mult(args_wd_mult)


class DistributedTrainer(mx.gluon.Trainer):
    """A gluon.Trainer whose step() sums the gradients over the ranks (one allreduce per
    parameter, named ``prefix + index``) and scales them by 1/size (its ``_scale``, Horovod's
    way of averaging). Parameters of a ParameterDict are taken in sorted key order, so every
    rank names them alike."""

    def __init__(self, params, optimizer, optimizer_params=None, compression=Compression.none,
                 gradient_predivide_factor=1.0, prefix=None, num_groups=0,
                 process_set=global_process_set):
        self._compression = compression
        if isinstance(optimizer, DistributedOptimizer):
            optimizer = optimizer._optimizer
            warnings.warn('DistributedTrainer does not take DistributedOptimizer as its '
                          'optimizer. We have unwrapped it for you.')
        if hasattr(params, 'keys') and not isinstance(params, (list, tuple)):
            params = [params[k] for k in sorted(params.keys())]
        super(DistributedTrainer, self).__init__(params, optimizer,
                                                 optimizer_params=optimizer_params,
                                                 kvstore=None)
        self._scale *= gradient_predivide_factor / process_set.size()
        self._gradient_predivide_factor = gradient_predivide_factor
        if prefix is not None and not isinstance(prefix, str):
            raise ValueError('prefix must be a string, not %r' % (prefix,))
        self._prefix = prefix or ''
        self._num_groups = num_groups
        self._process_set = process_set

    def _allreduce_grads(self):
        if self._process_set.size() == 1:
            return
        for i, param in enumerate(self._params):
            if param.grad_req == 'null':
                continue
            grad = param.list_grad()[0]
            compressed, ctx = self._compression.compress(grad)
            allreduce_(compressed, op=Sum, name=self._prefix + str(i),
                       prescale_factor=1.0 / self._gradient_predivide_factor,
                       process_set=self._process_set)
            if ctx is not None:
                grad[:] = self._compression.decompress(compressed, ctx)


def _broadcast_after_init(param, root_rank, name, process_set):
    """A parameter whose shape is known only at the first forward pass (deferred
    initialisation) is broadcast right after MXNet initialises it."""
    init_impl = param._init_impl

    def init_then_broadcast(self, *args, **kwargs):
        init_impl(*args, **kwargs)
        self._init_impl = init_impl
        for i, data in enumerate(self.list_data()):
            broadcast_(data, root_rank, name='%s.%d' % (name, i), process_set=process_set)

    param._init_impl = types.MethodType(init_then_broadcast, param)


def broadcast_parameters(params, root_rank=0, prefix=None, process_set=global_process_set):
    """Gives every rank the root's parameters: a gluon ParameterDict (or a dict of Parameters)
    or a dict of NDArrays (a Module's get_params()), in sorted key order. A parameter not yet
    initialised (deferred) is broadcast when it is."""
    if not hasattr(params, 'items'):
        raise ValueError('invalid params of type: %s' % type(params))
    prefix = prefix or ''
    for key, p in sorted(params.items(), key=lambda kv: str(kv[0])):
        name = prefix + str(key)
        if isinstance(p, mx.gluon.parameter.Parameter):
            try:
                tensors = p.list_data()
            except mx.gluon.parameter.DeferredInitializationError:
                _broadcast_after_init(p, root_rank, name, process_set)
                continue
        elif isinstance(p, mx.nd.NDArray):
            tensors = [p]
        else:
            raise ValueError('invalid params of type: %s' % type(p))
        for i, t in enumerate(tensors):
            broadcast_(t, root_rank, name='%s.%d' % (name, i), process_set=process_set)
