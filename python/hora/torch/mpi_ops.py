"""Horovod's PyTorch collectives (``horovod.torch.mpi_ops``) on libhora's async engine.

Every op is submitted under a name to hora's engine, which agrees with the other ranks on an
order and fuses small allreduces; a name is prefixed with the op (``allreduce.<name>``, as in
Horovod) and ops without a name get ``<op>.noname.<n>`` (so unnamed ops
must be called in the same order on every rank, as in Horovod). A handle is an int for
``poll()`` and ``synchronize()``. Contiguous CPU tensors are handed to hora without a copy and
kept alive until the handle is synchronized; non-contiguous tensors go through a contiguous copy.
"""

import functools
import inspect
import itertools
import operator
import os
import threading

import torch

from hora.common.exceptions import HorovodInternalError  # noqa: F401 (hora.torch exports it)
from hora.torch import _hora_torch as _C
# The handles and op names in flight live in _core, which adasum imports instead of this module.
from hora.torch._core import (_Pending, _auto_name, _handle_counter, _lock,  # noqa: F401
                              _name_counters, _pending, _register, _set_size, _tls)
from hora.torch import process_sets as _ps
from hora.torch.compression import Compression
from hora.torch.process_sets import (ProcessSet, add_process_set, global_process_set,  # noqa: F401
                                     remove_process_set)

# Reduction ops, with Horovod's numbers (horovod/common/basics.py: horovod_reduce_op_*), so
# that code passing op=1 or comparing with horovod.torch.Sum behaves the same. The extension
# takes hora::ReduceOp's numbers (_C.SUM, ...): _hora_op() translates wherever an op reaches _C.
Average = 0
Sum = 1
Adasum = 2
Min = 3
Max = 4
Product = 5

_HORA_OPS = {Average: _C.AVERAGE, Sum: _C.SUM, Min: _C.MIN, Max: _C.MAX, Product: _C.PRODUCT}


def _check_op(op, adasum=False):
    """Raises for what hora cannot reduce with: Adasum where ``adasum`` is false (only the
    allreduces and DistributedOptimizer take it: NotImplementedError) or an unknown op
    (ValueError). Returns ``op`` (Horovod's number)."""
    try:
        number = None if isinstance(op, bool) else operator.index(op)  # ints, numpy ints
    except TypeError:
        number = None
    if number == Adasum:
        if adasum:
            return number
        raise NotImplementedError('hora.torch reduces with op=hvd.Adasum only in allreduce, '
                                  'grouped_allreduce and DistributedOptimizer: use op=hvd.Average '
                                  '(or Sum, Min, Max, Product) here')
    if number not in _HORA_OPS:
        raise ValueError('hora.torch: unknown reduce op %r (use hvd.Average, hvd.Sum, hvd.Min, '
                         'hvd.Max or hvd.Product)' % (op,))
    return number


def _hora_op(op):
    """Horovod's op number -> hora::ReduceOp's, as the extension takes it."""
    return _HORA_OPS[_check_op(op)]

# hora's errors, all HoraError (a RuntimeError). Those that mean "a rank was lost or the job is
# being reset" (HoraPeerFailure, HoraAbortedError, HoraConnectionError) are also Horovod's
# HorovodInternalError (hora.common.exceptions), what elastic run() recovers from.
HoraError = _C.HoraError
HoraUsageError = _C.HoraUsageError
HoraConnectionError = _C.HoraConnectionError
HoraTimeoutError = _C.HoraTimeoutError
HoraPeerFailure = _C.HoraPeerFailure
HoraMismatchError = _C.HoraMismatchError
HoraAbortedError = _C.HoraAbortedError

is_initialized = _C.is_initialized
rank = _C.rank
size = _C.size
local_rank = _C.local_rank
local_size = _C.local_size
cross_rank = _C.cross_rank
cross_size = _C.cross_size
cuda_built = _C.cuda_built


def nccl_built():
    """NCCL's version code when libhora was built with NCCL (e.g. 21803 for 2.18.3; Horovod's
    numbering, so `hvd.nccl_built() >= 2700` compares versions), else 0. Truthy exactly when
    hora has NCCL, as before."""
    return _C.nccl_version()


def gloo_built():
    return True


def gloo_enabled():
    return is_initialized()


def mpi_built():
    return False


def mpi_enabled():
    return False


def mpi_threads_supported():
    return False


def ccl_built():
    return False


def ddl_built():
    return False


def rocm_built():
    return False


def is_homogeneous():
    """True when every host runs the same number of ranks."""
    return size() == local_size() * cross_size()


def check_extension(ext_name, ext_env_var, pkg_path, *args):
    """Horovod's check that a framework extension was built (horovod.common.util). hora.torch's
    extension is loaded when hora.torch is imported, so this succeeds (returns None)."""
    return None


def init(comm=None, process_sets=None):
    """Joins the job horarun started (or forms a world of one), then forms ``process_sets``
    (Horovod's: a list of ProcessSet, the same on every rank, or "dynamic" to allow
    add_process_set() later). ``comm`` (an MPI communicator) must be left out: hora has no MPI."""
    if comm:
        raise NotImplementedError('hora.torch.init(comm=...): hora has no MPI communicators; '
                                  'use process_sets=[hvd.ProcessSet(ranks), ...] for subsets')
    _horovod_environment()
    _C.init()
    _ps.init_process_sets(process_sets)


# Horovod's names of variables libhora reads under its own: a program (or its user) that sets
# HOROVOD_TIMELINE before hvd.init() gets its timeline, as with Horovod. Horovod's name wins when
# both are set and differ, since the program set it after horarun set hora's.
_HOROVOD_NAMES = (('HOROVOD_TIMELINE', 'HORA_TIMELINE'),
                  ('HOROVOD_TIMELINE_MARK_CYCLES', 'HORA_TIMELINE_MARK_CYCLES'))


_mapped = {}  # hora's name -> the value _horovod_environment() gave it


def _horovod_environment():
    """Copies HOROVOD_TIMELINE (and its MARK_CYCLES) to hora's names; a copy made at an earlier
    init() is taken back once the program has unset Horovod's name."""
    for horovod_name, hora_name in _HOROVOD_NAMES:
        value = os.environ.get(horovod_name)
        if value:
            os.environ[hora_name] = _mapped[hora_name] = value
        elif hora_name in _mapped:
            if os.environ.get(hora_name) == _mapped.pop(hora_name):
                del os.environ[hora_name]


def shutdown():
    """Leaves the job; pending handles are forgotten. init() may join again afterwards."""
    _forget_ops()
    _C.shutdown()


# --- Handles --------------------------------------------------------------------------------



def _forget_ops():
    """Forgets pending handles and restarts the numbering of unnamed ops, as a new process
    would: after shutdown() or an elastic reset every rank starts again from the same names."""
    _pending.clear()
    del _placeholders[:]
    with _lock:
        _name_counters.clear()


# --- Keeping the ranks in step when one rank's arguments are refused ---------------------------
#
# An op that this rank refuses before the engine has it (a dtype or device hora cannot take, a
# 0-dimensional reducescatter, splits that do not add up, an unknown op) would leave the other
# ranks waiting for a name this rank never submits, and an unnamed op would shift the numbering
# of every later unnamed op. So the public collectives below run under _in_step(): when such an
# error leaves one, the op's name is still taken (as a valid call would take it) and an empty
# placeholder (0 uint8 elements, a broadcast, or an allgather for a broadcast) is submitted
# under every name that did not reach the engine. Where every rank refused the op, the
# placeholders match each other and complete; where another rank submitted the real op, the
# engine fails it on every rank with HoraMismatchError. Either way each rank raises, and a
# program that catches the errors continues in step. The placeholders are released once they
# complete (_sweep_placeholders) or at shutdown.
_placeholders = []
# What the checks before submission raise (HoraUsageError is a ValueError).
_REFUSALS = (ValueError, TypeError, NotImplementedError)


def _submit(submit_fn, name, *args, **kwargs):
    """Calls ``submit_fn(name, ...)`` (an _C.*_async) and notes that ``name`` reached the
    engine."""
    hid = submit_fn(name, *args, **kwargs)
    submitted = getattr(_tls, 'submitted', None)
    if submitted is not None:
        submitted.add(name)
    return hid


def _sweep_placeholders():
    for hid in list(_placeholders):
        try:
            if not _C.poll(hid):
                continue
            _C.synchronize(hid)
        except (HoraError, ValueError):
            pass  # a mismatch with another rank's real op: that rank reports it
        _placeholders.remove(hid)


def _submit_placeholders(kind, names, ps_id):
    empty = torch.empty(0, dtype=torch.uint8)
    for name in names:
        try:
            if kind == 'broadcast':
                hid = _C.allgather_async(name, empty, process_set=ps_id)
            else:
                hid = _C.broadcast_async(name, empty, empty, 0, process_set=ps_id)
            _placeholders.append(hid)
        except (HoraError, ValueError):
            pass  # the name is in flight (a duplicate) or hora is not initialized


def _in_step(kind, grouped=False):
    """Wraps a public collective of ``kind`` (the prefix of its names) as described above.
    Nested calls (allreduce() calls allreduce_async()) are handled by the outermost."""
    def wrap(fn):
        signature = inspect.signature(fn)

        @functools.wraps(fn)
        def call(*args, **kwargs):
            if getattr(_tls, 'names', None) is not None:
                return fn(*args, **kwargs)
            _tls.names, _tls.submitted = [], set()
            try:
                if _placeholders:
                    _sweep_placeholders()
                return fn(*args, **kwargs)
            except _REFUSALS:
                names, submitted = _tls.names, _tls.submitted
                _tls.names = _tls.submitted = None
                _keep_in_step(kind, grouped, signature, args, kwargs, names, submitted)
                raise
            finally:
                _tls.names = _tls.submitted = None
        return call
    return wrap


def _keep_in_step(kind, grouped, signature, args, kwargs, names, submitted):
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError:
        return  # a call Python itself refused: every rank makes the same mistake
    bound.apply_defaults()
    a = bound.arguments
    if not is_initialized():
        return
    try:
        ps_id = _check_process_set(a.get('process_set'), kind)
    except ValueError:
        return  # not a member of the set (or no such set): Horovod's local error
    if not names:
        names = [_auto_name(kind, a.get('name'), ps_id)]
    if grouped:
        try:
            count = len(a['tensors'])
        except TypeError:
            count = 0
        names = ['%s.%d' % (names[0], i) for i in range(count)]
    _submit_placeholders(kind, [n for n in names if n not in submitted], ps_id)


def _describe(op, name, tensor):
    try:
        r = rank()
    except HoraError:
        r = '?'
    return "%s '%s' of shape %s %s on rank %s" % (op, name, list(tensor.shape),
                                                 str(tensor.dtype).replace('torch.', ''), r)


def _check_process_set(process_set, what='op'):
    """The libhora id of the set an op runs on (0: global); ValueError as Horovod's for a set
    that is not registered or that this rank is not in."""
    return _ps.resolve(process_set, what)


def _set_rank(ps_id):
    return rank() if ps_id == 0 else _C.process_set_rank(ps_id)


def start_timeline(file_path, mark_cycles=False):
    """Creates a timeline file at ``file_path`` and begins recording (Horovod's signature): a
    Chrome trace of the ops from now on, written by rank 0 (only rank 0's call matters; calling
    it on every rank, as Horovod asks, is fine). ``mark_cycles`` marks the engine's busy cycles.
    While a timeline is recording, another path switches to it (the old file is closed complete)
    and the same path only changes ``mark_cycles``. Unlike Horovod, HOROVOD_TIMELINE=DYNAMIC is
    not needed. Raises ValueError before init(), HoraError when rank 0 cannot create the file."""
    if not _C.is_initialized():
        raise ValueError('hora.torch.start_timeline(%r): hora is not initialized; use hvd.init() '
                         'first' % (file_path,))
    _C.start_timeline(str(file_path), bool(mark_cycles))


def stop_timeline():
    """Stops the timeline recording and closes the file, which is complete JSON when this
    returns (rank 0); does nothing when none is recording, as in Horovod. Raises ValueError
    before init()."""
    if not _C.is_initialized():
        raise ValueError('hora.torch.stop_timeline(): hora is not initialized; use hvd.init() '
                         'first')
    _C.stop_timeline()


def poll(handle):
    """True once the op behind ``handle`` has completed; then synchronize() does not block."""
    p = _pending.get(handle)
    if p is None:
        raise ValueError('hora.torch.poll: unknown or already synchronized handle %r' % (handle,))
    return all(_C.poll(i) for i in p.ids)


def synchronize(handle):
    """Waits for the op behind ``handle`` (without holding the GIL) and returns its result.
    Raises the op's error as a HoraError subclass carrying hora's message."""
    p = _pending.pop(handle, None)
    if p is None:
        raise ValueError('hora.torch.synchronize: unknown or already synchronized handle %r'
                         % (handle,))
    results = []
    error = None
    for i in p.ids:
        try:
            results.append(_C.synchronize(i))
        except HoraError as e:  # keep waiting for the rest so their buffers are released
            if error is None:
                error = e
    if error is not None:
        hint = ''
        if isinstance(error, HoraMismatchError) and 'uint8' in str(error):
            hint = ('; an empty uint8 op is the placeholder a rank submits when it refused the '
                    'op\'s arguments: that rank raised the reason')
        raise type(error)('%s (%s%s)' % (error, p.describe, hint)) from None
    return p.finish(results)


def _one(results):
    return results[0]


def _scale(tensor, factor):
    """``tensor * factor`` in ``tensor``'s dtype, computed as Horovod's prescale and postscale
    compute it: integers in float64 and cast back (truncating towards zero), float16 and
    bfloat16 in float32, other floating types in their own precision."""
    if tensor.is_floating_point() and (tensor.element_size() >= 4 or tensor.is_cuda) or \
            tensor.is_complex():
        return tensor * torch.tensor(factor, dtype=tensor.dtype, device=tensor.device)
    wide = torch.float32 if tensor.is_floating_point() else torch.float64
    return (tensor.to(wide) * factor).to(tensor.dtype)


def _scale_(tensor, factor):
    """_scale() into ``tensor`` itself; returns it."""
    if factor != 1.0:
        with torch.no_grad():
            tensor.copy_(_scale(tensor, factor))
    return tensor


def _scaled(factor):
    def finish(results):
        return _scale_(results[0], factor)
    return finish


# --- gradients ------------------------------------------------------------------------------
#
# The backward passes of allgather, broadcast and reducescatter are Horovod's: allgather's and
# broadcast's average the incoming gradients over the ranks, and reducescatter's allgathers them
# multiplied by the set's size for op=Sum (and by the prescale and postscale factors), unscaled
# for op=Average. Each is the derivative of the op when every rank's loss is averaged, which is
# what DistributedOptimizer does with the parameters' gradients. HORA_TORCH_SUM_GRADIENTS=1
# chooses the derivative of the sum of the ranks' losses instead (size() times Horovod's for
# allgather and broadcast, 1/size() times for reducescatter): read at each backward pass.
SUM_GRADIENTS_ENV = 'HORA_TORCH_SUM_GRADIENTS'


def _sum_gradients():
    return os.environ.get(SUM_GRADIENTS_ENV, '0') not in ('', '0')


def _gather_grad_op():
    """How allgather's and broadcast's backward passes reduce the incoming gradients."""
    return Sum if _sum_gradients() else Average


def _scatter_grad(grad, ctx):
    """reducescatter's incoming gradient, scaled as its backward pass allgathers it."""
    grad = grad.contiguous()
    if _sum_gradients():
        if ctx.op == Average:
            grad = grad / _set_size(_check_process_set(ctx.process_set))
        return grad
    factor = ctx.scale
    if ctx.op == Sum:
        factor *= _set_size(_check_process_set(ctx.process_set))
    return grad * factor if factor != 1.0 else grad


# --- allreduce ------------------------------------------------------------------------------

def _resolve_op(op, average, default=Average, adasum=False):
    if op is not None and average is not None:
        raise ValueError('hora.torch: give op or average (deprecated), not both')
    if op is None:
        if average is None:
            return default
        return Average if average else Sum
    return _check_op(op, adasum)


def _allreduce_async(tensor, output, name, op, prescale_factor, postscale_factor, ps_id=0):
    if op == Adasum:
        from hora.torch import adasum
        adasum.check_tensors([tensor], 'allreduce', ps_id)
        return adasum.allreduce_async([tensor], [output], name, prescale_factor,
                                      postscale_factor, 'allreduce', ps_id)
    name = _auto_name('allreduce', name, ps_id)
    if prescale_factor != 1.0:
        if output is tensor:
            _scale_(tensor, prescale_factor)
        else:
            tensor = _scale(tensor, prescale_factor)
    hid = _submit(_C.allreduce_async, name, tensor, output, _hora_op(op), process_set=ps_id)
    return _register([hid], _scaled(postscale_factor), _describe('allreduce', name, tensor))


def allreduce_async(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                    postscale_factor=1.0, process_set=None):
    """Starts reducing ``tensor`` over all ranks (or ``process_set``'s) into a new tensor;
    returns a handle."""
    ps_id = _check_process_set(process_set, 'allreduce')
    op = _resolve_op(op, average, adasum=True)
    if op == Adasum:  # before empty_like, which a sparse tensor would fail
        from hora.torch import adasum
        adasum.check_tensors([tensor], 'allreduce', ps_id)
    output = torch.empty_like(tensor, memory_format=torch.contiguous_format)
    return _allreduce_async(tensor, output, name, op, prescale_factor, postscale_factor, ps_id)


def allreduce_async_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                     postscale_factor=1.0, process_set=None):
    """Starts reducing ``tensor`` in place over all ranks (or ``process_set``'s); returns a
    handle."""
    ps_id = _check_process_set(process_set, 'allreduce')
    op = _resolve_op(op, average, adasum=True)
    return _allreduce_async(tensor, tensor, name, op, prescale_factor, postscale_factor, ps_id)


def allreduce_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
               postscale_factor=1.0, process_set=None):
    """Reduces ``tensor`` in place over all ranks (default: average) and returns it."""
    return synchronize(allreduce_async_(tensor, average, name, op, prescale_factor,
                                        postscale_factor, process_set))


class _Allreduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, op, prescale_factor, postscale_factor, process_set):
        ctx.op = op
        ctx.prescale_factor = prescale_factor
        ctx.postscale_factor = postscale_factor
        ctx.process_set = process_set
        return synchronize(allreduce_async(tensor, None, name, op, prescale_factor,
                                           postscale_factor, process_set))

    @staticmethod
    def backward(ctx, grad_output):
        grad = allreduce(grad_output, op=ctx.op, prescale_factor=ctx.prescale_factor,
                         postscale_factor=ctx.postscale_factor, process_set=ctx.process_set)
        return grad, None, None, None, None, None


def allreduce(tensor, average=None, name=None, compression=Compression.none, op=None,
              prescale_factor=1.0, postscale_factor=1.0, process_set=None):
    """Returns ``tensor`` reduced over all ranks (default: average); the input is unchanged.
    Differentiable: the gradient is allreduced the same way."""
    _check_process_set(process_set, 'allreduce')
    op = _resolve_op(op, average, adasum=True)
    compressed, cctx = compression.compress(tensor)
    reduced = _Allreduce.apply(compressed, name, op, prescale_factor, postscale_factor,
                               process_set)
    return compression.decompress(reduced, cctx)


def _grouped_allreduce_async(tensors, outputs, name, op, prescale_factor, postscale_factor,
                             ps_id=0):
    if op == Adasum:
        from hora.torch import adasum
        adasum.check_tensors(tensors, 'grouped_allreduce', ps_id)
        return adasum.allreduce_async(tensors, outputs, name, prescale_factor, postscale_factor,
                                      'grouped_allreduce', ps_id)
    name = _auto_name('grouped_allreduce', name, ps_id)
    ids = []
    for i, (t, o) in enumerate(zip(tensors, outputs)):
        if prescale_factor != 1.0:
            if o is t:
                _scale_(t, prescale_factor)
            else:
                t = _scale(t, prescale_factor)
        ids.append(_submit(_C.allreduce_async, '%s.%d' % (name, i), t, o, _hora_op(op),
                                      process_set=ps_id))

    def finish(results):
        return [_scale_(r, postscale_factor) for r in results]
    return _register(ids, finish, "grouped_allreduce '%s' of %d tensors" % (name, len(ids)))


def grouped_allreduce_async(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                            postscale_factor=1.0, process_set=None):
    """Starts reducing a list of tensors (one fused submission); returns one handle."""
    ps_id = _check_process_set(process_set, 'grouped_allreduce')
    op = _resolve_op(op, average, adasum=True)
    if op == Adasum:  # before empty_like, which a sparse tensor would fail
        from hora.torch import adasum
        adasum.check_tensors(tensors, 'grouped_allreduce', ps_id)
    outputs = [torch.empty_like(t, memory_format=torch.contiguous_format) for t in tensors]
    return _grouped_allreduce_async(tensors, outputs, name, op, prescale_factor,
                                    postscale_factor, ps_id)


def grouped_allreduce_async_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                             postscale_factor=1.0, process_set=None):
    """In-place grouped_allreduce_async."""
    ps_id = _check_process_set(process_set, 'grouped_allreduce')
    op = _resolve_op(op, average, adasum=True)
    return _grouped_allreduce_async(tensors, tensors, name, op, prescale_factor,
                                    postscale_factor, ps_id)


def grouped_allreduce_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                       postscale_factor=1.0, process_set=None):
    """Reduces every tensor of the list in place; returns the list."""
    return synchronize(grouped_allreduce_async_(tensors, average, name, op, prescale_factor,
                                                postscale_factor, process_set))


class _GroupedAllreduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx, name, op, prescale_factor, postscale_factor, process_set, *tensors):
        ctx.op = op
        ctx.prescale_factor = prescale_factor
        ctx.postscale_factor = postscale_factor
        ctx.process_set = process_set
        return tuple(synchronize(grouped_allreduce_async(list(tensors), None, name, op,
                                                         prescale_factor, postscale_factor,
                                                         process_set)))

    @staticmethod
    def backward(ctx, *grad_outputs):
        grads = grouped_allreduce([g.contiguous() for g in grad_outputs], op=ctx.op,
                                  prescale_factor=ctx.prescale_factor,
                                  postscale_factor=ctx.postscale_factor,
                                  process_set=ctx.process_set)
        return (None, None, None, None, None) + tuple(grads)


def grouped_allreduce(tensors, average=None, name=None, compression=Compression.none, op=None,
                      prescale_factor=1.0, postscale_factor=1.0, process_set=None):
    """Returns the list of tensors reduced over all ranks; the inputs are unchanged.
    Differentiable, like allreduce."""
    _check_process_set(process_set, 'grouped_allreduce')
    op = _resolve_op(op, average, adasum=True)
    if not tensors:
        return []
    compressed, ctxs = zip(*[compression.compress(t) for t in tensors])
    reduced = _GroupedAllreduce.apply(name, op, prescale_factor, postscale_factor, process_set,
                                      *compressed)
    return [compression.decompress(t, c) for t, c in zip(reduced, ctxs)]


# --- sparse allreduce -----------------------------------------------------------------------

def sparse_allreduce_async(tensor, name, op, process_set=global_process_set):
    """Horovod's sparse allreduce of a sparse COO ``tensor``: allgathers every rank's indices
    (as ``<name>.indices``) and values (``<name>.values``) and returns a function that waits for
    both and gives the sparse sum (``op=Average``: divided by the set's size) of every rank's
    tensor, uncoalesced, as Horovod's does. Like Horovod's, the result is a callable, not a
    handle."""
    ps_id = _check_process_set(process_set, 'sparse_allreduce_async')
    op = _check_op(op)
    if op not in (Average, Sum):
        raise ValueError('hora.torch.sparse_allreduce_async: op must be hvd.Average or hvd.Sum '
                         '(the ranks\' indices and values are gathered, then summed)')
    t = tensor
    # allgather concatenates along the first dimension: indices go as [nnz, sparse_dim].
    indices_handle = allgather_async(t._indices().transpose(0, 1).contiguous(),
                                     name='%s.indices' % (name,), process_set=process_set)
    values_handle = allgather_async(t._values().contiguous(), name='%s.values' % (name,),
                                    process_set=process_set)

    def handle():
        values = synchronize(values_handle)
        indices = synchronize(indices_handle)
        if op == Average:
            values = values / _set_size(ps_id)
        if indices.dim() == 0 or values.dim() == 0:
            return t.new().resize_as_(t)
        return torch.sparse_coo_tensor(indices.transpose(0, 1), values, t.size(),
                                       dtype=t.dtype, device=t.device)

    return handle


# --- allgather ------------------------------------------------------------------------------

def allgather_async(tensor, name=None, process_set=None):
    """Starts concatenating every rank's ``tensor`` along the first dimension (whose size may
    differ per rank); returns a handle."""
    ps_id = _check_process_set(process_set, 'allgather')
    name = _auto_name('allgather', name, ps_id)
    hid = _submit(_C.allgather_async, name, tensor, process_set=ps_id)
    return _register([hid], lambda results: results[0][0],
                     _describe('allgather', name, tensor))


class _Allgather(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, process_set):
        ctx.dim = tensor.shape[0] if tensor.dim() else 1
        ctx.process_set = process_set
        return synchronize(allgather_async(tensor, name, process_set))

    @staticmethod
    def backward(ctx, grad_output):
        ps = ctx.process_set
        grad = allreduce(grad_output, op=_gather_grad_op(), process_set=ps)
        dims = allgather(torch.tensor([ctx.dim], dtype=torch.int64), process_set=ps)
        offset = int(dims[:_set_rank(_check_process_set(ps))].sum())
        return grad.narrow(0, offset, ctx.dim), None, None


def allgather(tensor, name=None, process_set=None):
    """Returns every rank's (or ``process_set``'s ranks') ``tensor`` concatenated along the
    first dimension, in rank order."""
    _check_process_set(process_set, 'allgather')
    return _Allgather.apply(tensor, name, process_set)


def grouped_allgather_async(tensors, name=None, process_set=None):
    """Starts an allgather of every tensor of the list; returns one handle, whose synchronize()
    gives the list of gathered tensors."""
    ps_id = _check_process_set(process_set, 'grouped_allgather')
    name = _auto_name('grouped_allgather', name, ps_id)
    ids = [_submit(_C.allgather_async, '%s.%d' % (name, i), t, process_set=ps_id)
           for i, t in enumerate(tensors)]
    return _register(ids, lambda results: [r[0] for r in results],
                     "grouped_allgather '%s' of %d tensors" % (name, len(ids)))


class _GroupedAllgather(torch.autograd.Function):
    @staticmethod
    def forward(ctx, name, process_set, *tensors):
        ctx.dims = [t.shape[0] if t.dim() else 1 for t in tensors]
        ctx.process_set = process_set
        return tuple(synchronize(grouped_allgather_async(list(tensors), name, process_set)))

    @staticmethod
    def backward(ctx, *grad_outputs):
        ps = ctx.process_set
        grads = grouped_allreduce([g.contiguous() for g in grad_outputs], op=_gather_grad_op(),
                                  process_set=ps)
        # [set size, len(tensors)]
        dims = allgather(torch.tensor([ctx.dims], dtype=torch.int64), process_set=ps)
        offsets = dims[:_set_rank(_check_process_set(ps))].sum(0).tolist()
        return (None, None) + tuple(g.narrow(0, int(o), d)
                                    for g, o, d in zip(grads, offsets, ctx.dims))


def grouped_allgather(tensors, name=None, process_set=None):
    """Returns, for every tensor of the list, every rank's tensor concatenated along the first
    dimension in rank order (as allgather() does for one). Differentiable, like allgather."""
    _check_process_set(process_set, 'grouped_allgather')
    if not tensors:
        return []
    return list(_GroupedAllgather.apply(name, process_set, *tensors))


# --- broadcast ------------------------------------------------------------------------------

def _set_root(ps_id, root_rank, process_set):
    """Broadcast's root as libhora takes it: its rank within the set (Horovod's API, and
    hora.torch's, take a global root_rank)."""
    if ps_id == 0:
        return root_rank
    ranks = list(_C.process_set_ranks(ps_id))
    if root_rank not in ranks:
        raise ValueError('Broadcast: root_rank %r is not a member of the provided process set '
                         '(hora.torch on rank %d: %s; root_rank is a global rank, one of %s)'
                         % (root_rank, rank(), process_set, ranks))
    return ranks.index(root_rank)


def broadcast_async(tensor, root_rank, name=None, process_set=None):
    """Starts copying root_rank's ``tensor`` into a new tensor on every rank; returns a handle."""
    ps_id = _check_process_set(process_set, 'broadcast')
    root = _set_root(ps_id, root_rank, process_set)
    name = _auto_name('broadcast', name, ps_id)
    output = torch.empty_like(tensor, memory_format=torch.contiguous_format)
    hid = _submit(_C.broadcast_async, name, tensor, output, root, process_set=ps_id)
    return _register([hid], _one, _describe('broadcast', name, tensor))


def broadcast_async_(tensor, root_rank, name=None, process_set=None):
    """Starts copying root_rank's ``tensor`` into ``tensor`` on every rank; returns a handle."""
    ps_id = _check_process_set(process_set, 'broadcast')
    root = _set_root(ps_id, root_rank, process_set)
    name = _auto_name('broadcast', name, ps_id)
    hid = _submit(_C.broadcast_async, name, tensor, tensor, root, process_set=ps_id)
    return _register([hid], _one, _describe('broadcast', name, tensor))


def broadcast_(tensor, root_rank, name=None, process_set=None):
    """Overwrites ``tensor`` with root_rank's on every rank; returns it."""
    return synchronize(broadcast_async_(tensor, root_rank, name, process_set))


class _Broadcast(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, root_rank, name, process_set):
        ctx.root_rank = root_rank
        ctx.process_set = process_set
        return synchronize(broadcast_async(tensor, root_rank, name, process_set))

    @staticmethod
    def backward(ctx, grad_output):
        grad = allreduce(grad_output, op=_gather_grad_op(), process_set=ctx.process_set)
        if rank() != ctx.root_rank:
            grad = grad * 0
        return grad, None, None, None


def broadcast(tensor, root_rank, name=None, process_set=None):
    """Returns root_rank's ``tensor`` on every rank; the input is unchanged."""
    _check_process_set(process_set, 'broadcast')
    return _Broadcast.apply(tensor, root_rank, name, process_set)


# --- alltoall -------------------------------------------------------------------------------

def _split_rows(tensor, splits, n):
    if splits is None:
        rows = tensor.shape[0] if tensor.dim() else 0
        if rows % n != 0:
            raise ValueError('hora.torch.alltoall: the first dimension (%d) does not divide by '
                             'the number of ranks (%d); pass splits' % (rows, n))
        return [rows // n] * n
    if isinstance(splits, torch.Tensor):
        # As Horovod: a 1-D tensor of integers (Horovod wants int32 exactly; hora takes any
        # integer type, which gives the same splits). Float splits were truncated before, so
        # Horovod's programs that rely on the error (and its own test) saw none.
        if splits.dim() > 1:
            raise ValueError('hora.torch.alltoall expects a 1D splits tensor, got %d dimensions'
                             % splits.dim())
        if splits.is_floating_point() or splits.is_complex() or splits.dtype == torch.bool:
            raise ValueError('hora.torch.alltoall expects splits to contain integers (torch.int32, '
                             'as Horovod), got %s' % splits.dtype)
        splits = splits.tolist()
    splits = [int(s) for s in splits]
    if len(splits) != n:
        raise ValueError('hora.torch.alltoall: %d splits given for %d ranks' % (len(splits), n))
    return splits


def alltoall_async(tensor, splits=None, name=None, process_set=None):
    """Starts sending splits[i] first-dimension slices of ``tensor`` to rank i; synchronize()
    returns (gathered tensor, int32 tensor of the slices received from each rank)."""
    ps_id = _check_process_set(process_set, 'alltoall')
    name = _auto_name('alltoall', name, ps_id)
    hid = _submit(_C.alltoall_async, name, tensor, _split_rows(tensor, splits, _set_size(ps_id)),
                            process_set=ps_id)

    def finish(results):
        output, rows = results[0]
        return output, torch.tensor(rows, dtype=torch.int32)
    return _register([hid], finish, _describe('alltoall', name, tensor))


class _Alltoall(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, splits, name, process_set):
        output, received = synchronize(alltoall_async(tensor, splits, name, process_set))
        ctx.received = received
        ctx.process_set = process_set
        ctx.mark_non_differentiable(received)
        return output, received

    @staticmethod
    def backward(ctx, grad_output, *unused):
        grad, _ = alltoall(grad_output.contiguous(), splits=ctx.received,
                           process_set=ctx.process_set)
        return grad, None, None, None


def alltoall(tensor, splits=None, name=None, process_set=None):
    """Returns the slices every rank sent to this one, concatenated in rank order; with
    ``splits`` given, returns (output, received_splits)."""
    _check_process_set(process_set, 'alltoall')
    output, received = _Alltoall.apply(tensor, splits, name, process_set)
    if splits is None:
        return output
    return output, received


# --- reducescatter --------------------------------------------------------------------------

def _reducescatter_submit(tensor, name, op, prescale_factor, postscale_factor, ps_id=0):
    """Submits one reducescatter under ``name`` on set ``ps_id``; returns (engine handle id,
    function turning its engine result into this rank's block)."""
    if tensor.dim() == 0:
        raise ValueError("hora.torch.reducescatter '%s' on rank %d: a 0-dimensional tensor has no "
                         "first dimension to scatter; reshape it (tensor.reshape(1)) or use "
                         "allreduce" % (name, rank()))
    if prescale_factor != 1.0:
        tensor = _scale(tensor, prescale_factor)
    n, me = _set_size(ps_id), _set_rank(ps_id)
    rows = tensor.shape[0] if tensor.dim() else 1
    out_rows = rows // n + (1 if me < rows % n else 0)
    row = tensor[0].numel() if tensor.dim() and rows else 1

    def scaled(out):
        return _scale_(out, postscale_factor)
    if row == 1 or rows % n == 0:
        # hora splits elements the same way: this rank's block is whole slices.
        return (_submit(_C.reducescatter_async, name, tensor, _hora_op(op), out_rows,
                        process_set=ps_id), scaled)
    # Slices would straddle hora's element blocks: reduce everything, keep this rank's slices.
    start = me * (rows // n) + min(me, rows % n)
    output = torch.empty_like(tensor, memory_format=torch.contiguous_format)
    try:
        hid = _submit(_C.allreduce_async, name, tensor, output, _hora_op(op), process_set=ps_id)
    except HoraUsageError as e:  # says hora::allreduce_async, which the caller never called
        raise HoraUsageError(str(e).replace('hora::allreduce_async', 'hora.torch.reducescatter'))
    return hid, lambda out: scaled(out.narrow(0, start, out_rows).clone())


def reducescatter_async(tensor, name=None, op=Average, process_set=None, prescale_factor=1.0,
                        postscale_factor=1.0):
    """Starts reducing ``tensor`` over all ranks; rank r receives its block of first-dimension
    slices (split evenly, the first ``rows % size()`` ranks one more). Returns a handle."""
    ps_id = _check_process_set(process_set, 'reducescatter')
    op = _check_op(op)
    name = _auto_name('reducescatter', name, ps_id)
    describe = _describe('reducescatter', name, tensor)
    hid, finish = _reducescatter_submit(tensor, name, op, prescale_factor, postscale_factor,
                                        ps_id)
    return _register([hid], lambda results: finish(results[0]), describe)


class _Reducescatter(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, op, prescale_factor, postscale_factor, process_set):
        ctx.op = op
        ctx.scale = prescale_factor * postscale_factor
        ctx.process_set = process_set
        return synchronize(reducescatter_async(tensor, name, op, process_set, prescale_factor,
                                               postscale_factor))

    @staticmethod
    def backward(ctx, grad_output):
        ps = ctx.process_set
        grad = allgather(_scatter_grad(grad_output, ctx), process_set=ps)
        return grad, None, None, None, None, None


def reducescatter(tensor, name=None, compression=Compression.none, op=Average, process_set=None,
                  prescale_factor=1.0, postscale_factor=1.0):
    """Returns this rank's block of ``tensor`` reduced over all ranks (default: average)."""
    _check_process_set(process_set, 'reducescatter')
    op = _check_op(op)
    compressed, cctx = compression.compress(tensor)
    reduced = _Reducescatter.apply(compressed, name, op, prescale_factor, postscale_factor,
                                   process_set)
    return compression.decompress(reduced, cctx)


def grouped_reducescatter_async(tensors, name=None, op=Average, process_set=None,
                                prescale_factor=1.0, postscale_factor=1.0):
    """Starts a reducescatter of every tensor of the list (each split as reducescatter_async
    splits one); returns one handle, whose synchronize() gives the list of this rank's blocks."""
    ps_id = _check_process_set(process_set, 'grouped_reducescatter')
    op = _check_op(op)
    name = _auto_name('grouped_reducescatter', name, ps_id)
    ids, finishes = [], []
    for i, t in enumerate(tensors):
        hid, finish = _reducescatter_submit(t, '%s.%d' % (name, i), op, prescale_factor,
                                            postscale_factor, ps_id)
        ids.append(hid)
        finishes.append(finish)
    return _register(ids, lambda results: [f(r) for f, r in zip(finishes, results)],
                     "grouped_reducescatter '%s' of %d tensors" % (name, len(ids)))


class _GroupedReducescatter(torch.autograd.Function):
    @staticmethod
    def forward(ctx, name, op, prescale_factor, postscale_factor, process_set, *tensors):
        ctx.op = op
        ctx.scale = prescale_factor * postscale_factor
        ctx.process_set = process_set
        return tuple(synchronize(grouped_reducescatter_async(list(tensors), name, op,
                                                             process_set, prescale_factor,
                                                             postscale_factor)))

    @staticmethod
    def backward(ctx, *grad_outputs):
        grads = grouped_allgather([_scatter_grad(g, ctx) for g in grad_outputs],
                                  process_set=ctx.process_set)
        return (None, None, None, None, None) + tuple(grads)


def grouped_reducescatter(tensors, name=None, compression=Compression.none, op=Average,
                          process_set=None, prescale_factor=1.0, postscale_factor=1.0):
    """Returns the list of this rank's blocks of every tensor reduced over all ranks (default:
    average), as reducescatter() gives for each; the inputs are unchanged."""
    _check_process_set(process_set, 'grouped_reducescatter')
    op = _check_op(op)
    if not tensors:
        return []
    compressed, ctxs = zip(*[compression.compress(t) for t in tensors])
    reduced = _GroupedReducescatter.apply(name, op, prescale_factor, postscale_factor,
                                          process_set, *compressed)
    return [compression.decompress(t, c) for t, c in zip(reduced, ctxs)]


# --- barrier and join -----------------------------------------------------------------------

def barrier(process_set=None):
    """Returns once every rank (of ``process_set``, when given) has called barrier()."""
    _C.barrier(process_set=_check_process_set(process_set, 'barrier'))


def join(device=-1):
    """Horovod's join: this rank has no more collectives (uneven data). Until every rank has
    joined, the other ranks' allreduces run without waiting for it, and it contributes zeros to
    them (Average still divides by size(), as Horovod's does); an allgather, broadcast, alltoall
    or reducescatter while a rank has joined fails on every rank. Returns, on every rank, the
    last rank to join. Synchronize this rank's handles first. `device` is accepted for
    Horovod's signature; the join itself moves no tensor."""
    del device
    return _C.join()


# The public collectives keep the ranks in step when this rank refuses an op's arguments.
for _fn, _kind, _grouped in [
        ('allreduce_async', 'allreduce', False), ('allreduce_async_', 'allreduce', False),
        ('allreduce_', 'allreduce', False), ('allreduce', 'allreduce', False),
        ('grouped_allreduce_async', 'grouped_allreduce', True),
        ('grouped_allreduce_async_', 'grouped_allreduce', True),
        ('grouped_allreduce_', 'grouped_allreduce', True),
        ('grouped_allreduce', 'grouped_allreduce', True),
        ('allgather_async', 'allgather', False), ('allgather', 'allgather', False),
        ('grouped_allgather_async', 'grouped_allgather', True),
        ('grouped_allgather', 'grouped_allgather', True),
        ('broadcast_async', 'broadcast', False), ('broadcast_async_', 'broadcast', False),
        ('broadcast_', 'broadcast', False), ('broadcast', 'broadcast', False),
        ('alltoall_async', 'alltoall', False), ('alltoall', 'alltoall', False),
        ('reducescatter_async', 'reducescatter', False), ('reducescatter', 'reducescatter', False),
        ('grouped_reducescatter_async', 'grouped_reducescatter', True),
        ('grouped_reducescatter', 'grouped_reducescatter', True)]:
    globals()[_fn] = _in_step(_kind, _grouped)(globals()[_fn])
del _fn, _kind, _grouped
