"""hora.torch's errors, each in a job of its own: this file runs in one process (not under
horarun) and starts the programs it checks with $HORARUN (set by test/python/meson.build)."""

import os
import subprocess
import sys
import textwrap

import pytest

HORARUN = os.environ.get('HORARUN')
PYTHON = sys.executable


def run(args, code, timeout=120, env=None):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run(args + [PYTHON, '-c', textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=timeout, env=e)


def test_use_before_init_raises_usage_error():
    p = run([], '''
        import torch
        import hora.torch as hvd
        assert not hvd.is_initialized()
        for call in (lambda: hvd.rank(), lambda: hvd.allreduce(torch.ones(2)),
                     lambda: hvd.allreduce_async_(torch.ones(2), name='x'),
                     lambda: hvd.broadcast_(torch.ones(2), 0), lambda: hvd.barrier()):
            try:
                call()
            except hvd.HoraUsageError as e:
                assert isinstance(e, hvd.HoraError) and isinstance(e, RuntimeError)
                print('usage error:', e)
            else:
                raise SystemExit('no error before init()')
    ''')
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.count('usage error:') == 5
    assert 'init()' in p.stdout


def test_shutdown_then_init_again_in_a_world_of_one():
    p = run([], '''
        import torch
        import hora.torch as hvd
        hvd.init()
        assert hvd.is_initialized() and hvd.size() == 1 and hvd.rank() == 0
        assert torch.equal(hvd.allreduce(torch.ones(3), op=hvd.Sum), torch.ones(3))
        hvd.shutdown()
        assert not hvd.is_initialized()
        hvd.shutdown()  # harmless twice
        hvd.init()
        assert torch.equal(hvd.allgather(torch.ones(2)), torch.ones(2))
        hvd.shutdown()
        print('ok')
    ''')
    assert p.returncode == 0 and 'ok' in p.stdout, p.stdout + p.stderr


@pytest.mark.skipif(not HORARUN, reason='needs $HORARUN')
def test_rank_that_dies_fails_the_others_naming_it():
    p = run([HORARUN, '-np', '3'], '''
        import os, sys, time
        import torch
        import hora.torch as hvd
        hvd.init()
        hvd.allreduce(torch.ones(4), name='warmup')
        if hvd.rank() == 1:
            os._exit(9)  # dies without a word
        try:
            for i in range(1000):
                hvd.allreduce(torch.ones(1000), name='step.%d' % i)
        except hvd.HoraError as e:
            print('rank %d caught %s: %s' % (hvd.rank(), type(e).__name__, e), flush=True)
            sys.exit(3)
        print('rank %d finished without error' % hvd.rank(), flush=True)
    ''', env={'HORA_TIMEOUT_SECONDS': '20'})
    out = p.stdout + p.stderr
    assert p.returncode != 0, out
    assert 'finished without error' not in out, out
    caught = [line for line in out.splitlines() if ' caught ' in line]
    assert caught, out
    for line in caught:
        assert 'rank 1' in line.split('caught', 1)[1], line


@pytest.mark.skipif(not HORARUN, reason='needs $HORARUN')
def test_mismatched_dtypes_raise_on_every_rank():
    p = run([HORARUN, '-np', '2'], '''
        import torch
        import hora.torch as hvd
        hvd.init()
        t = torch.ones(4, dtype=torch.float32 if hvd.rank() == 0 else torch.float64)
        try:
            hvd.allreduce(t, name='dtype.mismatch')
        except hvd.HoraMismatchError as e:
            print('rank %d mismatch: %s' % (hvd.rank(), e), flush=True)
        hvd.shutdown()
    ''')
    out = p.stdout + p.stderr
    assert p.returncode == 0, out
    lines = [l for l in out.splitlines() if ' mismatch: ' in l]
    assert len(lines) == 2, out
    for l in lines:
        assert 'float32' in l and 'float64' in l, l
