"""hora.spark on real Spark clusters that this test starts and stops (suite 'spark').

    spark_test.py CASE     (CASE: rank_table, local_cluster, horarunner_local,
                            standalone_hosts)

Run with the engines venv's Python ($PYTHON, scripts/venv.sh engines); exits 77 (skipped) when
that venv or pyspark is missing, or, for standalone_hosts, without root and `ip netns`. Every
case checks that it left nothing behind: no Spark JVM, Python worker or rank process that was not
there before, no /dev/shm segment of hora's. Clusters are stopped in `finally` blocks, and the
test hosts (scripts/testhosts.sh) are taken down even when a check fails. Every wait has a
deadline.
"""

import os
import re
import shutil
import socket
import subprocess
import sys
import time
import traceback

SKIP = 77


def skip(why):
    print('skip: ' + why)
    sys.exit(SKIP)


try:
    import pyspark  # noqa: F401
except ImportError:
    skip('no pyspark in %s: make the venv with scripts/venv.sh engines' % sys.executable)

import hora.spark  # noqa: E402

SPARK_HOME = os.path.dirname(pyspark.__file__)
HORA_PYTHONPATH = os.environ['PYTHONPATH']


def check(cond, what):
    if not cond:
        raise AssertionError(what)
    print('ok: ' + what)
    sys.stdout.flush()


def wait_for(seconds, what, probe):
    deadline = time.monotonic() + seconds
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError('timed out after %d s waiting for %s' % (seconds, what))
        time.sleep(0.2)


# ---- what must not be left behind ----------------------------------------------------------------

OURS = re.compile(r'org\.apache\.spark|pyspark\.daemon|pyspark/daemon|pyspark\.worker|'
                  r'hora\.driver\._rank|spark-class')

# Every process this test starts inherits this variable (the clusters' daemons are started with
# os.environ, their executors, Python workers, Ray actors and ranks inherit it from them), so the
# leftover check counts this run's processes only: another job's Spark or Ray on the same machine
# (a benchmark, a second test run) is not this test's leftover. A daemon that cleared its
# environment would escape the check; none of Spark's or Ray's does.
RUN_MARK_NAME = 'SUITE_RUN_MARK'
os.environ.setdefault(RUN_MARK_NAME, '%d-%d' % (os.getpid(), time.time_ns()))
RUN_MARK = ('%s=%s' % (RUN_MARK_NAME, os.environ[RUN_MARK_NAME])).encode()


def _has_run_mark(pid):
    try:
        with open('/proc/%s/environ' % pid, 'rb') as f:
            return RUN_MARK in f.read().split(b'\0')
    except OSError:
        return False


def our_processes(pattern=OURS):
    """pid -> command line of every process of this run (RUN_MARK in its environment) matching
    pattern (default: Spark JVMs, Python workers and hora ranks)."""
    found = {}
    for pid in os.listdir('/proc'):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open('/proc/%s/cmdline' % pid, 'rb') as f:
                cmd = f.read().replace(b'\0', b' ').decode('utf-8', 'replace')
        except OSError:
            continue
        # The driver's own JVM (pyspark's gateway, "pyspark-shell") lives as long as this process.
        if pattern.search(cmd) and 'pyspark-shell' not in cmd and _has_run_mark(pid):
            found[int(pid)] = cmd
    return found


def hora_segments():
    return {n for n in os.listdir('/dev/shm') if n.startswith('hora-')}


class Leftovers(object):
    """What of ours runs and which segments exist now, to compare with at the end."""

    def __init__(self, pattern=OURS, what='Spark JVM, Python worker or rank process'):
        self.pattern = pattern
        self.what = what
        self.processes = set(our_processes(pattern))
        self.segments = hora_segments()

    def extra(self):
        return {p: c for p, c in our_processes(self.pattern).items() if p not in self.processes}

    def check(self):
        try:
            wait_for(60, 'the cluster\'s processes to end', lambda: not self.extra())
        except AssertionError:
            raise AssertionError('processes left behind: %s' % '\n'.join(
                '%d %s' % (p, c[:200]) for p, c in self.extra().items()))
        check(True, 'no %s left' % self.what)
        extra = hora_segments() - self.segments
        check(not extra, 'no /dev/shm segment of hora left (%s)' % (sorted(extra) or 'none'))


# ---- clusters -----------------------------------------------------------------------------------

def session(master, extra=None):
    from pyspark.sql import SparkSession
    os.environ['PYSPARK_PYTHON'] = sys.executable  # the executors' Python: this venv's
    builder = (SparkSession.builder.master(master).appName('hora-spark-test')
               .config('spark.driver.memory', '512m').config('spark.executor.memory', '512m')
               .config('spark.executorEnv.PYTHONPATH', HORA_PYTHONPATH)
               .config('spark.executorEnv.HORARUN', os.environ.get('HORARUN', ''))
               .config('spark.ui.enabled', 'false').config('spark.ui.showConsoleProgress', 'false')
               .config('spark.python.worker.reuse', 'true'))
    for k, v in (extra or {}).items():
        builder = builder.config(k, v)
    return builder.getOrCreate()


def stop_session(spark):
    app = spark.sparkContext.applicationId
    spark.stop()
    # local-cluster's workers keep each application's folder under SPARK_HOME/work.
    shutil.rmtree(os.path.join(SPARK_HOME, 'work', app), ignore_errors=True)


# ---- the ranks' functions ------------------------------------------------------------------------

def numbers(scale):
    """Each rank: its numbers, an allreduce and an allgather across the job."""
    import os
    import torch
    import hora.torch as hvd
    hvd.init()
    total = hvd.allreduce(torch.tensor([float(hvd.rank() + 1)]), op=hvd.Sum).item()
    hosts = hvd.allgather_object(os.environ['HORA_HOSTNAME'])
    print('rank %d of %d says hello' % (hvd.rank(), hvd.size()))
    result = dict(rank=hvd.rank(), size=hvd.size(), local_rank=hvd.local_rank(),
                  local_size=hvd.local_size(), cross_rank=hvd.cross_rank(),
                  cross_size=hvd.cross_size(), total=total * scale, hosts=hosts,
                  host=os.environ['HORA_HOSTNAME'])
    hvd.shutdown()
    return result


def fails_on_rank_1():
    import torch
    import hora.torch as hvd
    hvd.init()
    if hvd.rank() == 1:
        raise ValueError('rank 1 gives up on purpose')
    # Rank 0 waits in a collective rank 1 never joins: only the driver's abort ends it.
    hvd.allreduce(torch.ones(4), name='never')
    return 'rank 0 was not aborted'


class Output(object):
    """Collects what hora.spark.run prints (its stdout= and stderr=), and echoes it."""

    def __init__(self):
        self.lines = []

    def write(self, text):
        self.lines.extend(text.splitlines())
        sys.__stdout__.write(text)

    def flush(self):
        sys.__stdout__.flush()

    def text(self):
        return '\n'.join(self.lines)


def check_numbers(results, per_host, hosts):
    size = sum(per_host)
    check([r['rank'] for r in results] == list(range(size)), 'results come back ordered by rank')
    check(all(r['total'] == 10.0 * size * (size + 1) / 2 for r in results),
          'the allreduce summed every rank\'s value')
    rank = 0
    for host_index, n in enumerate(per_host):
        for local in range(n):
            r = results[rank]
            want = dict(size=size, local_rank=local, local_size=n, cross_rank=host_index,
                        cross_size=len(per_host))
            got = {k: r[k] for k in want}
            check(got == want, 'rank %d: %s' % (rank, got))
            if hosts is not None:
                check(r['host'] == hosts[host_index], 'rank %d on host %s' % (rank, r['host']))
            rank += 1
    check(all(r['hosts'] == results[0]['hosts'] for r in results), 'allgather agrees')


def check_shm(out, ranks, local_size):
    for r in ranks:
        pattern = (r'^\[%d\]<stderr>:.*shared memory between the %d local ranks: local'
                   % (r, local_size))
        check(re.search(pattern, out, re.M), 'rank %d reports shared memory among its host\'s '
              '%d ranks (hora\'s log)' % (r, local_size))


# ---- cases --------------------------------------------------------------------------------------

def case_local_cluster():
    """Every local-cluster check on one Spark session (two executor JVMs here): starting a
    cluster is most of each check's time on a small machine, and each step below also shows
    that the session runs the next job after the one before it (a failed one, one refused for
    slots). The barrier check's interval and tries are shortened for the slots step only in
    effect: they matter only when a stage lacks slots."""
    left = Leftovers()
    spark = session('local-cluster[2,1,1024]', {
        'spark.scheduler.barrier.maxConcurrentTasksCheck.interval': '1s',
        'spark.scheduler.barrier.maxConcurrentTasksCheck.maxFailures': '2'})
    try:
        results_by_rank(spark)
        rank_fails(spark)
        too_few_slots(spark)
        horarunner_on_cluster(spark)
    finally:
        stop_session(spark)
    left.check()


def results_by_rank(spark):
    out = Output()
    results = hora.spark.run(numbers, args=(10,), num_proc=2, stdout=out, stderr=out,
                             env={'HORA_LOG_LEVEL': 'debug'}, start_timeout=300)
    # Two executors on one machine: one host, two local ranks.
    check_numbers(results, [2], None)
    for r in range(2):
        check(re.search(r'^\[%d\]<stdout>:rank %d of 2 says hello$' % (r, r), out.text(),
                        re.M), 'rank %d\'s output reached the driver prefixed [%d]<stdout>:'
              % (r, r))
    check_shm(out.text(), range(2), 2)
    # A second job on the same executors (whose Python workers are reused): a fresh rank
    # process each time, so libhora starts clean.
    again = hora.spark.run(numbers, args=(1,), num_proc=2, stdout=out, stderr=out)
    check([r['total'] for r in again] == [3.0, 3.0], 'a second job on the same executors')


def rank_fails(spark):
    out = Output()
    start = time.monotonic()
    try:
        hora.spark.run(fails_on_rank_1, num_proc=2, stdout=out, stderr=out, start_timeout=300)
        raise AssertionError('hora.spark.run returned though rank 1 raised')
    except hora.spark.RankError as e:
        text = str(e)
        print('the driver raised:\n' + text)
        check(e.rank == 1, 'the error names rank 1')
        check(e.host and 'rank 1 on host %s' % e.host in text, 'and its host (%s)' % e.host)
        check('ValueError: rank 1 gives up on purpose' in text and 'fails_on_rank_1' in text,
              'and carries its traceback')
        check(isinstance(e.__cause__, ValueError), 'the rank\'s exception is the cause')
    # Rank 0 sat in an allreduce with a 30 s collective timeout: ended by the abort.
    print('the failure ended the job after %.1f s' % (time.monotonic() - start))
    check('rank 0 was not aborted' not in out.text(), 'rank 0 did not run on')
    # The same session runs the next job: nothing of the failed one is in the way.
    results = hora.spark.run(numbers, args=(1,), num_proc=2, stdout=out, stderr=out)
    check(len(results) == 2, 'the next job on the same cluster runs')


def too_few_slots(spark):
    """More ranks than the executors have task slots: said at once, not only when Spark gives
    up on the barrier stage (after 40 tries 15 s apart by default; here 2 tries 1 s apart)."""
    sc = spark.sparkContext
    # The block managers register before the scheduler counts the executors' cores: wait for
    # the count the check reads, or the message may say fewer than 2.
    wait_for(120, 'two executors with a task slot each',
             lambda: hora.spark._task_slots(sc) == 2)
    out = Output()
    start = time.monotonic()
    try:
        hora.spark.run(numbers, args=(1,), num_proc=3, stdout=out, stderr=out,
                       start_timeout=120)
        raise AssertionError('hora.spark.run ran 3 ranks on 2 task slots')
    except RuntimeError as e:
        text = str(e)
        print('the driver raised:\n' + text[:2000])
        check('slots' in text, 'the error says the stage lacked task slots')
    check(re.search(r'^hora\.spark\.run: 3 ranks need 3 free task slots at once \(one barrier '
                    r'stage\), and the executors registered so far have 2: Spark waits for '
                    r'more, checking every 1s up to 2 times', out.text(), re.M),
          'the driver said at once that 3 ranks need 3 task slots and there are 2')
    check(time.monotonic() - start < 100, 'the job ended when Spark gave up on the stage')
    results = hora.spark.run(numbers, args=(1,), num_proc=2, stdout=out, stderr=out)
    check(len(results) == 2, 'the next job on the same cluster runs')
    check(out.text().count('free task slots') == 1, 'and said nothing of slots for 2 ranks')


def runner_main(base=0):
    import hora.torch as hvd
    hvd.init()
    return {'rank': hvd.rank(), 'size': hvd.size(), 'value': base + hvd.rank()}


def horarunner_on_cluster(spark):
    value = hora.spark.HoraRunner(np=2).run(runner_main, base=7)
    check(value == {'rank': 0, 'size': 2, 'value': 7}, 'HoraRunner(np=2) on the cluster '
          'returns rank 0\'s value: %s' % value)


def case_horarunner_local():
    """HoraRunner without a cluster: np=0 is refused, np < 0 runs ranks on this machine
    through horarun."""
    left = Leftovers()
    try:
        hora.spark.HoraRunner(0)
        raise AssertionError('HoraRunner(0) was accepted')
    except ValueError as e:
        check('np=0' in str(e), 'HoraRunner(np=0) is refused: %s' % e)
    value = hora.spark.HoraRunner(np=-2).run(runner_main, base=40)
    check(value == {'rank': 0, 'size': 2, 'value': 40}, 'HoraRunner(np=-2) returns rank 0\'s '
          'value: %s' % value)
    left.check()


def case_rank_table():
    """The rank table from the engine's hosts, and the environment each rank gets, against
    horarun's contract (common/job_environment.h's kContract). No cluster needed."""
    from hora.driver import ranks
    infos = ranks.assign(['a', 'b', 'a', 'c', 'a'], {'a': 'host-a'})
    got = [(i.rank, i.local_rank, i.local_size, i.cross_rank, i.cross_size, i.host, i.host_index)
           for i in infos]
    # Slots 0, 2, 4 on a (ranks 0-2), slot 1 on b (rank 3), slot 3 on c (rank 4); local rank 0
    # lives on all three hosts, local ranks 1 and 2 on a alone.
    want = [(0, 0, 3, 0, 3, 'host-a', 0), (3, 0, 1, 1, 3, 'b', 1), (1, 1, 3, 0, 1, 'host-a', 0),
            (4, 0, 1, 2, 3, 'c', 2), (2, 2, 3, 0, 1, 'host-a', 0)]
    check(got == want, 'ranks follow the hosts in order of first appearance: %s' % got)
    header = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'common',
                          'job_environment.h')
    with open(header) as f:
        text = f.read()
    names = dict(re.findall(r'inline constexpr char (k\w+)\[\] = "(\w+)";', text))
    block = text[text.index('kContract[] = {'):]
    contract = {names[k] for k in re.findall(r'\b(k\w+),', block[:block.index('};')])}
    env = ranks.rank_environment(infos[1], 'h:1', '0' * 64, 30, 'host-a', 'hora-x')
    check(set(env) <= contract, 'every variable set is in horarun\'s contract')
    # Not set, and why: no interface is named (the route to the rendezvous chooses), there is
    # no Horovod HTTP rendezvous, no launcher probes a MASTER_PORT, no --log-level or --tcp.
    unset = {'HORA_IFACE', 'HOROVOD_GLOO_IFACE', 'GLOO_SOCKET_IFNAME', 'NCCL_SOCKET_IFNAME',
             'HOROVOD_GLOO_RENDEZVOUS_ADDR', 'HOROVOD_GLOO_RENDEZVOUS_PORT', 'MASTER_PORT',
             'HORA_LOG_LEVEL', 'NCCL_IB_DISABLE', 'OMP_NUM_THREADS'}
    check(contract - set(env) == unset, 'the rest of the contract is set: %s'
          % sorted(contract - set(env) - unset))
    check(env['HORA_CROSS_RANK'] == '1' and env['GROUP_WORLD_SIZE'] == '3' and
          env['HORA_HOSTNAME'] == 'b', 'values for rank 3 on host b')


def testhosts(*args):
    script = os.environ['TESTHOSTS']
    return subprocess.run([script] + list(args), check=True, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, timeout=120).stdout.decode()


def spark_class(namespace, address, log, *args):
    """A Spark daemon in a test host's namespace, bound to its address."""
    env = dict(os.environ, SPARK_HOME=SPARK_HOME, SPARK_DAEMON_MEMORY='256m',
               SPARK_LOCAL_IP=address)
    return subprocess.Popen(['ip', 'netns', 'exec', namespace,
                             os.path.join(SPARK_HOME, 'bin', 'spark-class')] + list(args),
                            env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                            start_new_session=True)


def reachable(address, port):
    try:
        with socket.create_connection((address, port), timeout=1):
            return True
    except OSError:
        return False


def case_standalone_hosts():
    if os.geteuid() != 0:
        skip('standalone_hosts needs root (network namespaces)')
    if subprocess.run(['ip', 'netns', 'list'], stdout=subprocess.DEVNULL,
                      stderr=subprocess.DEVNULL).returncode != 0:
        skip('ip netns is unavailable')
    left = Leftovers()
    index = None
    daemons = []
    work = None
    try:
        env = dict(line.split('=', 1) for line in
                   testhosts('up', '--index', 'auto', '--hosts', '2').split())
        index = env['HORA_TESTHOSTS_INDEX']
        net = '198.18.%s' % index
        hosts = ['%s.11' % net, '%s.12' % net]
        work = os.path.join(env['HORA_TESTHOSTS_DIR'], 'spark')
        os.makedirs(work, exist_ok=True)
        log = open(os.path.join(work, 'daemons.log'), 'ab')
        # The master on h1; one worker per host with 2 slots, each in its host's namespace.
        daemons.append(spark_class('hora%s-h1' % index, hosts[0], log, 'org.apache.spark.deploy.master.Master',
                                   '--host', hosts[0], '--port', '7077', '--webui-port', '0'))
        wait_for(60, 'the Spark master on %s:7077' % hosts[0], lambda: reachable(hosts[0], 7077))
        for i, h in enumerate(hosts):
            daemons.append(spark_class('hora%s-h%d' % (index, i + 1), h, log,
                                       'org.apache.spark.deploy.worker.Worker',
                                       'spark://%s:7077' % hosts[0], '--host', h, '--cores', '2',
                                       '--memory', '1g', '--webui-port', '0',
                                       '--work-dir', os.path.join(work, 'w%d' % i)))
        spark = session('spark://%s:7077' % hosts[0], {
            'spark.driver.host': '%s.1' % net, 'spark.driver.bindAddress': '%s.1' % net,
            'spark.executor.cores': '2', 'spark.cores.max': '4'})
        try:
            sc = spark.sparkContext
            wait_for(120, 'two executors', lambda: sc._jsc.sc().getExecutorMemoryStatus().size() >= 3)
            out = Output()
            results = hora.spark.run(numbers, args=(10,), num_proc=4, stdout=out, stderr=out,
                                     env={'HORA_LOG_LEVEL': 'debug'}, start_timeout=300)
            # Spark may put either host's tasks first; the ranks follow the hosts in that order.
            order = [results[0]['host'], results[2]['host']]
            check(sorted(order) == hosts, 'ranks on both test hosts: %s' % order)
            check_numbers(results, [2, 2], order)
            check_shm(out.text(), range(4), 2)
            for r in range(4):
                address = order[r // 2].replace('.', r'\.')
                check(re.search(r'^\[%d\]<stderr>:.*Gloo device on %s ' % (r, address),
                                out.text(), re.M),
                      'rank %d\'s Gloo device is on its host\'s address' % r)
            check(re.search(r'^\[0\]<stderr>:.*Gloo mesh connected \(global 4, local 2, cross 2',
                            out.text(), re.M),
                  'Gloo connects the hosts (global 4, local 2, cross 2)')
        finally:
            stop_session(spark)
    finally:
        for p in daemons:
            try:
                os.killpg(p.pid, 9)
            except OSError:
                pass
            p.wait(timeout=30)
        if index is not None:
            testhosts('down', '--index', index)
    left.check()


CASES = {name[len('case_'):]: f for name, f in list(globals().items())
         if name.startswith('case_')}

if __name__ == '__main__':
    name = sys.argv[1] if len(sys.argv) > 1 else ''
    if name not in CASES:
        sys.exit('usage: spark_test.py CASE (%s)' % ', '.join(sorted(CASES)))
    try:
        CASES[name]()
    except AssertionError as e:
        traceback.print_exc()
        print('FAIL: %s' % e)
        sys.exit(1)
    print('PASS: %s' % name)
