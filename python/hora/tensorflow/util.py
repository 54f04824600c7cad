"""Small helpers shared by hora.tensorflow's modules (Horovod's horovod.tensorflow.util)."""

from tensorflow.python.eager import context


def _executing_eagerly():
    return context.executing_eagerly()


def _make_subgraph(f):
    import tensorflow as tf
    return tf.function(f)


def _cache(f):
    """Memoizes f on its arguments and on eagerness (a graph-mode result is a different
    function than an eager one)."""
    cache = {}

    def wrapper(*args):
        key = (args, _executing_eagerly())
        if key not in cache:
            cache[key] = f(*args)
        return cache[key]
    return wrapper


def vars_to_refs(variables):
    if isinstance(variables, list):
        return tuple(vars_to_refs(v) for v in variables)
    return _tf_var(variables).ref()


def refs_to_vars(refs):
    if isinstance(refs, tuple):
        return [refs_to_vars(r) for r in refs]
    return refs.deref()


def _tf_var(v):
    """The tf.Variable behind ``v``: Keras 3's Variable wraps one (in ``_value``) and is itself
    neither a tf.Variable nor hashable; that is what breaks Horovod 0.28.1 on TF 2.16+
    ('Variable' object has no attribute 'ref')."""
    import tensorflow as tf
    if isinstance(v, tf.Variable):
        return v
    inner = getattr(v, '_value', None)
    return inner if isinstance(inner, tf.Variable) else v


def _var_key(v):
    """A dictionary key for a variable, Keras 3's or TensorFlow's."""
    v = _tf_var(v)
    return v.ref() if hasattr(v, 'ref') else id(v)
