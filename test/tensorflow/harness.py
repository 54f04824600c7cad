"""The tests' runner: a test file calls run(globals()) at its end, which runs its test_*
functions in the order they are defined, on every rank alike (their collectives must match),
and exits 1 at the first failure with its traceback (horarun then stops the other ranks)."""

import contextlib
import os
import shlex
import subprocess
import sys
import tempfile
import traceback

import tensorflow as tf

# The tests trace many small tf.functions on purpose; TensorFlow's retracing warnings are noise.
tf.get_logger().setLevel('ERROR')

TESTHOSTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'scripts',
                         'testhosts.sh')


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


def hosts_up():
    """Brings up two network-namespace test hosts (scripts/testhosts.sh up --index auto) and
    returns the variables it printed (HORA_TESTHOSTS_INDEX, ..._SSH_CONFIG); exits 77
    (skipped) without root, ip netns or sshd. The caller takes them down."""
    if os.geteuid() != 0 or subprocess.run(['ip', 'netns', 'list'],
                                           capture_output=True).returncode != 0:
        print('skipped: needs root and ip netns (network-namespace test hosts)')
        sys.exit(77)
    if not os.path.exists('/usr/sbin/sshd'):
        print('skipped: no sshd')
        sys.exit(77)
    up = subprocess.run(['bash', TESTHOSTS, 'up', '--index', 'auto', '--hosts', '2'],
                        capture_output=True, text=True, timeout=180)
    assert up.returncode == 0, 'testhosts.sh up failed:\n' + up.stderr
    env = {}
    for word in shlex.split(up.stdout.replace(';', ' ')):
        if '=' in word:
            k, v = word.split('=', 1)
            env[k.replace('export ', '')] = v
    return env


@contextlib.contextmanager
def two_test_hosts(prefix):
    """hosts_up(), and a temporary folder: yields (the variables, the folder), and removes both
    at the end, also when the test fails."""
    env = hosts_up()
    index = env.get('HORA_TESTHOSTS_INDEX')
    tmp = tempfile.mkdtemp(prefix=prefix)
    try:
        yield env, tmp
    finally:
        subprocess.run(['rm', '-rf', tmp])
        if index:
            subprocess.run(['bash', TESTHOSTS, 'down', '--index', index], capture_output=True,
                           timeout=180)
