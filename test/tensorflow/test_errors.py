"""One process, no job: import errors (no TensorFlow; an op library built for another
TensorFlow), use before init, init twice, shutdown then init again."""

import os
import shutil
import subprocess
import sys
import tempfile

import tensorflow as tf

from harness import run

PYTHONPATH = os.environ['PYTHONPATH']


def python(code, executable=sys.executable, pythonpath=PYTHONPATH):
    env = dict(os.environ, PYTHONPATH=pythonpath)
    env.pop('HORA_RANK', None)
    return subprocess.run([executable, '-c', code], capture_output=True, text=True, env=env,
                          timeout=300, cwd=tempfile.gettempdir())


def test_without_tensorflow():
    # Debian's python3 has no TensorFlow (the framework lives in the venv only).
    if subprocess.run(['/usr/bin/python3', '-c', 'import tensorflow'],
                      capture_output=True).returncode == 0:
        print('  (skipped: /usr/bin/python3 imports tensorflow)')
        return
    for module in ('hora.tensorflow', 'hora.keras', 'hora.tensorflow.keras'):
        out = python('import %s' % module, executable='/usr/bin/python3')
        assert out.returncode != 0
        assert 'ImportError' in out.stderr, out.stderr
        for words in ('tensorflow-cpu==2.21.0', 'scripts/venv.sh tf', 'scripts/setup.sh'):
            assert words in out.stderr, (words, out.stderr)


def test_other_tensorflow_version():
    src = os.path.join(PYTHONPATH, 'hora')
    tmp = tempfile.mkdtemp(prefix='hora-tf-version-')
    try:
        dst = os.path.join(tmp, 'hora')
        shutil.copytree(src, dst, ignore=shutil.ignore_patterns('torch', 'spark', 'ray',
                                                               '__pycache__'))
        with open(os.path.join(dst, 'tensorflow', '_build_info.py'), 'w') as f:
            f.write("TF_VERSION = '2.15.1'\n")
        out = python('import hora.tensorflow', pythonpath=tmp)
        assert out.returncode != 0
        assert 'ImportError' in out.stderr
        assert 'TensorFlow 2.15.1' in out.stderr and 'TensorFlow %s' % tf.__version__ in \
            out.stderr, out.stderr
    finally:
        shutil.rmtree(tmp)


def test_use_before_init_init_twice_and_again():
    code = '''
import tensorflow as tf
import hora.tensorflow as hvd
try:
    hvd.rank()
except hvd.HoraUsageError as e:
    assert 'init' in str(e), str(e)
else:
    raise AssertionError('rank() before init() worked')
try:
    hvd.allreduce(tf.constant([1.0]))
except hvd.HoraUsageError as e:
    pass
else:
    raise AssertionError('allreduce before init() worked')
hvd.init(); hvd.init()
assert hvd.allreduce(tf.constant([3.0]), op=hvd.Sum).numpy()[0] == 3.0
hvd.shutdown(); hvd.shutdown()
assert not hvd.is_initialized()
hvd.init()
assert hvd.size() == 1 and hvd.allreduce(tf.constant([2.0])).numpy()[0] == 2.0
hvd.shutdown()
print('done')
'''
    out = python(code)
    assert out.returncode == 0 and 'done' in out.stdout, out.stdout + out.stderr


def test_a_rank_that_dies_is_named():
    tmp = tempfile.mkdtemp(prefix='hora-tf-dies-')
    try:
        script = os.path.join(tmp, 'dies.py')
        with open(script, 'w') as f:
            f.write('''
import os, tensorflow as tf
import hora.tensorflow as hvd
hvd.init()
if hvd.rank() == 1:
    os._exit(3)
hvd.allreduce(tf.constant([1.0]), name='never')
''')
        env = dict(os.environ, PYTHONPATH=PYTHONPATH)
        env.pop('HORA_RANK', None)
        out = subprocess.run([os.environ['HORARUN'], '-np', '2', sys.executable, script],
                             capture_output=True, text=True, env=env, timeout=300, cwd=tmp)
        assert out.returncode == 3, (out.returncode, out.stderr[-2000:])
        assert 'rank 1' in out.stderr and 'exited with code 3' in out.stderr, out.stderr[-2000:]
    finally:
        shutil.rmtree(tmp)


run(globals())
