"""hora.ray on real Ray clusters that this test starts and stops (suite 'ray').

    ray_test.py CASE     (CASE: local, actor_fails, two_hosts)

Run with the engines venv's Python (test/spark/run_engine.sh); exits 77 (skipped) without ray,
or, for two_hosts, without root and `ip netns`. `local` and `actor_fails` start a Ray instance
in this process (ray.init); two_hosts runs `ray start --head` in one test host's namespace and
`ray start --address` in another's, and the driver in the head's namespace. Each case checks
that nothing is left: no Ray process, actor or rank that was not there before, no /dev/shm
segment of hora's. Every wait has a deadline.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import traceback

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'spark'))
from spark_test import (Leftovers, Output, check, check_numbers, check_shm,  # noqa: E402
                        numbers, our_processes, skip, testhosts, wait_for)

try:
    import ray  # noqa: F401
except ImportError:
    skip('no ray in %s: make the venv with scripts/venv.sh engines' % sys.executable)

import cloudpickle  # noqa: E402
import spark_test  # noqa: E402

import hora.ray  # noqa: E402

# The ranks cannot import test/spark/: its functions travel by value, like this file's.
cloudpickle.register_pickle_by_value(spark_test)

OURS = re.compile(r'raylet|gcs_server|ray::|ray/_private|ray/dashboard|ray/autoscaler|'
                  r'default_worker\.py|hora\.driver\._rank')


def ray_processes():
    return our_processes(OURS)


def leftovers():
    return Leftovers(OURS, 'Ray process, actor or rank')


class Captured(object):
    """What the job prints (the driver writes to sys.stdout/sys.stderr), collected and echoed."""

    def __enter__(self):
        self.saved = sys.stdout, sys.stderr
        sys.stdout = sys.stderr = self.out = Output()
        return self.out

    def __exit__(self, *exc):
        sys.stdout, sys.stderr = self.saved


def start_local(temp):
    # On loopback: Ray need not probe a public address for the node's own.
    ray.init(num_cpus=2, include_dashboard=False, object_store_memory=150 * 1000 * 1000,
             _node_ip_address='127.0.0.1', _temp_dir=temp,
             runtime_env={'env_vars': {'PYTHONPATH': os.environ['PYTHONPATH']}})


def kills_its_actor_on_rank_1():
    import os
    import signal
    import time
    import hora.torch as hvd
    hvd.init()
    if hvd.rank() == 1:
        os.kill(os.getppid(), signal.SIGKILL)  # the actor that runs this rank dies
        # ... and this rank with it (its stdin's end, PR_SET_PDEATHSIG): it must not reach the
        # allreduce first, which would let the job finish.
        time.sleep(120)
        return 'rank 1 outlived its actor'
    import torch
    hvd.allreduce(torch.ones(2), name='never')
    return 'rank 0 was not aborted'


def raises_on_rank_0():
    import hora.torch as hvd
    hvd.init()
    if hvd.rank() == 0:
        raise KeyError('rank 0 has no such key')
    import torch
    hvd.allreduce(torch.ones(2), name='never')


def case_local():
    left = leftovers()
    temp = tempfile.mkdtemp(prefix='hora-ray-')
    try:
        start_local(temp)
        executor = hora.ray.RayExecutor(hora.ray.RayExecutor.create_settings(timeout_s=60),
                                        num_workers=2, cpus_per_worker=1)
        executor.start()
        try:
            results = executor.run(numbers, args=(10,))
            check_numbers(results, [2], None)
            # The ranks' output reaches the driver prefixed as horarun prefixes it; hora's own
            # log shows shared memory between the node's two ranks.
            executor.env_vars['HORA_LOG_LEVEL'] = 'debug'
            with Captured() as out:
                executor.run(numbers, args=(1,))
            del executor.env_vars['HORA_LOG_LEVEL']
            check(re.search(r'^\[1\]<stdout>:rank 1 of 2 says hello$', out.text(), re.M),
                  'rank 1\'s output reached the driver prefixed [1]<stdout>:')
            check_shm(out.text(), range(2), 2)
            both = executor.execute(lambda _: __import__('os').environ['HORA_RANK'])
            check(both == ['0', '1'], 'execute() runs on every worker as a rank: %s' % both)
            pid = executor.execute_single(lambda _: __import__('os').getpid())
            check(pid == executor.nodes[0][3], 'execute_single() runs in the first actor')
        finally:
            executor.shutdown()
        # An actor's process calls itself ray::_Worker (its class): none is left while Ray runs.
        wait_for(60, 'the actors\' processes to end',
                 lambda: not [c for c in ray_processes().values() if 'ray::_Worker' in c])
        check(True, 'shutdown() leaves no actor process while Ray still runs')
    finally:
        if ray.is_initialized():
            ray.shutdown()
        shutil.rmtree(temp, ignore_errors=True)
    left.check()


def case_actor_fails():
    left = leftovers()
    temp = tempfile.mkdtemp(prefix='hora-ray-')
    try:
        start_local(temp)
        executor = hora.ray.RayExecutor(2)
        executor.start()
        try:
            try:
                executor.run(raises_on_rank_0)
                raise AssertionError('run() returned though rank 0 raised')
            except hora.ray.RankError as e:
                print('the driver raised:\n%s' % e)
                check(e.rank == 0 and 'rank 0 on host' in str(e), 'the error names rank 0')
                check("KeyError: 'rank 0 has no such key'" in str(e) and
                      'raises_on_rank_0' in str(e), 'and carries its traceback')
            try:
                executor.run(kills_its_actor_on_rank_1)
                raise AssertionError('run() returned though rank 1\'s actor died')
            except hora.ray.RankError as e:
                print('the driver raised:\n%s' % e)
                check(e.rank == 1, 'the actor that died is named by its rank (1)')
                check('rank 0 was not aborted' not in str(e), 'rank 0 was aborted')
        finally:
            executor.shutdown()
    finally:
        if ray.is_initialized():
            ray.shutdown()
        shutil.rmtree(temp, ignore_errors=True)
    left.check()


def driver_two_hosts(address):
    """The driver of two_hosts, run in the head's namespace (a Ray driver needs a local raylet)."""
    ray.init(address=address)
    try:
        executor = hora.ray.RayExecutor(4, cpus_per_worker=1, env_vars={'HORA_LOG_LEVEL': 'debug'})
        executor.start()
        try:
            with Captured() as out:
                results = executor.run(numbers, args=(10,))
            order = [results[0]['host'], results[2]['host']]
            check(len(set(order)) == 2, 'ranks on both nodes: %s' % order)
            check_numbers(results, [2, 2], order)
            check_shm(out.text(), range(4), 2)
            check(re.search(r'^\[0\]<stderr>:.*Gloo mesh connected \(global 4, local 2, cross 2',
                            out.text(), re.M), 'Gloo connects the nodes (global 4, cross 2)')
        finally:
            executor.shutdown()
    finally:
        ray.shutdown()


def case_two_hosts():
    if os.geteuid() != 0:
        skip('two_hosts needs root (network namespaces)')
    left = leftovers()
    index = None
    try:
        env = dict(line.split('=', 1) for line in
                   testhosts('up', '--index', 'auto', '--hosts', '2').split())
        index = env['HORA_TESTHOSTS_INDEX']
        net = '198.18.%s' % index
        head = '%s.11' % net
        temp = os.path.join(env['HORA_TESTHOSTS_DIR'], 'ray')
        ray_bin = os.path.join(os.path.dirname(sys.executable), 'ray')
        common = ['--num-cpus', '2', '--object-store-memory', '150000000', '--temp-dir', temp,
                  '--disable-usage-stats']
        renv = dict(os.environ, RAY_AUTH_MODE='disabled')

        def in_host(i, *argv, **kwargs):
            return subprocess.run(['ip', 'netns', 'exec', 'hora%s-h%d' % (index, i)] + list(argv),
                                  env=renv, stdin=subprocess.DEVNULL, **kwargs)
        in_host(1, ray_bin, 'start', '--head', '--node-ip-address', head, '--port', '6379',
                '--include-dashboard', 'false', *common, check=True, timeout=180)
        in_host(2, ray_bin, 'start', '--address', '%s:6379' % head, '--node-ip-address',
                '%s.12' % net, *common, check=True, timeout=180)
        done = in_host(1, sys.executable, os.path.abspath(__file__), '_driver_two_hosts',
                       '%s:6379' % head, timeout=420)
        check(done.returncode == 0, 'the driver in the head\'s namespace passed')
    finally:
        if index is not None:
            testhosts('down', '--index', index)  # ends every process in the namespaces
    left.check()


CASES = {name[len('case_'):]: f for name, f in list(globals().items())
         if name.startswith('case_')}

if __name__ == '__main__':
    name = sys.argv[1] if len(sys.argv) > 1 else ''
    try:
        if name == '_driver_two_hosts':
            driver_two_hosts(sys.argv[2])
        elif name in CASES:
            CASES[name]()
        else:
            sys.exit('usage: ray_test.py CASE (%s)' % ', '.join(sorted(CASES)))
    except AssertionError as e:
        traceback.print_exc()
        print('FAIL: %s' % e)
        sys.exit(1)
    print('PASS: %s' % name)
