"""hora.run over SSH: two network-namespace test hosts (scripts/testhosts.sh up --index auto,
torn down at the end even when a test fails), the function called from a ``python3 -c``
process on this machine with ``hosts='h1:N,h2:N'``. The ranks fetch the function from the
caller's port and send their results back over the test network, not through files. Skipped
without root or ``ip netns``."""

import json
import os
import shlex
import subprocess
import sys
import textwrap

import pytest

TESTHOSTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'scripts',
                         'testhosts.sh')


@pytest.fixture(scope='module')
def hosts():
    if os.geteuid() != 0 or subprocess.run(['ip', 'netns', 'list'],
                                           capture_output=True).returncode != 0:
        pytest.skip('needs root and ip netns (network-namespace test hosts)')
    if not os.path.exists('/usr/sbin/sshd'):
        pytest.skip('no sshd')
    up = subprocess.run(['bash', TESTHOSTS, 'up', '--index', 'auto', '--hosts', '2'],
                        capture_output=True, text=True, timeout=180)
    assert up.returncode == 0, 'testhosts.sh up failed:\n' + up.stderr
    env = {}
    for word in shlex.split(up.stdout.replace(';', ' ')):
        if '=' in word:
            k, v = word.split('=', 1)
            env[k.replace('export ', '')] = v
    index = env.get('HORA_TESTHOSTS_INDEX')
    try:
        yield env
    finally:
        if index:
            subprocess.run(['bash', TESTHOSTS, 'down', '--index', index], capture_output=True,
                           timeout=180)


# --no-env-forwarding: remote ranks get only the contract and -x variables; hora.run names its
# own with -x, so the job still works.
@pytest.mark.parametrize('extra', [[], ['--no-env-forwarding']])
def test_closure_on_two_hosts(hosts, extra):
    config = hosts['HORA_TESTHOSTS_SSH_CONFIG']
    code = textwrap.dedent('''
        import json, socket, hora

        def make(scale):
            def work():
                import torch
                import hora.torch as hvd
                hvd.init()
                total = hvd.allreduce(torch.tensor([float(hvd.rank() + 1)]), op=hvd.Sum).item()
                res = [hvd.rank(), __import__('os').environ['HORA_HOSTNAME'], total * scale]
                hvd.shutdown()
                return res
            return work

        out = hora.run(make(2), hosts='h1:2,h2:2', num_proc=4,
                       horarun_args=['--ssh-config', %r] + %r)
        print(json.dumps(out))
    ''' % (config, extra))
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                         timeout=300, cwd='/tmp')
    assert out.returncode == 0, out.stdout + out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got == [[0, 'h1', 20.0], [1, 'h1', 20.0], [2, 'h2', 20.0], [3, 'h2', 20.0]]
