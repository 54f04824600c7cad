"""The tests' runner: a test file calls run(globals()) at its end, which runs its test_*
functions in the order they are defined, on every rank alike (their collectives must match),
and exits 1 at the first failure with its traceback (horarun then stops the other ranks)."""

import os
import sys
import traceback

import tensorflow as tf

# The tests trace many small tf.functions on purpose; TensorFlow's retracing warnings are noise.
tf.get_logger().setLevel('ERROR')


def run(namespace):
    tests = [(name, fn) for name, fn in namespace.items()
             if name.startswith('test_') and callable(fn)]
    only = os.environ.get('HORA_TF_TESTS')
    if only:
        tests = [(n, f) for n, f in tests if n in only.split(',')]
    rank = os.environ.get('HORA_RANK', '0')
    for name, fn in tests:
        try:
            fn()
        except Exception:
            print('FAIL %s (rank %s)' % (name, rank), flush=True)
            traceback.print_exc()
            sys.stdout.flush()
            os._exit(1)
        print('ok %s (rank %s)' % (name, rank), flush=True)
    print('%d tests passed (rank %s)' % (len(tests), rank), flush=True)
