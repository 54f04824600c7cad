"""The driver's side of a hora.spark or hora.ray job: the rendezvous the ranks meet at, the control
port their tasks report to, their output, and what happens when one fails.

How a job goes (docs/spark.md, "How it starts"):
1. Job() starts hora's rendezvous server (hora.driver._rendezvous, with a new secret) and a
   control port, both on the address the engine's executors already reach the driver at.
2. spec() puts the addresses, the secret, a control token and the function into a TaskSpec that
   the engine pickles into its tasks' closure (never a command line).
3. The engine starts one task per rank (hora.driver.task): each works out its rank from the
   hosts of all tasks, starts the rank as a child process and connects to the control port.
4. supervise() waits until every rank has returned a value, or one fails: then it aborts every
   other rank (the rendezvous's ABORT, an 'abort' to every task, the engine's own cancel), waits
   for the tasks to report their ranks gone, and raises RankError naming the first failing rank,
   its host and its traceback.
Every wait has a deadline but the training itself: start_timeout for the tasks to start their
ranks, ABORT_WAIT for them to end their ranks after an abort, FINISH_WAIT for the engine to wrap
up after the last result.
"""

import pickle
import secrets
import socket
import sys
import threading
import time

from hora.driver import task as task_module
from hora.driver import wire

DEFAULT_START_TIMEOUT = 600  # seconds, horovod.spark.run's default (HOROVOD_SPARK_START_TIMEOUT)
ABORT_WAIT = 30.0  # seconds for the tasks to end their ranks once the job is aborted
FINISH_WAIT = 60.0  # seconds for the engine's job to end once every rank has returned
REPORT_WAIT = 5.0  # seconds a rank whose connection dropped has to send its traceback


class RankError(RuntimeError):
    """A rank failed; the job was aborted. ``rank``, ``host`` and ``remote_traceback`` (the
    rank's traceback as text) say where and why; ``__cause__`` is the rank's exception when it
    could be unpickled here."""

    def __init__(self, message, rank, host, remote_traceback):
        super(RankError, self).__init__(message)
        self.rank = rank
        self.host = host
        self.remote_traceback = remote_traceback


class EngineRun(object):
    """An engine's part of a job as supervise() sees it: run() (the engine's blocking call that
    runs every task, Spark's collect() or Ray's get()) on a thread of its own; cancel() stops it
    where the engine can. Subclasses give run() and cancel()."""

    def __init__(self, name):
        self.problem = None
        self.thread = threading.Thread(target=self._main, name=name, daemon=True)

    def start(self):
        self.thread.start()

    def _main(self):
        try:
            self.run()
        except Exception as e:  # noqa: BLE001 (handed to the driver's wait, which raises it)
            self.problem = e

    def run(self):
        raise NotImplementedError

    def cancel(self, reason):
        pass

    def finished(self):
        return not self.thread.is_alive()

    def error(self):
        return self.problem

    def join(self, timeout):
        self.thread.join(timeout)
        return not self.thread.is_alive()


def _timestamp():
    # asctime()'s layout, as horarun (and horovodrun) put it before the tag.
    return time.strftime('%a %b %e %H:%M:%S %Y')


class Job(object):

    def __init__(self, who, size, address, start_timeout=None, env=None, stdout=None,
                 stderr=None, verbose=1, prefix_output_with_timestamp=False, task_name='task'):
        from hora.driver import _rendezvous
        self.who = who
        self.task_name = task_name  # what the engine calls the process that holds a rank
        self.size = size
        self.address = address
        self.start_timeout = float(start_timeout or DEFAULT_START_TIMEOUT)
        self.env = dict(env or {})
        self.stdout = stdout or sys.stdout
        self.stderr = stderr or sys.stderr
        self.verbose = verbose
        self.timestamps = prefix_output_with_timestamp
        self.cond = threading.Condition()
        self.hellos = {}  # rank -> (host, pid)
        self.results = {}  # rank -> pickled value
        self.errors = {}  # rank -> (host, text, pickled exception or None)
        self.exits = {}  # rank -> (host, code, stderr tail)
        self.failures = []  # (kind, rank, detail) in the order the driver learnt of them
        self.tasks = []  # control connections of the tasks, for 'abort'
        self.closed = False
        self.output_lock = threading.Lock()
        self.token = secrets.token_bytes(32)
        # The server's own log (its address, refused connections, the abort) at --verbose's level.
        _rendezvous.set_log_level('info' if verbose >= 2 else 'error')
        self.rdv = _rendezvous.Server(size, address, self.start_timeout)
        try:
            self.listener = socket.create_server(
                (address, 0), family=socket.AF_INET6 if ':' in address else socket.AF_INET)
        except OSError:
            self.rdv.stop()
            raise
        self.control = (address, self.listener.getsockname()[1])
        threading.Thread(target=self._accept, name='hora control', daemon=True).start()
        self.events_thread = threading.Thread(target=self._rendezvous_events,
                                              name='hora rendezvous events', daemon=True)
        self.events_thread.start()
        self.log('rendezvous at %s:%d, control port %d, %d ranks'
                 % (address, self.rdv.port, self.control[1], size))

    def log(self, text, level=2):
        if self.verbose >= level:
            self.stderr.write('%s: %s\n' % (self.who, text))
            self.stderr.flush()

    def spec(self, fn, args=(), kwargs=None):
        import cloudpickle
        host = self.address if ':' not in self.address else '[%s]' % self.address
        return task_module.TaskSpec(
            rendezvous='%s:%d' % (host, self.rdv.port), control=self.control,
            secret_hex=self.rdv.secret_hex, token=self.token, start_timeout=self.start_timeout,
            env=self.env, run_id='hora-' + secrets.token_hex(8), payload=cloudpickle.dumps(
                (fn, tuple(args), dict(kwargs or {}))))

    # ---- what the tasks and ranks report ------------------------------------------------------

    def _accept(self):
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return  # closed
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn):
        keep = False
        try:
            conn.settimeout(wire.IO_TIMEOUT)
            if not wire.check_token(conn, self.token):
                return
            message = wire.receive(conn)
            kind = message[0]
            if kind == 'hello':
                keep = self._hello(conn, message)
            elif kind == 'result':
                with self.cond:
                    self.results[message[1]] = message[2]
                    self.cond.notify_all()
                wire.send(conn, ('ok',))
            elif kind == 'error':
                _, rank, host, text, exc = message
                with self.cond:
                    self.errors[rank] = (host, text, exc)
                    self.failures.append(('error', rank, None))
                    self.cond.notify_all()
                wire.send(conn, ('ok',))
        except (OSError, EOFError, ValueError, pickle.UnpicklingError):
            pass  # a stray or broken connection; the ranks' own reports decide the job
        finally:
            if not keep:
                conn.close()

    def _hello(self, conn, message):
        _, rank, host, pid = message
        with self.cond:
            if self.closed:
                return False
            self.hellos[rank] = (host, pid)
            self.tasks.append(conn)
            self.cond.notify_all()
        self.log('rank %d started on %s (pid %d)' % (rank, host, pid))
        threading.Thread(target=self._task_messages, args=(conn, rank), daemon=True).start()
        return True

    def _task_messages(self, conn, rank):
        conn.settimeout(None)  # the connection idles for the whole job: it is the task's liveness
        try:
            while True:
                message = wire.receive(conn)
                if message[0] == 'out':
                    self._print(message[1], message[2], message[3])
                elif message[0] == 'exit':
                    _, rank, host, code, tail = message
                    with self.cond:
                        self.exits[rank] = (host, code, tail)
                        if rank not in self.results and rank not in self.errors:
                            self.failures.append(('exit', rank, code))
                        self.cond.notify_all()
                    return
        except (OSError, EOFError, ValueError, pickle.UnpicklingError):
            with self.cond:
                if rank not in self.exits and not self.closed:
                    self.exits[rank] = (self.hellos[rank][0], None, '')
                    if rank not in self.results:
                        self.failures.append(('task', rank, None))
                    self.cond.notify_all()

    def _print(self, rank, stream, data):
        text = data.decode('utf-8', 'replace')
        if not text.endswith('\n'):
            text += '\n'
        prefix = '[%d]<%s>:' % (rank, stream)
        if self.timestamps:
            prefix = _timestamp() + prefix
        out = self.stdout if stream == 'stdout' else self.stderr
        with self.output_lock:
            out.write(prefix + text)
            out.flush()

    def _rendezvous_events(self):
        while True:
            with self.cond:
                if self.closed:
                    return
            event = self.rdv.wait_event(0.5)
            if event is None:
                continue
            kind, rank, clean, text = event
            if kind == 'connected':
                self.log('rank %d reached the rendezvous from %s' % (rank, text))
            elif kind == 'rejected':
                self.log('the rendezvous refused a connection: %s' % text, level=1)
            elif kind == 'disconnected' and not clean:
                with self.cond:
                    # A rank that returned its value may leave without a goodbye.
                    if rank not in self.results and rank not in self.errors:
                        self.failures.append(('disconnect', rank, text))
                        self.cond.notify_all()

    # ---- the driver's wait --------------------------------------------------------------------

    def supervise(self, engine):
        """Waits for every rank's value (a list in rank order), or raises RankError for the first
        rank that failed, or RuntimeError when the engine could not run the tasks."""
        start = time.monotonic()
        with self.cond:
            while True:
                if self.failures:
                    break
                if len(self.results) == self.size:
                    break
                if engine.finished():
                    break
                if len(self.hellos) < self.size and \
                        time.monotonic() - start > self.start_timeout:
                    break
                self.cond.wait(0.25)
        if self.failures:
            self._fail(engine)
        if len(self.results) < self.size:
            self._fail_start(engine, start)
        if not engine.join(FINISH_WAIT):
            self.log('the engine\'s job had not ended %d s after the last result; cancelling it'
                     % FINISH_WAIT, level=1)
            engine.cancel('every rank has returned')
        return [pickle.loads(self.results[r]) for r in range(self.size)]

    def _abort(self, engine, reason):
        self.rdv.abort_all(reason)
        with self.cond:
            tasks = list(self.tasks)
        for conn in tasks:
            try:
                wire.send(conn, ('abort', reason))
            except OSError:
                pass  # that task is gone already
        engine.cancel(reason)

    def _wait_exits(self, engine):
        deadline = time.monotonic() + ABORT_WAIT
        with self.cond:
            while time.monotonic() < deadline and \
                    not all(r in self.exits for r in self.hellos) and not engine.finished():
                self.cond.wait(0.25)
        engine.join(max(0.0, deadline - time.monotonic()))

    def _fail(self, engine):
        with self.cond:
            kind, rank, detail = self.failures[0]
            if kind != 'error':
                # The rank's own report (its traceback) or its task's (the exit status) may still
                # be on its way while its rendezvous connection has already dropped.
                deadline = time.monotonic() + REPORT_WAIT
                while rank not in self.errors and rank not in self.exits and \
                        time.monotonic() < deadline:
                    self.cond.wait(0.1)
            host = self._host(rank)
            if rank in self.errors:
                text = self.errors[rank][1]
                summary = text.strip().splitlines()[-1] if text.strip() else 'failed'
            elif rank in self.exits and self.exits[rank][1] is not None:
                code, tail = self.exits[rank][1], self.exits[rank][2]
                how = 'was killed by signal %d' % -code if code < 0 else 'exited with status %d' % code
                summary = 'its process %s before returning' % how
                text = summary + (':\n' + tail if tail else '') + '\n'
            elif kind == 'disconnect':
                summary = 'its rendezvous connection ended: %s' % detail
                text = summary + '\n'
            else:
                summary = ('its %s ended (killed, or its process died) before the rank '
                           'reported how it did' % self.task_name)
                text = summary + '\n'
        reason = '%s: rank %d on host %s failed: %s' % (self.who, rank, host, summary)
        self.log('rank %d on host %s failed; aborting the other ranks' % (rank, host))
        self._abort(engine, reason)
        self._wait_exits(engine)
        error = RankError('%s\n%s' % (reason, text.rstrip('\n')), rank, host, text)
        cause = None
        if rank in self.errors and self.errors[rank][2] is not None:
            try:
                cause = pickle.loads(self.errors[rank][2])
            except Exception:  # noqa: BLE001 (its class does not exist here: the text says it)
                cause = None
        raise error from cause

    def _host(self, rank):
        if rank in self.hellos:
            return self.hellos[rank][0]
        if rank in self.errors:
            return self.errors[rank][0]
        return '?'

    def _fail_start(self, engine, start):
        with self.cond:
            started = sorted(self.hellos)
            returned = sorted(self.results)
        problem = engine.error()
        if len(started) < self.size and problem is None and not engine.finished():
            reason = ('%s: only %d of %d ranks started within %d s (start_timeout): the cluster '
                      'needs %d free task slots at once for the barrier stage'
                      % (self.who, len(started), self.size, self.start_timeout, self.size))
        else:
            missing = [r for r in range(self.size) if r not in returned]
            reason = ('%s: the engine\'s job ended before ranks %s returned a value%s'
                      % (self.who, missing, ': %s' % problem if problem else ''))
        self._abort(engine, reason)
        self._wait_exits(engine)
        raise RuntimeError(reason) from problem

    def close(self):
        """Stops the rendezvous and the control port, and closes every task's connection (a task
        whose rank still runs then ends it)."""
        with self.cond:
            self.closed = True
            tasks, self.tasks = self.tasks, []
        self.rdv.stop()
        # The thread must not be inside the module when the interpreter ends (stop() wakes it).
        self.events_thread.join(5.0)
        # shutdown() before close(): it wakes the threads blocked in accept() and recv() on these
        # sockets and sends each task its end of file at once.
        for sock in [self.listener] + tasks:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # not connected (any more)
            sock.close()
