"""The core of hora.tensorflow that its other modules build on: the op library (``_C``, loaded
once, with its TensorFlow version checked), hora's exceptions and their translation from a
failed op, and the queries that process sets need (is_initialized, rank, size).

Its own module so that mpi_ops and process_sets each import it and not each other: mpi_ops
imports process_sets (Horovod's module layout exports ProcessSet from it), and process_sets
needs only this.
"""

import ctypes
import os
import re

import tensorflow as tf

from hora.common.exceptions import HorovodInternalError
from hora.tensorflow.util import _executing_eagerly

_HERE = os.path.dirname(os.path.abspath(__file__))
_LIB_PATH = os.path.join(_HERE, 'hora_tf_ops.so')


def _built_tf_version():
    try:
        from hora.tensorflow import _build_info
    except ImportError:
        return None
    return _build_info.TF_VERSION


def _load_library():
    """Loads the op library, refusing one built for another TensorFlow: its kernels would meet
    a different ABI (an undefined symbol at best)."""
    built = _built_tf_version()
    if not os.path.exists(_LIB_PATH) or built is None:
        raise ImportError(
            'hora.tensorflow: the op library %s was not built. Build it with TensorFlow present: '
            'scripts/venv.sh tf (scripts/setup.sh does it), then scripts/build.sh, which '
            'configures meson with -Dtensorflow=auto (docs/tensorflow.md)' % _LIB_PATH)
    if built != tf.__version__:
        raise ImportError(
            'hora.tensorflow: the op library %s was built against TensorFlow %s, but this '
            'process imports TensorFlow %s (%s). Rebuild hora against this TensorFlow '
            '(scripts/build.sh with its venv: docs/tensorflow.md), or run the TensorFlow it was '
            'built for' % (_LIB_PATH, built, tf.__version__, os.path.dirname(tf.__file__)))
    lib = tf.load_op_library(_LIB_PATH)
    return lib, ctypes.CDLL(_LIB_PATH)


MPI_LIB, _C = _load_library()


def _skip_autograph():
    """hora's functions hold no tensor-dependent Python control flow (they use tf.cond where
    they need one), so AutoGraph need not rewrite them when a tf.function calls them, as it
    does not rewrite TensorFlow's own."""
    try:
        from tensorflow.python.autograph.core import config
        rule = config.DoNotConvert('hora')
        if rule not in config.CONVERSION_RULES:
            config.CONVERSION_RULES = (rule,) + tuple(config.CONVERSION_RULES)
    except (ImportError, AttributeError):  # a TensorFlow without these internals converts them
        pass


_skip_autograph()

# --- Errors -------------------------------------------------------------------------------------


class HoraError(RuntimeError):
    """An error of hora's runtime; the message names the rank, the op and the reason."""


class HoraUsageError(HoraError):
    """Wrong arguments or a call before init()."""


class HoraMismatchError(HoraError):
    """Ranks disagreed about an op (shapes, dtypes, ops, roots)."""


class HoraConnectionError(HoraError, HorovodInternalError):
    """The rendezvous or a peer could not be reached."""


class HoraTimeoutError(HoraError, HorovodInternalError):
    """A deadline passed waiting for a peer."""


class HoraPeerFailure(HoraError, HorovodInternalError):
    """A peer died or closed its connection."""


class HoraAbortedError(HoraError, HorovodInternalError):
    """horarun aborted the job (another rank failed, or it was interrupted)."""


_KINDS = {1: HoraUsageError, 2: HoraConnectionError, 3: HoraTimeoutError, 4: HoraPeerFailure,
          5: HoraMismatchError, 6: HoraAbortedError, 7: HoraError}
_BY_NAME = {c.__name__: c for c in _KINDS.values()}
_PREFIX = re.compile(r'(HoraUsageError|HoraConnectionError|HoraTimeoutError|HoraPeerFailure|'
                     r'HoraMismatchError|HoraAbortedError|HoraError): ')

_C.hora_tf_last_error.restype = ctypes.c_char_p
# ctypes passes Python ints as C ints unless told; a float it cannot pass at all.
_C.hora_tf_elastic_reset.argtypes = [ctypes.c_double]


def _check(code):
    if code == 8:
        from hora.common.exceptions import HostsUpdatedInterrupt
        raise HostsUpdatedInterrupt(False)
    if code:
        raise _KINDS.get(code, HoraError)(_C.hora_tf_last_error().decode('utf-8', 'replace'))


def _query(fn, *args):
    out = ctypes.c_int(0)
    _check(fn(*args, ctypes.byref(out)))
    return out.value


def _translate(e):
    """The hora exception an op's TensorFlow error stands for (the kernels prefix their
    messages with the class name), or None."""
    m = _PREFIX.search(e.message or '')
    if not m:
        return None
    return _BY_NAME[m.group(1)](e.message[m.start():])


def _run(fn, *args, **kwargs):
    """Runs an op wrapper; in eager mode an op's failure becomes hora's exception (inside
    tf.function the caller sees TensorFlow's error, whose message starts the same way)."""
    if not _executing_eagerly():
        return fn(*args, **kwargs)
    try:
        return fn(*args, **kwargs)
    except tf.errors.OpError as e:
        translated = _translate(e)
        if translated is None:
            raise
        raise translated from e


def is_initialized():
    return bool(_C.hora_tf_is_initialized())


def rank():
    return _query(_C.hora_tf_rank)


def size():
    return _query(_C.hora_tf_size)
