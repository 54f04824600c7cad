"""hora.torch next to another Gloo. pip's torch links a Gloo of its own into libtorch_cpu and
exports its symbols; on the GPU machine libhora bound to that copy and init() failed (docs/gpu.md).
Here a library exporting Gloo's tcp::CreateDevice ($FOREIGN_GLOO, test/python/foreign_gloo/) is
preloaded into a two-rank job, ahead of every library the job loads later: the job must form
its Gloo mesh with libhora's own libgloo, and the foreign function must never run."""

import os
import subprocess
import sys
import textwrap

HORARUN = os.environ.get('HORARUN')
PYTHON = sys.executable

PROGRAM = '''
    import torch
    import hora.torch as hvd
    hvd.init()
    out = hvd.allreduce(torch.ones(3), op=hvd.Sum, name='x')
    assert out.tolist() == [2.0, 2.0, 2.0], out
    hvd.shutdown()
    print('ok')
'''


def test_libhora_binds_its_own_gloo():
    env = dict(os.environ, LD_PRELOAD=os.environ['FOREIGN_GLOO'])
    p = subprocess.run([HORARUN, '-np', '2', PYTHON, '-c', textwrap.dedent(PROGRAM)],
                       capture_output=True, text=True, timeout=240, env=env)
    out = p.stdout + p.stderr
    print(out)
    assert out.count('foreign_gloo: loaded') >= 2  # the preload reached both ranks
    assert 'called a foreign Gloo' not in out
    assert p.returncode == 0
    assert out.count('ok') == 2


def test_extension_lists_libgloo_before_torch():
    # Without DEEPBIND (HORA_TORCH_DEEPBIND=0) this order is what keeps libhora on its own Gloo:
    # the extension's libraries are searched breadth-first, its own list first.
    import glob
    import hora.torch
    ext = glob.glob(os.path.join(os.path.dirname(hora.torch.__file__), '_hora_torch*.so'))[0]
    needed = [line.split('[')[1].rstrip(']') for line in subprocess.run(
        ['readelf', '-d', ext], capture_output=True, text=True, check=True).stdout.splitlines()
        if '(NEEDED)' in line]
    print(needed)
    gloo = next(i for i, n in enumerate(needed) if n.startswith('libgloo'))
    torch_libs = [i for i, n in enumerate(needed) if n.startswith(('libtorch', 'libc10'))]
    assert torch_libs and gloo < min(torch_libs)
    assert needed.index('libhora.so.0') < gloo


def test_extension_exports_its_init_only():
    # The libraries loaded with the extension (libhora, libgloo) look up C++ library functions in
    # its scope before libstdc++'s: a copy the compiler emitted into the extension and exported
    # would be used instead of libstdc++'s. On the GPU machine (pip's torch, another compiler)
    # Gloo's thread crashed in such a copy, std::ostream::_M_insert<long>, whenever a peer closed
    # its connection (docs/gpu.md). python/src/torch_ops.map exports PyInit__hora_torch alone.
    import glob
    import hora.torch
    ext = glob.glob(os.path.join(os.path.dirname(hora.torch.__file__), '_hora_torch*.so'))[0]
    defined = [line.split()[-1] for line in subprocess.run(
        ['nm', '-D', '--defined-only', ext], capture_output=True, text=True,
        check=True).stdout.splitlines() if line.strip()]
    assert defined == ['PyInit__hora_torch'], defined
