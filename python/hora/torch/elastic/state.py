"""Horovod's TorchState (``horovod.torch.elastic.state``) on hora.torch."""

import copy

import torch

from hora.common.elastic import ObjectState
from hora.torch.elastic.sampler import ElasticSampler
from hora.torch.functions import broadcast_object, broadcast_optimizer_state, broadcast_parameters
from hora.torch.mpi_ops import rank


class StateHandler(object):
    """Saves, restores and syncs one kind of object of a TorchState: subclasses define save(),
    restore() and sync(), as State's (hora.common.elastic)."""

    def __init__(self, value):
        self.value = value

    def set_value(self, value):
        """A new object assigned to the state's attribute: it is saved at once."""
        self.value = value
        self.save()


class _StateDictHandler(StateHandler):
    """An object with state_dict()/load_state_dict(): a deep copy of its state_dict is saved."""

    def __init__(self, value):
        super(_StateDictHandler, self).__init__(value)
        self.save()

    def save(self):
        self._saved = copy.deepcopy(self.value.state_dict())

    def restore(self):
        self.value.load_state_dict(self._saved)


class ModelStateHandler(_StateDictHandler):
    """A torch.nn.Module: sync() broadcasts its parameters and buffers from rank 0."""

    def sync(self):
        broadcast_parameters(self.value.state_dict(), root_rank=0)


class OptimizerStateHandler(_StateDictHandler):
    """A torch.optim.Optimizer (also a DistributedOptimizer): sync() broadcasts its state."""

    def sync(self):
        broadcast_optimizer_state(self.value, root_rank=0)


class SamplerStateHandler(_StateDictHandler):
    """An ElasticSampler: sync() loads rank 0's position, which partitions the rest of the
    epoch over the current ranks."""

    def sync(self):
        self.value.load_state_dict(broadcast_object(self.value.state_dict(), 0,
                                                    name='elastic.sampler_state'))


_handler_registry = [
    (torch.nn.Module, ModelStateHandler),
    (torch.optim.Optimizer, OptimizerStateHandler),
    (ElasticSampler, SamplerStateHandler),
]


def get_handler_registry():
    """The (type, handler class) pairs TorchState uses, first match wins."""
    return _handler_registry


def set_handler_registry(registry):
    global _handler_registry
    _handler_registry = registry


def _handler_for(value):
    for kind, handler in _handler_registry:
        if isinstance(value, kind):
            return handler(value)
    return None


class TorchState(ObjectState):
    """The state of a PyTorch training process.

    ``model`` and ``optimizer``, and every keyword argument, become attributes. Modules,
    optimizers and ElasticSamplers (any of them, under any name) are handled by their
    state_dict: save() deep-copies it, restore() loads it back, sync() broadcasts rank 0's
    parameters / optimizer state / sampler position. Other values (epoch, batch, ...) are plain
    objects: saved, restored, and broadcast from rank 0's last save by sync().
    """

    def __init__(self, model=None, optimizer=None, **kwargs):
        kwargs.update(model=model, optimizer=optimizer)
        handlers, plain = {}, {}
        for name, value in kwargs.items():
            handler = _handler_for(value)
            if handler is None:
                plain[name] = value
            else:
                handlers[name] = handler
        self._handlers = handlers
        for name, handler in handlers.items():
            setattr(self, name, handler.value)
        super(TorchState, self).__init__(bcast_object=broadcast_object, get_rank=rank, **plain)

    def save(self):
        for handler in self._handlers.values():
            handler.save()
        super(TorchState, self).save()

    def restore(self):
        for handler in self._handlers.values():
            handler.restore()
        super(TorchState, self).restore()

    def sync(self):
        for handler in self._handlers.values():
            handler.sync()
        super(TorchState, self).sync()

    def __setattr__(self, name, value):
        if name in self.__dict__ and name in self.__dict__.get('_handlers', ()):
            self._handlers[name].set_value(value)
        super(TorchState, self).__setattr__(name, value)
