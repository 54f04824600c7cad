"""hora on Spark: Horovod's ``horovod.spark.run`` and Databricks' ``HorovodRunner`` over hora.

``run(fn, ...)`` runs ``fn`` once per rank in one Spark barrier stage: every task is one rank (a
child process of the executor's Python worker, hora.driver.task says why), and the ranks meet
at a hora rendezvous the driver holds (hora.driver.job). docs/spark.md has the whole story.
"""

import os
import socket
import uuid

from hora.driver.job import EngineRun, RankError  # noqa: F401 (RankError: raised by run())

__all__ = ['run', 'HoraRunner', 'RankError']


def _host_of(address):
    """The host part of an executor's "host:port" (an IPv6 host comes bracketed or bare)."""
    host = address.rsplit(':', 1)[0] if address.count(':') == 1 or address.startswith('[') \
        else address
    return host.strip('[]')


class _Partition(object):
    """The barrier stage's function: one rank per partition. Pickled into the closure with the
    TaskSpec (the secret and the function travel there)."""

    def __init__(self, spec):
        self.spec = spec

    def __call__(self, _):
        from pyspark import BarrierTaskContext

        from hora.driver import ranks, task
        ctx = BarrierTaskContext.get()
        # Every task computes the same table from the same list: partition i's executor host.
        hosts = [_host_of(i.address) for i in ctx.getTaskInfos()]
        infos = ranks.assign(hosts)
        info = infos[ctx.partitionId()]
        code = task.run_rank(self.spec, info, hosts[0])
        yield info.rank, code


class _SparkStage(EngineRun):
    """The barrier stage, run from a thread in a job group of its own so that cancel() stops
    exactly it."""

    def __init__(self, sc, num_proc, spec):
        super(_SparkStage, self).__init__('hora.spark.run stage')
        self.sc = sc
        self.num_proc = num_proc
        self.spec = spec
        self.group = 'hora-spark-run-' + uuid.uuid4().hex[:12]

    def run(self):
        self.sc.setJobGroup(self.group, 'hora.spark.run: %d ranks' % self.num_proc,
                            interruptOnCancel=True)
        rdd = self.sc.parallelize(range(self.num_proc), self.num_proc)
        rdd.barrier().mapPartitions(_Partition(self.spec)).collect()

    def cancel(self, reason):
        if self.finished():
            return  # the stage ended already (Spark would log that it found no job to cancel)
        try:
            self.sc.cancelJobGroup(self.group)
        except Exception:  # noqa: BLE001 (the context is stopping: its jobs end with it)
            pass


def _task_slots(sc):
    """How many tasks the executors can run at once now: what Spark checks a barrier stage
    against. None where this Spark does not say (an internal Scala call, not promised)."""
    try:
        jsc = sc._jsc.sc()
        profile = jsc.resourceProfileManager().defaultResourceProfile()
        return int(jsc.maxNumConcurrentTasks(profile))
    except Exception:  # noqa: BLE001 (only a warning depends on it)
        return None


def _warn_if_too_few_slots(sc, num_proc, job):
    """Says at once when the barrier stage cannot start yet. Spark itself only logs a WARN every
    15 s and fails the stage after 40 tries (10 minutes by default); more executors may join in
    that time (an autoscaling cluster), so this warns instead of refusing."""
    slots = _task_slots(sc)
    if slots is None or slots >= num_proc:
        return
    conf = sc.getConf()
    job.log('%d ranks need %d free task slots at once (one barrier stage), and the executors '
            'registered so far have %d: Spark waits for more, checking every %s up to %s times, then fails the '
            'stage; lower num_proc, or add executors or cores (each task takes spark.task.cpus)'
            % (num_proc, num_proc, slots,
               conf.get('spark.scheduler.barrier.maxConcurrentTasksCheck.interval', '15s'),
               conf.get('spark.scheduler.barrier.maxConcurrentTasksCheck.maxFailures', '40')),
            level=1)


def _driver_address(sc):
    """The address the executors reach this driver at (spark.driver.host, as an address)."""
    host = sc.getConf().get('spark.driver.host') or socket.gethostname()
    try:
        return socket.getaddrinfo(host, None, socket.AF_INET, socket.SOCK_STREAM)[0][4][0]
    except OSError:
        return socket.getaddrinfo(host, None)[0][4][0]


def run(fn, args=(), kwargs=None, num_proc=None, env=None, start_timeout=None, stdout=None,
        stderr=None, verbose=1, prefix_output_with_timestamp=False):
    """Runs ``fn(*args, **kwargs)`` on ``num_proc`` ranks, one Spark barrier task each, and
    returns the ranks' return values as a list ordered by rank (horovod.spark.run).

    ``num_proc``: default the context's defaultParallelism. ``env``: variables added to the
    ranks' environment. ``start_timeout``: seconds for every task to start its rank (default
    $HOROVOD_SPARK_START_TIMEOUT or 600). ``stdout``/``stderr``: where the ranks' prefixed output
    goes (default sys.stdout/sys.stderr). ``verbose`` >= 2 reports the job's progress.
    A rank that raises ends the job: the other ranks are aborted and this raises RankError
    naming the rank, its host and its traceback (its exception as the ``__cause__``).
    """
    from pyspark import SparkContext

    from hora.driver.job import Job

    sc = SparkContext._active_spark_context
    if sc is None:
        raise ValueError('hora.spark.run: could not find an active SparkContext, are you running '
                         'in a PySpark session? (start one with SparkSession.builder.getOrCreate())')
    if num_proc is None:
        num_proc = sc.defaultParallelism
    if num_proc < 1:
        raise ValueError('hora.spark.run: num_proc must be at least 1, not %d' % num_proc)
    if start_timeout is None:
        start_timeout = int(os.environ.get('HOROVOD_SPARK_START_TIMEOUT', '600'))
    job = Job('hora.spark.run', num_proc, _driver_address(sc), start_timeout, env, stdout, stderr,
              verbose, prefix_output_with_timestamp, task_name='Spark task')
    try:
        _warn_if_too_few_slots(sc, num_proc, job)
        engine = _SparkStage(sc, num_proc, job.spec(fn, args, kwargs))
        engine.start()
        return job.supervise(engine)
    finally:
        job.close()


class HoraRunner(object):
    """Databricks' HorovodRunner over hora: ``HoraRunner(np).run(main, **kwargs)`` returns rank
    0's return value.

    ``np > 0``: np ranks on the cluster's executors (hora.spark.run). ``np < 0``: -np ranks on
    this machine (the driver), through horarun (hora.run), for trying a program without the
    cluster. ``np == 0`` is refused, as HorovodRunner refuses it.
    """

    def __init__(self, np, driver_log_verbosity='all'):
        if not isinstance(np, int) or isinstance(np, bool):
            raise TypeError('HoraRunner: np must be an int, not %r' % (np,))
        if np == 0:
            raise ValueError('HoraRunner: np=0 is not a number of processes: use np > 0 for '
                             'that many ranks on the cluster, np < 0 for -np ranks on the driver')
        if driver_log_verbosity not in ('all', 'log_callback_only'):
            raise ValueError("HoraRunner: driver_log_verbosity must be 'all' or "
                             "'log_callback_only', not %r" % (driver_log_verbosity,))
        self.num_processor = np
        self.driver_log_verbosity = driver_log_verbosity

    def run(self, main, **kwargs):
        if self.num_processor < 0:
            from hora.runner import run as run_local
            results = run_local(main, kwargs=kwargs, num_proc=-self.num_processor)
        else:
            results = run(main, kwargs=kwargs, num_proc=self.num_processor)
        return results[0]
