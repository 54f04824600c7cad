"""hora.torch's CUDA paths as whole jobs, each started here with $HORARUN: more ranks on a host
than it has GPUs, two ranks forced onto one GPU, and a bad HORA_GPU_OPERATIONS each end in hora's
own error saying what to change (never NCCL's bare one, never a hang), and the host-staged path
runs where ranks share a GPU. Skipped where torch sees no GPU."""

import os
import subprocess
import sys
import textwrap

import pytest
import torch

HORARUN = os.environ.get('HORARUN')
PYTHON = sys.executable

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason='torch sees no GPU')

# Every rank reduces a CUDA tensor on its own GPU (local rank), as a Horovod script does.
PROGRAM = '''
    import torch
    import hora.torch as hvd
    hvd.init()
    dev = torch.device('cuda', hvd.local_rank() % torch.cuda.device_count())
    out = hvd.allreduce(torch.ones(4, device=dev), op=hvd.Sum, name='x')
    assert out.device == dev and out.sum().item() == 4 * hvd.size(), out
    print('rank %d ok' % hvd.rank())
'''


def run(np, env, timeout=180):
    e = dict(os.environ)
    e.update(env)
    p = subprocess.run([HORARUN, '-np', str(np), PYTHON, '-c', textwrap.dedent(PROGRAM)],
                       capture_output=True, text=True, timeout=timeout, env=e)
    return p.returncode, p.stdout + p.stderr


def needs_nccl():
    import hora.torch as hvd
    if not hvd.nccl_built():
        pytest.skip('libhora was built without NCCL')


def test_more_ranks_than_gpus_is_hora_error():
    needs_nccl()
    n = torch.cuda.device_count()
    rc, out = run(n + 1, {'HORA_GPU_OPERATIONS': 'nccl'})
    print(out)
    assert rc != 0
    assert 'local rank %d would use CUDA device %d' % (n, n) in out
    assert 'HORA_GPU_OPERATIONS=host' in out


def test_two_ranks_on_one_gpu_is_hora_error():
    needs_nccl()
    rc, out = run(2, {'HORA_GPU_OPERATIONS': 'nccl', 'HORA_CUDA_DEVICE': '0'})
    print(out)
    assert rc != 0
    assert 'two ranks of' in out and 'on one GPU' in out
    assert 'give each rank its own GPU' in out


def test_host_path_with_ranks_sharing_a_gpu():
    rc, out = run(torch.cuda.device_count() + 1, {'HORA_GPU_OPERATIONS': 'host'})
    print(out)
    assert rc == 0, out
    assert out.count(' ok') == torch.cuda.device_count() + 1


def test_bad_gpu_operations_value():
    rc, out = run(1, {'HORA_GPU_OPERATIONS': 'gloo'})
    print(out)
    assert rc != 0
    assert 'HORA_GPU_OPERATIONS="gloo" is not a path for CUDA tensors: use nccl' in out
