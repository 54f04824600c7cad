"""hora.run: Horovod's ``horovod.run(func, ...)`` over horarun.

The caller serves the cloudpickled function on a TCP port of its own (all interfaces, an ephemeral
port, a random token); horarun starts ``python3 -m hora._run_worker`` on every rank, which
connects back to the launcher's address (the host of ``HORA_RENDEZVOUS``, which horarun chose so
that every rank can reach it), fetches the function, calls it and sends back its return value or
its exception and traceback. Nothing goes through the filesystem, so remote hosts need the same
Python with hora and cloudpickle importable, not a shared folder (docs/pytorch.md, "hora.run").
"""

import os
import secrets
import shutil
import socket
import struct
import subprocess
import sys
import threading
import warnings

# The worker's environment: where to fetch the function ("host:port" is the caller's port; the
# host part comes from HORA_RENDEZVOUS on the rank's side) and the token that proves the job.
ENV_PORT = 'HORA_RUN_PORT'
ENV_TOKEN = 'HORA_RUN_TOKEN'
_IO_TIMEOUT = 60.0  # seconds for one message once a connection is open


class RemoteTraceback(Exception):
    """The traceback of a rank's exception, as text: the ``__cause__`` of what hora.run raises."""

    def __str__(self):
        return self.args[0]


def send_msg(sock, data):
    sock.sendall(struct.pack('!Q', len(data)) + data)


def _recv_exact(sock, n):
    chunks = []
    while n:
        chunk = sock.recv(min(n, 1 << 20))
        if not chunk:
            raise ConnectionError('connection closed with %d bytes still expected' % n)
        chunks.append(chunk)
        n -= len(chunk)
    return b''.join(chunks)


def recv_msg(sock, limit=1 << 40):
    (n,) = struct.unpack('!Q', _recv_exact(sock, 8))
    if n > limit:
        raise ConnectionError('message of %d bytes is over the limit of %d' % (n, limit))
    return _recv_exact(sock, n)


def find_horarun():
    """$HORARUN, else the horarun of this build tree or installation, else horarun on PATH."""
    env = os.environ.get('HORARUN')
    if env:
        return env
    here = os.path.dirname(os.path.abspath(__file__))  # .../hora
    candidates = [
        os.path.join(here, '..', '..', 'cli', 'horarun'),          # build/python/hora
        os.path.join(here, '..', '..', '..', '..', 'bin', 'horarun'),  # lib/python3/dist-packages
        os.path.join(here, '..', '..', '..', 'bin', 'horarun'),
    ]
    for c in candidates:
        if os.path.isfile(c) and os.access(c, os.X_OK):
            return os.path.normpath(c)
    found = shutil.which('horarun')
    if found:
        return found
    raise FileNotFoundError('hora.run: horarun not found: set HORARUN to its path, or put it on '
                            'PATH (looked beside the hora package: %s)'
                            % ', '.join(os.path.normpath(c) for c in candidates))


class _Server(object):
    """Serves the pickled function and collects each rank's pickled result."""

    def __init__(self, func_bytes):
        self.token = secrets.token_hex(16).encode()
        self.func_bytes = func_bytes
        self.results = {}
        self.lock = threading.Lock()
        if socket.has_dualstack_ipv6():
            self.sock = socket.create_server(('', 0), family=socket.AF_INET6, dualstack_ipv6=True)
        else:
            self.sock = socket.create_server(('', 0))
        self.port = self.sock.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, name='hora.run server', daemon=True)
        self.thread.start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return  # closed
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn):
        try:
            with conn:
                conn.settimeout(_IO_TIMEOUT)
                if not secrets.compare_digest(recv_msg(conn, 64), self.token):
                    return
                request = recv_msg(conn, 64)
                if request == b'func':
                    send_msg(conn, self.func_bytes)
                elif request.startswith(b'result '):
                    rank = int(request.split()[1])
                    data = recv_msg(conn)
                    with self.lock:
                        self.results[rank] = data
                    send_msg(conn, b'ok')
        except (OSError, ValueError, ConnectionError):
            pass  # the rank reports its own failure; a stray connection is ignored

    def close(self):
        self.sock.close()


def _pump(src, dst):
    """Copies horarun's output to sys.stdout/sys.stderr line by line (a notebook's streams are
    not file descriptors, so horarun cannot write to them itself)."""
    for line in iter(src.readline, b''):
        stream = sys.stdout if dst == 1 else sys.stderr
        stream.write(line.decode('utf-8', 'replace'))
        stream.flush()
    src.close()


def _flags(num_proc, hosts, hostfile, min_num_proc, max_num_proc, slots, reset_limit,
           cooldown_range, host_discovery_script, start_timeout, ssh_port, ssh_identity_file,
           disable_cache, output_filename, verbose, network_interfaces):
    flags = []
    if num_proc is not None:
        flags += ['-np', str(num_proc)]
    if hosts is not None:
        flags += ['-H', hosts]
    if hostfile is not None:
        flags += ['--hostfile', hostfile]
    if min_num_proc is not None:
        flags += ['--min-np', str(min_num_proc)]
    if max_num_proc is not None:
        flags += ['--max-np', str(max_num_proc)]
    if slots is not None:
        flags += ['--slots-per-host', str(slots)]
    if reset_limit is not None:
        flags += ['--reset-limit', str(reset_limit)]
    if cooldown_range is not None:
        flags += ['--blacklist-cooldown-range', str(cooldown_range[0]), str(cooldown_range[1])]
    if host_discovery_script is not None:
        flags += ['--host-discovery-script', host_discovery_script]
    if start_timeout is not None:
        flags += ['--start-timeout', str(start_timeout)]
    if ssh_port is not None:
        flags += ['-p', str(ssh_port)]
    if ssh_identity_file is not None:
        flags += ['-i', ssh_identity_file]
    if disable_cache:
        flags += ['--disable-cache']
    if output_filename is not None:
        flags += ['--output-filename', output_filename]
    if verbose:
        flags += ['--verbose']
    if network_interfaces:
        flags += ['--network-interfaces', ','.join(network_interfaces)]
    return flags


def run(func, args=(), kwargs=None, num_proc=1, min_num_proc=None, max_num_proc=None,
        slots=None, reset_limit=None, cooldown_range=None, hosts=None, hostfile=None,
        host_discovery_script=None, start_timeout=None, ssh_port=None, ssh_identity_file=None,
        disable_cache=None, output_filename=None, verbose=None, use_gloo=None, use_mpi=None,
        mpi_args=None, network_interface=None, network_interfaces=None, executable=None,
        np=None, min_np=None, max_np=None, horarun=None, horarun_args=()):
    """Runs ``func(*args, **kwargs)`` on every rank of a horarun job and returns the list of
    the ranks' return values, in rank order (Horovod's ``horovod.run``).

    ``func`` and its arguments are cloudpickled (lambdas and closures work); each rank's return
    value comes back pickled. When a rank raises, the job ends (horarun stops the others) and
    this raises the lowest such rank's exception, its traceback as the ``__cause__``
    (RemoteTraceback). Arguments are horovod.run's, turned into horarun flags; ``horarun`` is
    the launcher to use (default: $HORARUN, beside the package, then PATH) and
    ``horarun_args`` more of its flags. ``use_mpi``/``mpi_args`` are refused (hora has no MPI).
    """
    if network_interface:
        network_interfaces = network_interface.split(',')
        warnings.warn('network_interface is deprecated, use network_interfaces instead',
                      DeprecationWarning)
    if np is not None:
        num_proc = np
        warnings.warn('np is deprecated, use num_proc instead', DeprecationWarning)
    if min_np is not None:
        min_num_proc = min_np
        warnings.warn('min_np is deprecated, use min_num_proc instead', DeprecationWarning)
    if max_np is not None:
        max_num_proc = max_np
        warnings.warn('max_np is deprecated, use max_num_proc instead', DeprecationWarning)
    if hosts is not None and hostfile is not None:
        raise ValueError('Argument hosts and hostfile only allow one provided.')
    if use_mpi or mpi_args:
        raise NotImplementedError('hora.run: hora has no MPI controller (use_mpi, mpi_args); '
                                  'leave them out: horarun runs the job over Gloo')
    if use_gloo is False:
        raise ValueError('hora.run: use_gloo=False asks for MPI, which hora does not have')
    if kwargs is None:
        kwargs = {}

    import cloudpickle

    func_bytes = cloudpickle.dumps((func, tuple(args), dict(kwargs)))
    launcher = horarun or find_horarun()
    server = _Server(func_bytes)
    try:
        env = dict(os.environ)
        env[ENV_PORT] = str(server.port)
        env[ENV_TOKEN] = server.token.decode()
        # The ranks import hora from where this process did.
        pkg_parent = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env['PYTHONPATH'] = os.pathsep.join(
            [pkg_parent] + [p for p in env.get('PYTHONPATH', '').split(os.pathsep) if p])
        command = [launcher] + _flags(
            num_proc, hosts, hostfile, min_num_proc, max_num_proc, slots, reset_limit,
            cooldown_range, host_discovery_script, start_timeout, ssh_port, ssh_identity_file,
            disable_cache, output_filename, verbose, network_interfaces) + list(horarun_args)
        # Named with -x (values from horarun's environment, never on its command line), so
        # they reach the ranks even with --no-env-forwarding in horarun_args.
        command += ['-x', ENV_PORT, '-x', ENV_TOKEN, '-x', 'PYTHONPATH']
        command += ['--', executable or sys.executable, '-m', 'hora._run_worker']
        proc = subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        pumps = [threading.Thread(target=_pump, args=(proc.stdout, 1), daemon=True),
                 threading.Thread(target=_pump, args=(proc.stderr, 2), daemon=True)]
        for t in pumps:
            t.start()
        try:
            rc = proc.wait()
        except BaseException:  # Ctrl-C in the caller: stop the job, as horarun would
            proc.terminate()
            proc.wait()
            raise
        for t in pumps:
            t.join()
        with server.lock:
            results = dict(server.results)
    finally:
        server.close()
    return _collect(results, rc, command)


def _collect(results, rc, command):
    import pickle

    decoded = {}
    for rank in sorted(results):
        try:
            decoded[rank] = pickle.loads(results[rank])
        except Exception as e:  # noqa: BLE001 (a result class the caller cannot import)
            decoded[rank] = ('error', None, 'rank %d: its result could not be unpickled here: '
                             '%s: %s' % (rank, type(e).__name__, e))
    for rank in sorted(decoded):
        kind, value, tb = decoded[rank]
        if kind == 'error':
            cause = RemoteTraceback('\n"""\nrank %d: %s"""' % (rank, tb))
            if isinstance(value, BaseException):
                raise value from cause
            raise RuntimeError('hora.run: rank %d failed: %s' % (rank, tb.strip().splitlines()[-1]
                                                                   if tb.strip() else '?')) \
                from cause
    if rc != 0:
        raise RuntimeError('hora.run: horarun exited with status %d before every rank returned '
                           'a result (ranks with results: %s); its output is above. Command: %s'
                           % (rc, sorted(decoded) or 'none', ' '.join(command)))
    size = len(decoded)
    missing = [r for r in range(size) if r not in decoded]
    if missing:
        raise RuntimeError('hora.run: no result from ranks %s' % missing)
    return [decoded[r][1] for r in range(size)]
