"""Start-up and training speed on a standalone Spark cluster across 2 test hosts:
hora.spark.run vs Spark's own TorchDistributor (torchrun on barrier tasks, DDP over gloo) vs
Horovod 0.28.1's horovod.spark.run (when it runs with this pyspark).

    spark_start_bench.py STATE_FILE [--repeats 3] [--steps 20] [--contenders hora,td,horovod]

Run by bench/spark_start.sh (scripts/bench.sh spark_start) with the engines venv's Python and a
PYTHONPATH holding hora's build, pandas/pyarrow (TorchDistributor's mapInArrow needs them) and
Horovod's unpacked site. Every contender runs the same function (train below): the same MLP,
batch, seed and number of steps, one rank per test host, one thread per rank. The contenders
take turns on one SparkSession (the executors are already up for all of them alike), starting
one further on each repeat, so that a busy minute of the shared machine falls on all alike.

What is measured, all on one clock (the test hosts are namespaces of this machine):
  first   run() called -> rank 0's first collective (a 1-element allreduce after init) done
  total   run() called -> run() returned, for the whole 20-step job
  steps/s steps 2..N of rank 0 (the first step is warm-up for every contender)
and, to say where the time goes, rank 0's own marks: the function entered (the process exists
and has unpickled it), the framework imported, init done.

The master and the workers run in the test hosts' namespaces (as test/spark/spark_test.py starts
them), and so does the driver (in h1's: see outer()); STATE_FILE gets the test hosts' index as
soon as they are up, so that the shell can take
them down (and every Spark daemon with them) even when this process is killed.
"""

import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The cluster's daemons start as the standalone test starts them.
sys.path.insert(0, os.path.join(ROOT, 'test', 'spark'))
from spark_test import reachable, spark_class  # noqa: E402


def log(msg):
    print('spark_start: ' + msg, file=sys.stderr, flush=True)


def wait_for(seconds, what, probe):
    deadline = time.monotonic() + seconds
    while not probe():
        if time.monotonic() > deadline:
            raise RuntimeError('timed out after %d s waiting for %s' % (seconds, what))
        time.sleep(0.2)


# ---- the training function every contender runs ----------------------------------------------

def _ancestors():
    """(start time, short command line) of this process and its ancestors up to the executor's
    JVM, from /proc: when each process of the contender's launch chain came to be."""
    import os
    import time
    # A process's start is in clock ticks since boot; /proc/stat's btime is whole seconds, too
    # coarse here, so the boot's epoch comes from the clock itself.
    boot = time.time() - time.clock_gettime(time.CLOCK_BOOTTIME)
    hz = os.sysconf('SC_CLK_TCK')
    chain, pid = [], os.getpid()
    while pid > 1 and len(chain) < 8:
        with open('/proc/%d/stat' % pid) as f:
            fields = f.read().rsplit(')', 1)[1].split()
        with open('/proc/%d/cmdline' % pid, 'rb') as f:
            argv = f.read().decode('utf-8', 'replace').split('\0')
        name = ' '.join(a for a in argv[1:4] if a and not a.startswith('-')) or argv[0]
        if 'java' in argv[0]:
            break
        chain.append((boot + int(fields[19]) / hz, os.path.basename(argv[0]) + ' ' + name[:60]))
        pid = int(fields[1])
    return chain



def train(framework, steps):
    """One rank: init, a first 1-element allreduce, then `steps` SGD steps of a small MLP on a
    fixed random batch. Returns rank 0's (every rank's) time marks and steps/s."""
    import time
    marks = {'entered': time.time()}
    import torch
    torch.set_num_threads(1)  # the test hosts share this machine's 2 cores
    if framework == 'ddp':
        import torch.distributed as dist
        marks['imported'] = time.time()
        dist.init_process_group('gloo')
        rank = dist.get_rank()
        marks['init'] = time.time()
        dist.all_reduce(torch.zeros(1))
    else:
        if framework.startswith('hora'):
            import hora.torch as hvd
        else:
            import horovod.torch as hvd
        marks['imported'] = time.time()
        hvd.init()
        rank = hvd.rank()
        marks['init'] = time.time()
        hvd.allreduce(torch.zeros(1), name='first')
    marks['first'] = time.time()

    def mlp():
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(),
                                   torch.nn.Linear(256, 256), torch.nn.ReLU(),
                                   torch.nn.Linear(256, 10))

    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    if framework == 'ddp':
        model = torch.nn.parallel.DistributedDataParallel(model)  # broadcasts rank 0's weights
    else:
        hvd.broadcast_parameters(model.state_dict(), root_rank=0)
        # hora_groups1: every gradient of a step in one grouped allreduce (Horovod's groups=1),
        # as DDP's one bucket holds this model's 1 MB of gradients.
        opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters(),
                                       groups=1 if framework == 'hora_groups1' else None)
    g = torch.Generator().manual_seed(rank)
    x = torch.randn(64, 784, generator=g)
    y = torch.randint(0, 10, (64,), generator=g)
    loss_fn = torch.nn.CrossEntropyLoss()

    def steps_per_s(model, opt):
        """Steps 2..steps a second (the first is warm-up), and this process's CPU time (every
        thread: the framework's communication threads too) per step in ms."""
        for step in range(steps):
            if step == 1:
                t1, c1 = time.time(), time.process_time()
            opt.zero_grad()
            loss_fn(model(x), y).backward()
            opt.step()
        return (steps - 1) / (time.time() - t1), (time.process_time() - c1) * 1e3 / (steps - 1)

    # On a loaded machine the CPU a step costs varies far less than its wall time.
    marks['steps_per_s'], marks['cpu_ms'] = steps_per_s(model, opt)
    # The same steps on a local copy with a plain optimizer: what this rank's arithmetic alone
    # allows (no contender can beat it; the gap to steps_per_s is the communication's share).
    local = mlp()
    marks['local_steps_per_s'], marks['local_cpu_ms'] = steps_per_s(
        local, torch.optim.SGD(local.parameters(), lr=0.01))
    marks['chain'] = _ancestors()
    marks['returned'] = time.time()
    if framework == 'ddp':
        dist.destroy_process_group()
    return marks


def _warm_up(_):
    import pandas  # noqa: F401
    import pyarrow  # noqa: F401
    import torch  # noqa: F401
    yield 0


# ---- the contenders: each returns rank 0's marks ------------------------------------------------

def run_hora(steps, env=None, framework='hora'):
    import hora.spark
    sink = open(os.devnull, 'w')
    return hora.spark.run(train, args=(framework, steps), num_proc=2, stdout=sink, stderr=sink,
                          start_timeout=120, env=env)[0]


def run_td(steps):
    from pyspark.ml.torch.distributor import TorchDistributor
    return TorchDistributor(num_processes=2, local_mode=False, use_gpu=False).run(
        train, 'ddp', steps)


class Tail(object):
    """The last lines a contender's ranks printed, for its error."""

    def __init__(self):
        self.lines = []

    def write(self, text):
        self.lines = (self.lines + text.splitlines())[-30:]

    def flush(self):
        pass


def run_horovod(steps):
    import horovod.spark
    out = Tail()
    try:
        return horovod.spark.run(train, args=('horovod', steps), num_proc=2, use_gloo=True,
                                 stdout=out, stderr=out, start_timeout=120, verbose=0)[0]
    except Exception as e:
        raise RuntimeError('%s\nthe ranks\' last lines:\n%s' % (e, '\n'.join(out.lines)))


CONTENDERS = {
    'hora': ('hora.spark.run', run_hora),
    'td': ('TorchDistributor', run_td),
    'horovod': ('horovod.spark.run', run_horovod),
    # Not run by default: hora with another engine cycle, or all of a step's gradients in one
    # grouped allreduce (where a step's communication goes).
    'hora_c1': ('hora, cycle 1 ms', lambda steps: run_hora(steps, {'HORA_CYCLE_TIME_MS': '1'})),
    'hora_c50': ('hora, cycle 50 ms', lambda steps: run_hora(steps, {'HORA_CYCLE_TIME_MS': '50'})),
    'hora_groups1': ('hora, groups=1', lambda steps: run_hora(steps, framework='hora_groups1')),
}


# ---- the cluster (as test/spark/spark_test.py starts it) ----------------------------------------

def testhosts(*args):
    return subprocess.run([os.path.join(ROOT, 'scripts', 'testhosts.sh')] + list(args),
                          check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          timeout=120).stdout.decode()


def start_daemons(index, work):
    net = '198.18.%s' % index
    hosts = ['%s.11' % net, '%s.12' % net]
    os.makedirs(work, exist_ok=True)
    logf = open(os.path.join(work, 'daemons.log'), 'ab')
    daemons = [spark_class('hora%s-h1' % index, hosts[0], logf,
                           'org.apache.spark.deploy.master.Master',
                           '--host', hosts[0], '--port', '7077', '--webui-port', '0')]
    wait_for(60, 'the Spark master on %s:7077' % hosts[0], lambda: reachable(hosts[0], 7077))
    # One core per worker: the 2-task barrier stage puts one rank on each host.
    for i, h in enumerate(hosts):
        daemons.append(spark_class('hora%s-h%d' % (index, i + 1), h, logf,
                                   'org.apache.spark.deploy.worker.Worker',
                                   'spark://%s:7077' % hosts[0], '--host', h, '--cores', '1',
                                   '--memory', '1g', '--webui-port', '0',
                                   '--work-dir', os.path.join(work, 'w%d' % i)))
    return hosts, daemons


def session(master, driver):
    from pyspark.sql import SparkSession
    os.environ['PYSPARK_PYTHON'] = sys.executable
    return (SparkSession.builder.master(master).appName('hora-spark-start-bench')
            .config('spark.driver.memory', '512m').config('spark.executor.memory', '512m')
            .config('spark.executorEnv.PYTHONPATH', os.environ['PYTHONPATH'])
            .config('spark.executorEnv.OMP_NUM_THREADS', '1')
            .config('spark.driver.host', driver).config('spark.driver.bindAddress', driver)
            .config('spark.executor.cores', '1').config('spark.cores.max', '2')
            .config('spark.ui.enabled', 'false').config('spark.ui.showConsoleProgress', 'false')
            .config('spark.python.worker.reuse', 'true')
            .getOrCreate())


# ---- the table ----------------------------------------------------------------------------------

def stats(values):
    values = [v for v in values if v is not None]
    if not values:
        return None, None, None
    return statistics.median(values), min(values), max(values)


def fmt(v, digits=2):
    return '-' if v is None else '%.*f' % (digits, v)


def report(results, order, repeats, steps, load_before, load_after):
    td = results.get('td', {})
    td_first = stats(td.get('first', []))[0]
    td_sps = stats(td.get('sps', []))[0]
    print('load average before: %s   after: %s' % (load_before, load_after))
    print()
    row = '%-20s %16s %12s %14s %16s %10s %8s'
    print(row % ('contender', 'first coll. (s)', 'min-max', 'job total (s)', 'steps/s (2..%d)' %
                 steps, 'first / TD', 'sps / TD'))
    for k in order:
        r = results[k]
        f, flo, fhi = stats(r['first'])
        t, _, _ = stats(r['total'])
        s, _, _ = stats(r['sps'])
        ok = len([v for v in r['first'] if v is not None])
        name = CONTENDERS[k][0] + ('' if ok == repeats else ' (%d/%d ok)' % (ok, repeats))
        print(row % (name, fmt(f), '%s-%s' % (fmt(flo), fmt(fhi)), fmt(t), fmt(s, 0),
                     fmt(f / td_first if f and td_first else None),
                     fmt(s / td_sps if s and td_sps else None)))
    print()
    print('a step\'s cost on rank 0 (medians): CPU time of the rank\'s process per step (every '
          'thread), and the same steps with no communication (the rank alone, plain optimizer)')
    row = '%-20s %14s %22s %22s'
    print(row % ('contender', 'CPU ms/step', 'alone: CPU ms/step', 'alone: steps/s'))
    for k in order:
        r = results[k]
        print(row % (CONTENDERS[k][0], fmt(stats(r['cpu'])[0], 1), fmt(stats(r['local_cpu'])[0], 1),
                     fmt(stats(r['local'])[0], 0)))
    print()
    print('where the time to the first collective goes (medians, s; rank 0\'s marks):')
    row = '%-20s %20s %12s %10s %18s %16s'
    print(row % ('contender', 'run() -> fn entered', 'import', 'init', 'first allreduce',
                 'fn end -> return'))
    for k in order:
        r = results[k]
        print(row % (CONTENDERS[k][0], fmt(stats(r['enter'])[0]), fmt(stats(r['import'])[0]),
                     fmt(stats(r['init'])[0]), fmt(stats(r['coll'])[0]),
                     fmt(stats(r['back'])[0])))
    print()
    print('rank 0\'s process chain, each process\'s start after run() was called (s), in the run '
          'with the median time to the first collective:')
    for k in order:
        r = results[k]
        ok = [(f, c) for f, c in zip([v for v in r['first'] if v is not None], r['chains'])]
        if not ok:
            continue
        ok.sort(key=lambda fc: fc[0])
        print('  %s:' % CONTENDERS[k][0])
        for start, name in reversed(ok[len(ok) // 2][1]):
            print('    %+8.2f  %s' % (start, name))
    for k in order:
        for e in results[k]['errors'][:1]:
            print('\n%s failed (%d of %d runs); the first error:\n%s' % (
                CONTENDERS[k][0], len(results[k]['errors']), repeats, e))


def outer(a):
    """Brings the test hosts up, runs the benchmark in h1's namespace, takes them down."""
    index = None
    try:
        env = dict(line.split('=', 1) for line in
                   testhosts('up', '--index', 'auto', '--hosts', '2').split())
        index = env['HORA_TESTHOSTS_INDEX']
        with open(a.state_file, 'w') as f:
            f.write(index + '\n')
        # The driver runs on h1 (beside the master), not in this namespace: horovod.spark.run
        # gives its ranks the driver's address on the interface the executors share (eth0
        # here), which must exist on the driver and lead to them; this namespace's eth0 does not.
        cmd = ['ip', 'netns', 'exec', 'hora%s-h1' % index, sys.executable,
               os.path.abspath(__file__), a.state_file, '--inner', index,
               '--work', os.path.join(env['HORA_TESTHOSTS_DIR'], 'spark'),
               '--repeats', str(a.repeats), '--steps', str(a.steps), '--contenders', a.contenders]
        inner = subprocess.Popen(cmd)
        try:
            return inner.wait()
        finally:
            if inner.poll() is None:
                inner.terminate()
                try:
                    inner.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    inner.kill()
    finally:
        if index is not None:
            testhosts('down', '--index', index)
            os.unlink(a.state_file)


def inner(a):
    """The cluster's daemons and the driver, from h1's namespace."""
    order = a.contenders.split(',')
    daemons = []
    spark = None
    try:
        hosts, daemons = start_daemons(a.inner, a.work)
        spark = session('spark://%s:7077' % hosts[0], hosts[0])
        sc = spark.sparkContext
        wait_for(120, 'two executors', lambda: sc._jsc.sc().getExecutorMemoryStatus().size() >= 3)
        log('cluster up: master and driver on %s, workers %s' % (hosts[0], ' '.join(hosts)))
        # Not for any contender to pay alone: the executors' first Python workers, and torch,
        # pandas and pyarrow read from disk once.
        sc.parallelize(range(2), 2).barrier().mapPartitions(_warm_up).collect()
        results = {k: {n: [] for n in ('first', 'total', 'sps', 'enter', 'import', 'init', 'coll',
                                       'back', 'errors', 'local', 'chains', 'cpu', 'local_cpu')}
                   for k in order}
        load_before = os.getloadavg()
        for rep in range(a.repeats):
            for i in range(len(order)):
                k = order[(i + rep) % len(order)]
                r = results[k]
                t0 = time.time()
                try:
                    m = CONTENDERS[k][1](a.steps)
                except Exception as e:  # noqa: BLE001 (a contender's failure is a result)
                    r['errors'].append(''.join(traceback.format_exception_only(type(e), e))[:4000])
                    for n in ('first', 'total', 'sps'):
                        r[n].append(None)
                    log('%s run %d failed: %s' % (k, rep + 1, str(e)[:300]))
                    continue
                t1 = time.time()
                r['first'].append(m['first'] - t0)
                r['total'].append(t1 - t0)
                r['sps'].append(m['steps_per_s'])
                r['local'].append(m['local_steps_per_s'])
                r['cpu'].append(m['cpu_ms'])
                r['local_cpu'].append(m['local_cpu_ms'])
                r['chains'].append([(start - t0, name) for start, name in m['chain']])
                r['enter'].append(m['entered'] - t0)
                r['import'].append(m['imported'] - m['entered'])
                r['init'].append(m['init'] - m['imported'])
                r['coll'].append(m['first'] - m['init'])
                r['back'].append(t1 - m['returned'])
                log('%s run %d: first collective %.2f s, total %.2f s, %.0f steps/s' % (
                    k, rep + 1, m['first'] - t0, t1 - t0, m['steps_per_s']))
        load_after = os.getloadavg()
        report(results, order, a.repeats, a.steps, '%.2f %.2f %.2f' % load_before,
               '%.2f %.2f %.2f' % load_after)
    finally:
        if spark is not None:
            try:
                spark.stop()
            except Exception:  # noqa: BLE001 (the daemons go next regardless)
                pass
        for p in daemons:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except OSError:
                pass
            p.wait(timeout=30)
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('state_file')
    ap.add_argument('--repeats', type=int, default=3)
    ap.add_argument('--steps', type=int, default=20)
    ap.add_argument('--contenders', default='hora,td,horovod')
    ap.add_argument('--inner', help=argparse.SUPPRESS)  # the test hosts' index
    ap.add_argument('--work', help=argparse.SUPPRESS)
    a = ap.parse_args()
    # The shell's `timeout` sends SIGTERM: end through the finally blocks.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    sys.exit(inner(a) if a.inner else outer(a))


if __name__ == '__main__':
    main()
