"""Finds the TensorFlow hora.tensorflow is built against, for meson (python/hora/tensorflow/
meson.build): the python of the venv scripts/venv.sh tf makes, at the path that script computes
(${HORA_VENV_ROOT:-~/.cache/hora/venvs}/tf-<first 12 hex digits of sha256(scripts/venvs/tf.txt)>),
or HORA_TF_PYTHON when set. Prints, one per line: the python, TensorFlow's version, its include
directory, its library directory, its library's file name, its C++ ABI flag. Exits 1 with the
reason on stderr when there is none (meson then leaves hora.tensorflow out)."""

import hashlib
import os
import subprocess
import sys

QUERY = r'''
import os, tensorflow as tf
print(tf.__version__)
print(tf.sysconfig.get_include())
print(tf.sysconfig.get_lib())
libs = [f[3:] for f in tf.sysconfig.get_link_flags() if f.startswith('-l:')]
print(libs[0] if libs else 'libtensorflow_framework.so.2')
print(int(tf.sysconfig.CXX11_ABI_FLAG))
'''


def venv_python(source_root):
    explicit = os.environ.get('HORA_TF_PYTHON')
    if explicit:
        return explicit
    with open(os.path.join(source_root, 'scripts', 'venvs', 'tf.txt'), 'rb') as f:
        digest = hashlib.sha256(f.read()).hexdigest()[:12]
    root = os.environ.get('HORA_VENV_ROOT') or os.path.join(os.path.expanduser('~'), '.cache',
                                                            'hora', 'venvs')
    venv = os.path.join(root, 'tf-' + digest)
    if not os.path.exists(os.path.join(venv, '.complete')):
        sys.exit('no TensorFlow venv at %s (make it with scripts/venv.sh tf)' % venv)
    return os.path.join(venv, 'bin', 'python')


def main():
    python = venv_python(sys.argv[1])
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3')
    try:
        out = subprocess.run([python, '-c', QUERY], capture_output=True, text=True, env=env,
                             timeout=300)
    except (OSError, subprocess.TimeoutExpired) as e:
        sys.exit('%s cannot run: %s' % (python, e))
    if out.returncode != 0:
        sys.exit('%s cannot import tensorflow: %s' % (python, out.stderr.strip()[-500:]))
    print(python)
    print(out.stdout.strip())


if __name__ == '__main__':
    main()
