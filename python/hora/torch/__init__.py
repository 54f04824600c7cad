"""hora.torch: Horovod's PyTorch API on libhora.

A Horovod script runs on hora by changing one line::

    import hora.torch as hvd      # was: import horovod.torch as hvd

and is launched with ``horarun -np 4 python3 train.py``. See docs/pytorch.md.
"""

import torch as _torch  # loads libtorch before the extension that links it


def _load_extension():
    """Imports the C++ extension so that libhora binds to its own Gloo. pip's torch links a
    Gloo of its own into libtorch_cpu and exports it; a libhora bound to that one (a different
    version) fails at init(). The extension lists libhora and libgloo before torch's libraries,
    which is enough while torch's libraries are not in the global scope; RTLD_DEEPBIND also
    covers a Gloo that is (preloaded, or torch imported with RTLD_GLOBAL). HORA_TORCH_DEEPBIND=0
    leaves DEEPBIND out, for a process whose allocator is preloaded (jemalloc, tcmalloc), which
    DEEPBIND would let libhora bypass (docs/gpu.md)."""
    import os
    import sys
    flags = sys.getdlopenflags()
    deepbind = os.environ.get('HORA_TORCH_DEEPBIND', '1') != '0'
    if deepbind and hasattr(os, 'RTLD_DEEPBIND'):
        sys.setdlopenflags(flags | os.RTLD_DEEPBIND)
    try:
        from hora.torch import _hora_torch  # noqa: F401
    finally:
        sys.setdlopenflags(flags)


_load_extension()

from hora.torch.compression import Compression
from hora.torch import mpi_ops
from hora.torch.functions import (allgather_object, broadcast_object, broadcast_optimizer_state,
                                  broadcast_parameters)
from hora.torch.mpi_ops import (
    Average, Sum, Adasum, Min, Max, Product, check_extension,
    HoraError, HoraUsageError, HoraConnectionError, HoraTimeoutError, HoraPeerFailure,
    HoraMismatchError, HoraAbortedError, HorovodInternalError,
    init, shutdown, is_initialized, rank, size, local_rank, local_size, cross_rank, cross_size,
    cuda_built, nccl_built, gloo_built, gloo_enabled, mpi_built, mpi_enabled, mpi_threads_supported,
    ccl_built, ddl_built, rocm_built, is_homogeneous, global_process_set, ProcessSet,
    add_process_set, remove_process_set, start_timeline, stop_timeline, sparse_allreduce_async,
    allreduce, allreduce_, allreduce_async, allreduce_async_,
    grouped_allreduce, grouped_allreduce_, grouped_allreduce_async, grouped_allreduce_async_,
    allgather, allgather_async, grouped_allgather, grouped_allgather_async,
    broadcast, broadcast_, broadcast_async, broadcast_async_,
    alltoall, alltoall_async,
    reducescatter, reducescatter_async, grouped_reducescatter, grouped_reducescatter_async,
    barrier, join, poll, synchronize,
)
from hora.torch import optimizer as _optimizer


def _refuse_unsupported_op(make):
    """DistributedOptimizer checks ``op`` when it is built (an unknown op: ValueError), not at
    the first gradient's allreduce inside backward()."""
    import functools
    import inspect
    default_op = inspect.signature(make).parameters['op'].default

    @functools.wraps(make)
    def wrapper(*args, **kwargs):
        bound = inspect.signature(make).bind(*args, **kwargs)
        mpi_ops._check_op(bound.arguments.get('op', default_op), adasum=True)
        return make(*args, **kwargs)
    return wrapper


DistributedOptimizer = _refuse_unsupported_op(_optimizer.DistributedOptimizer)
from hora.torch import sync_batch_norm  # a module, as horovod.torch.sync_batch_norm is
from hora.torch.sync_batch_norm import SyncBatchNorm
from hora.torch import elastic
