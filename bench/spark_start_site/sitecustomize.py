"""Makes torchrun work for the spark_start benchmark (on its PYTHONPATH only, never installed).

TorchDistributor runs `python -m torch.distributed.run`, and the torchrun of Debian's torch 1.13
fails at start on Python 3.11: `Std.from_str("0")` (the default --redirects/--tee) iterates the
IntFlag `Std`, and Python 3.11 no longer yields the 0 and multi-bit members, so it returns None
and start_processes raises "'NoneType' object has no attribute 'get'". torch 2.0 fixed it by
converting with `Std(int(v))`; this applies that fix when (and only when) the module is
imported, so that no other process of the benchmark pays for importing torch here.
"""

import importlib.abc
import importlib.machinery
import re
import sys

_TARGET = 'torch.distributed.elastic.multiprocessing.api'


def _patch(api):
    std = api.Std

    def from_str(cls, vm):
        if re.match(api._VALUE_REGEX, vm):
            return cls(int(vm))
        if re.match(api._MAPPING_REGEX, vm):
            return {int(i): cls(int(v)) for i, v in (m.split(':') for m in vm.split(','))}
        raise ValueError('%s does not match: <%s> or <%s>' % (vm, api._VALUE_REGEX,
                                                              api._MAPPING_REGEX))

    if std.from_str('0') is None:
        std.from_str = classmethod(from_str)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        if fullname != _TARGET:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_and_patch(module):
            exec_module(module)
            _patch(module)

        spec.loader.exec_module = exec_and_patch
        return spec


sys.meta_path.insert(0, _Finder())
