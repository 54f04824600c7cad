"""hora.run (Horovod's horovod.run) from a plain process: each test runs ``python3 -c CODE`` (no
``__main__`` file, as in a notebook kernel), which calls hora.run with a lambda or a closure
that uses hora.torch's collectives, and prints what came back as JSON. Every rank's result
comes back in rank order; a rank's exception reaches the caller with that rank's traceback."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

DEADLINE = 240  # seconds for one caller process, far beyond what a job here takes


def caller(code, np=2, expect_rc=0):
    """Runs CODE with ``python3 -c`` (cwd: an empty temporary folder, so no script or module of
    this folder can be imported by name); returns its last stdout line parsed as JSON."""
    env = dict(os.environ)
    env.pop('HORA_RANK', None)
    out = subprocess.run([sys.executable, '-c', textwrap.dedent(code).replace('NP', str(np))],
                         capture_output=True, text=True, timeout=DEADLINE, env=env,
                         cwd=os.environ.get('TMPDIR', '/tmp'))
    assert out.returncode == expect_rc, 'rc %d\nstdout:\n%s\nstderr:\n%s' % (
        out.returncode, out.stdout, out.stderr)
    return json.loads(out.stdout.strip().splitlines()[-1]), out


@pytest.mark.parametrize('np', [1, 2, 3])
def test_lambda_returns_every_rank_in_order(np):
    got, _ = caller('''
        import json, hora
        res = hora.run(lambda base: (base, __import__('os').environ['HORA_RANK']), args=(7,),
                       num_proc=NP)
        print(json.dumps(res))
    ''', np=np)
    assert got == [[7, str(r)] for r in range(np)]


def test_closure_with_collectives():
    got, out = caller('''
        import json, hora

        def make(scale):
            def train(offset, extra=0):
                import torch
                import hora.torch as hvd
                hvd.init()
                t = torch.tensor([float(hvd.rank() + offset)])
                total = hvd.allreduce(t, op=hvd.Sum).item()
                print('rank %d says hello' % hvd.rank())
                res = {'rank': hvd.rank(), 'size': hvd.size(), 'sum': total * scale + extra}
                hvd.shutdown()
                return res
            return train

        print(json.dumps(hora.run(make(10), args=(1,), kwargs={'extra': 5}, num_proc=NP)))
    ''', np=3)
    # ranks 0..2 add 1..3 = 6, times 10, plus 5
    assert got == [{'rank': r, 'size': 3, 'sum': 65.0} for r in range(3)]
    # the ranks' output reaches the caller's stdout (horarun's prefixed lines)
    for r in range(3):
        assert 'rank %d says hello' % r in out.stdout


def test_failing_rank_raises_in_caller():
    got, out = caller('''
        import json, hora

        def work():
            import os
            rank = int(os.environ['HORA_RANK'])
            if rank == 1:
                def deep_in_rank_one():
                    raise KeyError('no such shard: %d' % rank)
                deep_in_rank_one()
            return rank

        try:
            hora.run(work, num_proc=NP)
            print(json.dumps('returned'))
        except KeyError as e:
            print(json.dumps({'type': type(e).__name__, 'args': list(e.args),
                              'cause': str(e.__cause__),
                              'cause_type': type(e.__cause__).__name__}))
    ''', np=3)
    assert got['type'] == 'KeyError' and got['args'] == ['no such shard: 1']
    assert got['cause_type'] == 'RemoteTraceback'
    assert 'rank 1' in got['cause'] and 'deep_in_rank_one' in got['cause']


def test_unpicklable_exception_and_exit():
    got, _ = caller('''
        import json, hora

        def work():
            import os
            class Local(Exception):
                def __reduce__(self):
                    raise TypeError('cannot pickle Local')
            if os.environ['HORA_RANK'] == '0':
                raise Local('local trouble')
            return 1

        try:
            hora.run(work, num_proc=NP)
        except RuntimeError as e:
            print(json.dumps([str(e), str(e.__cause__)]))
    ''', np=2)
    assert 'rank 0 failed' in got[0]
    assert 'local trouble' in got[1] and 'could not be pickled' in got[1]


def test_job_that_dies_without_result():
    got, _ = caller('''
        import json, hora

        def work():
            import os
            if os.environ['HORA_RANK'] == '1':
                os._exit(3)
            return 0

        try:
            hora.run(work, num_proc=NP)
        except RuntimeError as e:
            print(json.dumps(str(e)))
    ''', np=2)
    assert 'horarun exited with status' in got


def test_refused_arguments():
    got, _ = caller('''
        import json, hora
        errs = []
        for kw in ({'use_mpi': True}, {'hosts': 'localhost:1', 'hostfile': '/dev/null'}):
            try:
                hora.run(lambda: 0, **kw)
            except (NotImplementedError, ValueError) as e:
                errs.append(type(e).__name__ + ': ' + str(e))
        print(json.dumps(errs))
    ''')
    assert got[0].startswith('NotImplementedError') and 'MPI' in got[0]
    assert got[1].startswith('ValueError') and 'hostfile' in got[1]

