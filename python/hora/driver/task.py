"""The engine's side of a rank: runs in a Spark task's Python worker or in a Ray actor, starts the
rank as a child process (hora.driver._rank) and supervises it.

Why a child and not the task's own process: a rank is a fresh process, as under horarun, so
libhora and hora.torch start clean every time even in an engine that reuses its Python workers
(Spark does by default; Ray keeps its actors), a rank that crashes (a signal, os._exit) leaves
the engine's worker alive to report it, and the supervisor can end the rank and everything it
started (its own process group) when the driver aborts the job. The supervisor also does what
horarun's guard does for a rank: once the rank is gone, it removes the job's shared-memory
segments on this host whose creator is no longer alive (docs/shm.md, "Lifetime").

The supervisor holds one control connection to the driver (hora.driver.wire): it says which
process runs the rank, forwards the rank's output line by line, reports how the process ended,
and ends the rank when the driver says abort or when that connection drops (the driver is gone).
"""

import collections
import ctypes
import os
import pickle
import signal
import struct
import subprocess
import sys
import threading
import time

from hora.driver import ranks, wire

KILL_GRACE = 5.0  # seconds between SIGTERM and SIGKILL to the rank's process group
OUTPUT_DRAIN = 10.0  # seconds the rank's output may take to arrive once its process ended


class TaskSpec(object):
    """Everything a task needs, pickled into the engine's closure: the driver's addresses, the
    rendezvous secret and the control token, the environment, and the function's bytes."""

    def __init__(self, rendezvous, control, secret_hex, token, start_timeout, env, run_id,
                 payload):
        self.rendezvous = rendezvous  # "host:port"
        self.control = control  # (host, port)
        self.secret_hex = secret_hex
        self.token = token
        self.start_timeout = start_timeout
        self.env = env
        self.run_id = run_id
        self.payload = payload


def _hora_path():
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _child_environment(spec, info, master_addr):
    env = dict(os.environ)
    env.update(spec.env or {})
    env.update(ranks.rank_environment(info, spec.rendezvous, spec.secret_hex,
                                      spec.start_timeout, master_addr, spec.run_id))
    # The rank imports hora from where this task did.
    env['PYTHONPATH'] = os.pathsep.join(
        [_hora_path()] + [p for p in env.get('PYTHONPATH', '').split(os.pathsep) if p])
    return env


try:
    _LIBC = ctypes.CDLL(None, use_errno=True)
    _PRCTL = _LIBC.prctl
except (OSError, AttributeError):  # not Linux: stdin's end still ends the rank
    _PRCTL = None
_PR_SET_PDEATHSIG = 1


def _die_with_parent():
    # PR_SET_PDEATHSIG: SIGKILL when the thread that started the rank ends (the engine killed its
    # worker); stdin's end does the same for the rank itself, this covers a rank stuck in C.
    # Looked up before the fork: the child of a threaded process (a Ray actor) may not import.
    if _PRCTL is not None:
        _PRCTL(_PR_SET_PDEATHSIG, signal.SIGKILL)


class _Supervisor(object):

    def __init__(self, spec, info, master_addr):
        self.spec = spec
        self.info = info
        self.master_addr = master_addr
        self.send_lock = threading.Lock()
        self.aborted = None
        self.tail = collections.deque(maxlen=20)
        self.sock = wire.connect(spec.control, spec.token)
        self.sock.settimeout(None)

    def send(self, message):
        with self.send_lock:
            wire.send(self.sock, message)

    def start(self):
        self.proc = subprocess.Popen(
            [sys.executable, '-m', 'hora.driver._rank'],
            env=_child_environment(self.spec, self.info, self.master_addr),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            start_new_session=True, preexec_fn=_die_with_parent)
        header = (self.spec.control, self.spec.token, self.info.rank, self.info.host)
        for data in (pickle.dumps(header), self.spec.payload):
            self.proc.stdin.write(struct.pack('!Q', len(data)))  # hora.runner's framing
            self.proc.stdin.write(data)
        self.proc.stdin.flush()
        self.send(('hello', self.info.rank, self.info.host, self.proc.pid))
        self.pumps = [threading.Thread(target=self._pump, args=(self.proc.stdout, 'stdout'),
                                       daemon=True),
                      threading.Thread(target=self._pump, args=(self.proc.stderr, 'stderr'),
                                       daemon=True)]
        for t in self.pumps:
            t.start()
        threading.Thread(target=self._listen, daemon=True).start()

    def _pump(self, stream, name):
        for line in iter(stream.readline, b''):
            if name == 'stderr':
                self.tail.append(line)
            try:
                self.send(('out', self.info.rank, name, line))
            except OSError:
                pass  # the driver is gone; _listen ends the rank
        stream.close()

    def _listen(self):
        try:
            while True:
                message = wire.receive(self.sock)
                if message[0] == 'abort':
                    self.end(message[1])
                    return
        except Exception:  # noqa: BLE001 (EOF, reset: the driver is gone or finished with us)
            if self.proc.poll() is None:
                self.end('the connection to the driver was lost')

    def end(self, reason):
        """Ends the rank's process group: SIGTERM, SIGKILL after KILL_GRACE."""
        self.aborted = reason
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
        except OSError:
            return
        deadline = time.monotonic() + KILL_GRACE
        while self.proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            pass

    def wait(self):
        # No deadline of its own: a training run takes as long as it takes. The rank ends when it
        # returns, when the driver aborts it, when the driver goes away (_listen) and when the
        # engine kills this worker (its stdin's end, PR_SET_PDEATHSIG).
        code = self.proc.wait()
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # what the rank left behind in its group
        except OSError:
            pass
        self.proc.stdin.close()
        for t in self.pumps:
            t.join(OUTPUT_DRAIN)
        remove_dead_segments(self.spec.secret_hex, self.info.host_index)
        return code

    def report(self, code):
        tail = b''.join(self.tail).decode('utf-8', 'replace')
        try:
            with self.send_lock:
                wire.send(self.sock, ('exit', self.info.rank, self.info.host, code, tail))
            self.sock.close()
        except OSError:
            pass  # the driver is gone: nobody to tell


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_dead_segments(secret_hex, host_index, shm_dir='/dev/shm'):
    """Unlinks this job's segments on this host whose creator has exited (the guard's rule,
    cli/spawn/shm_cleanup.h): normally the last rank to map a segment unlinks it, but a rank that
    died or was killed first leaves its name behind."""
    from hora.driver import _rendezvous
    prefix = _rendezvous.shm_name_prefix(secret_hex, host_index).lstrip('/') + '-'
    try:
        names = os.listdir(shm_dir)
    except OSError:
        return []
    removed = []
    for name in names:
        if not name.startswith(prefix):
            continue
        pid = name[len(prefix):].split('-', 1)[0]
        if pid.isdigit() and not _alive(int(pid)):
            try:
                os.unlink(os.path.join(shm_dir, name))
                removed.append(name)
            except OSError:
                pass  # another rank's supervisor removed it first
    return removed


def run_rank(spec, info, master_addr):
    """Runs one rank to its end; returns its exit status (negative: the signal that ended it).
    The outcome itself (value or traceback) went to the driver from the rank. master_addr: rank
    0's host (MASTER_ADDR, for programs that also use torch.distributed)."""
    supervisor = _Supervisor(spec, info, master_addr)
    try:
        supervisor.start()
    except BaseException:
        supervisor.sock.close()
        raise
    code = supervisor.wait()
    supervisor.report(code)
    return code
