"""hora on Ray: Horovod's ``horovod.ray.RayExecutor`` over hora.

The workers are Ray actors in one placement group, one rank each. Every run() is a hora job: the
driver holds its rendezvous (hora.driver.job), each actor starts its rank as a child process
(hora.driver.task) with the rank, local and cross numbers computed from the actors' nodes, and
the ranks on one node use shared memory, across nodes Gloo. docs/ray.md has the whole story.
"""

import os
import socket

from hora.driver.job import EngineRun, RankError  # noqa: F401 (RankError: raised by run())

__all__ = ['RayExecutor', 'RankError']


class _Worker(object):
    """One actor: where its node is, and the rank it is given for each job."""

    def __init__(self, env_vars):
        os.environ.update(env_vars or {})

    def node(self):
        import ray
        return (ray.get_runtime_context().get_node_id(), ray.util.get_node_ip_address(),
                socket.gethostname(), os.getpid())

    def run_rank(self, spec, info, master_addr):
        from hora.driver import task
        return task.run_rank(spec, info, master_addr)

    def execute_here(self, fn, args, kwargs):
        return fn(*args, **kwargs)


class _Settings(object):
    def __init__(self, timeout_s=30, placement_group_timeout_s=100, nics=None):
        self.timeout_s = timeout_s
        self.placement_group_timeout_s = placement_group_timeout_s
        self.nics = nics


class _RayJob(EngineRun):
    """The actors' run_rank calls, waited for from a thread. cancel() has nothing to do: the
    driver's 'abort' to every task ends the ranks, and with them the calls."""

    def __init__(self, refs):
        super(_RayJob, self).__init__('hora.ray run')
        self.refs = refs

    def run(self):
        import ray
        ray.get(self.refs)


class RayExecutor(object):
    """Horovod's RayExecutor: ``start()``, ``run(fn, args, kwargs)`` (a list of results by rank),
    ``execute(fn)``, ``execute_single(fn)``, ``shutdown()``.

    ``RayExecutor(settings, num_workers=N, ...)`` as in Horovod, or ``RayExecutor(N, ...)``.
    ``placement_strategy``: the placement group's ('PACK' by default, 'SPREAD', 'STRICT_PACK',
    'STRICT_SPREAD'). ``env_vars``: variables every actor and rank gets.
    """

    @staticmethod
    def create_settings(timeout_s=30, ssh_identity_file=None, ssh_str=None,
                        placement_group_timeout_s=100, nics=None):
        """Horovod's settings: timeout_s bounds each rank's start (HORA_START_TIMEOUT) and
        placement_group_timeout_s the wait for the actors' resources; ssh_* are not used (no
        SSH in hora.ray), nics is not used (the ranks bind on their route to the driver)."""
        return _Settings(timeout_s, placement_group_timeout_s, nics)

    def __init__(self, settings=None, num_workers=None, cpus_per_worker=1, use_gpu=False,
                 gpus_per_worker=None, env_vars=None, placement_strategy='PACK', verbose=1,
                 num_hosts=None, num_workers_per_host=1, **unsupported):
        if isinstance(settings, int) and num_workers is None:
            settings, num_workers = None, settings
        if num_workers is None and num_hosts is not None:
            num_workers = num_hosts * num_workers_per_host
        if not num_workers or num_workers < 1:
            raise ValueError('RayExecutor: num_workers must be at least 1, not %r' % (num_workers,))
        bad = sorted(k for k, v in unsupported.items() if v is not None)
        if bad:
            raise NotImplementedError('RayExecutor: %s not supported by hora.ray (elastic Ray '
                                      'jobs are not implemented; docs/ray.md, "Limits")'
                                      % ', '.join(bad))
        if gpus_per_worker and not use_gpu:
            raise ValueError('RayExecutor: gpus_per_worker needs use_gpu=True')
        self.settings = settings or _Settings()
        self.num_workers = num_workers
        self.cpus_per_worker = cpus_per_worker
        self.gpus_per_worker = (gpus_per_worker or 1) if use_gpu else 0
        self.env_vars = dict(env_vars or {})
        self.strategy = placement_strategy
        self.verbose = verbose
        self.workers = []
        self.placement_group = None
        self.nodes = []

    def start(self, executable_cls=None, executable_args=None, executable_kwargs=None,
              extra_env_vars=None):
        """Places the actors (all of them or none, in one placement group) and learns their
        nodes. executable_cls is not supported: a rank is a new process for every run()."""
        import ray
        from ray.util.placement_group import placement_group, remove_placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy
        if executable_cls is not None:
            raise NotImplementedError('RayExecutor.start: executable_cls is not supported by '
                                      'hora.ray: each run() starts its ranks afresh (docs/ray.md)')
        if self.workers:
            raise RuntimeError('RayExecutor.start: already started')
        env = dict(self.env_vars)
        env.update(extra_env_vars or {})
        bundle = {'CPU': self.cpus_per_worker}
        if self.gpus_per_worker:
            bundle['GPU'] = self.gpus_per_worker
        pg = placement_group([dict(bundle) for _ in range(self.num_workers)],
                             strategy=self.strategy)
        timeout = self.settings.placement_group_timeout_s
        if not pg.wait(timeout):
            remove_placement_group(pg)
            raise TimeoutError('RayExecutor.start: the placement group of %d bundles %s (%s) was '
                               'not ready within %s s: the cluster lacks the resources '
                               '(ray.cluster_resources(): %s)'
                               % (self.num_workers, bundle, self.strategy, timeout,
                                  ray.cluster_resources()))
        self.placement_group = pg
        actor = ray.remote(_Worker)
        self.workers = [
            actor.options(num_cpus=self.cpus_per_worker, num_gpus=self.gpus_per_worker,
                          scheduling_strategy=PlacementGroupSchedulingStrategy(
                              placement_group=pg, placement_group_bundle_index=i)).remote(env)
            for i in range(self.num_workers)]
        try:
            self.nodes = ray.get([w.node.remote() for w in self.workers],
                                 timeout=max(60, self.settings.timeout_s))
        except Exception:
            self.shutdown()
            raise

    def _job(self, fn, args, kwargs):
        import ray
        from hora.driver import ranks
        from hora.driver.job import Job
        if not self.workers:
            raise RuntimeError('RayExecutor: call start() first')
        keys = [n[0] for n in self.nodes]
        infos = ranks.assign(keys, {n[0]: n[1] for n in self.nodes})
        job = Job('hora.ray', self.num_workers, ray.util.get_node_ip_address(),
                  max(self.settings.timeout_s, 60), self.env_vars, verbose=self.verbose,
                  task_name='Ray actor')
        try:
            spec = job.spec(fn, args, kwargs)
            master = infos[0].host
            for info in infos:
                if info.rank == 0:
                    master = info.host
            engine = _RayJob([w.run_rank.remote(spec, infos[i], master)
                              for i, w in enumerate(self.workers)])
            engine.start()
            return job.supervise(engine)
        finally:
            job.close()

    def run(self, fn, args=None, kwargs=None, callbacks=None):
        """Runs fn(*args, **kwargs) on every worker, one rank each; the results by rank."""
        if callbacks:
            raise NotImplementedError('RayExecutor.run: callbacks are not supported by hora.ray')
        return self._job(fn, args or (), kwargs or {})

    def execute(self, fn, callbacks=None):
        """Runs fn(None) on every worker as one job (fn may use hora collectives; None stands for
        Horovod's executable, which hora.ray does not keep); the results by rank."""
        return self.run(fn, args=(None,), callbacks=callbacks)

    def execute_single(self, fn):
        """Runs fn(None) on the first worker's actor, outside any job (no collectives), as
        Horovod's execute_single does."""
        import ray
        if not self.workers:
            raise RuntimeError('RayExecutor: call start() first')
        return ray.get(self.workers[0].execute_here.remote(fn, (None,), {}))

    def shutdown(self):
        """Kills the actors (their rank processes die with them: PR_SET_PDEATHSIG, stdin's end)
        and removes the placement group."""
        import ray
        from ray.util.placement_group import remove_placement_group
        for w in self.workers:
            try:
                ray.kill(w, no_restart=True)
            except Exception:  # noqa: BLE001 (already dead)
                pass
        self.workers = []
        self.nodes = []
        if self.placement_group is not None:
            try:
                remove_placement_group(self.placement_group)
            except Exception:  # noqa: BLE001 (the cluster went away)
                pass
            self.placement_group = None
