#!/usr/bin/python3
"""rendezvous/horovod/pickle.h against Horovod 0.28.1's own Python (the archive of
test/meson.build's horovod_archive option, run by Debian's python3):

- the HostsUpdatedRequest bytes horarun writes are unpickled by pickle.loads into Horovod's
  classes, with the timestamp and the HostUpdateResult flag given;
- the worker_addresses body a real WorkerNotificationService makes (Horovod's codec, cloudpickle,
  its listening addresses and key) is parsed into the same addresses and key;
- a body that would run code when unpickled is refused, naming the opcode;
- rendezvous/horovod/notify.h's client delivers HostsUpdatedRequest to that real service
  (its handler sees the timestamp and flag), and fails when framed with another key.

Usage: horovod_pickle_real_test.py TOOL (test/rendezvous/horovod/horovod_pickle_tool.cc), with
HOROVOD_ARCHIVE set. Exits 77 (skipped) without the archive, cloudpickle or psutil.
"""
import base64
import os
import pickle
import subprocess
import sys
import tarfile
import tempfile

SKIP = 77


def skip(why):
    print("skip: " + why)
    sys.exit(SKIP)


def tool(*args, body=None):
    return subprocess.run([TOOL, *args], input=body, capture_output=True, timeout=60, check=False)


def check(cond, what):
    if not cond:
        print("FAIL: " + what)
        sys.exit(1)
    print("ok: " + what)


def check_hosts_updated(worker):
    for ts, res in [(1800000000, worker.HostUpdateResult.added),
                    (1800000001, worker.HostUpdateResult.removed),
                    (1800000002, worker.HostUpdateResult.mixed),
                    (2**40, worker.HostUpdateResult.added),
                    (-5, worker.HostUpdateResult.removed)]:
        out = tool("hosts-updated", str(ts), str(int(res)))
        check(out.returncode == 0, "hosts-updated %d %d runs" % (ts, res))
        req = pickle.loads(out.stdout)
        check(type(req) is worker.HostsUpdatedRequest, "pickle.loads gives HostsUpdatedRequest")
        check(req.timestamp == ts and type(req.timestamp) is int, "timestamp %d" % ts)
        check(type(req.res) is worker.HostUpdateResult and req.res == res, "res %r" % res)


def parsed(out):
    lines = out.stdout.decode().splitlines()
    endpoints = [tuple(line.split(" ")) for line in lines if not line.startswith("key ")]
    keys = [line[4:] for line in lines if line.startswith("key ")]
    return endpoints, keys


def check_worker_addresses(worker, codec, secret):
    class Manager:
        updates = []

        def handle_hosts_updated(self, timestamp, res):
            self.updates.append((timestamp, res))

    key = secret.make_secret_key()
    service = worker.WorkerNotificationService(key, None, Manager())
    try:
        addresses = service.addresses()
        # What WorkerNotificationManager.init PUTs to /worker_addresses/<host>:<local rank>.
        body = codec.dumps_base64((addresses, key), to_ascii=False)
        out = tool("parse-addresses", body=body)
        check(out.returncode == 0, "a real worker's body is accepted: " + out.stderr.decode())
        endpoints, keys = parsed(out)
        want = [(iface, ip, str(port)) for iface, pairs in addresses.items() for ip, port in pairs]
        check(endpoints == want, "addresses %s read as %s" % (want, endpoints))
        check(keys == [key.hex()], "the 32-byte key")
        out = tool("notify", "1800000000", "2", body=body)
        check(out.returncode == 0 and out.stdout.decode().startswith("ok "),
              "notify answered by the real service: " + (out.stdout + out.stderr).decode().strip())
        check(Manager.updates == [(1800000000, worker.HostUpdateResult.added)],
              "the service's handler got (1800000000, added): %r" % Manager.updates)
        other = codec.dumps_base64((addresses, secret.make_secret_key()), to_ascii=False)
        out = tool("notify", "1800000001", "1", body=other)
        check(out.returncode == 1 and b"failed at every address" in out.stderr,
              "another key is refused by the real service: " + out.stderr.decode().strip())
        check(len(Manager.updates) == 1, "nothing more reached the handler")
    finally:
        service.shutdown()
    many = {"eth%d" % i: [("10.%d.0.1" % i, 1000 + i), ("10.%d.0.2" % i, 2000 + i)]
            for i in range(12)}
    many["lo"] = [("127.0.0.1", 65535)]
    out = tool("parse-addresses", body=codec.dumps_base64((many, bytes(range(32))), to_ascii=False))
    want = [(iface, ip, str(port)) for iface, pairs in many.items() for ip, port in pairs]
    check(out.returncode == 0 and parsed(out)[0] == want, "13 interfaces, 25 addresses")

    class Runs:
        def __reduce__(self):
            return (print, ("unpickling ran code",))

    out = tool("parse-addresses", body=codec.dumps_base64(({"lo": [Runs()]}, key), to_ascii=False))
    check(out.returncode == 1 and b"STACK_GLOBAL) is not accepted" in out.stderr,
          "a body that calls a function is refused: " + out.stderr.decode().strip())
    out = tool("parse-addresses", body=codec.dumps_base64((addresses, "not bytes"), to_ascii=False))
    check(out.returncode == 1 and b"the key is a str, not a bytes" in out.stderr,
          "a str key is refused: " + out.stderr.decode().strip())


def main():
    archive = os.environ.get("HOROVOD_ARCHIVE", "")
    if not archive or not os.path.isfile(archive):
        skip("no Horovod archive at '%s'" % archive)
    for module in ("cloudpickle", "psutil"):
        try:
            __import__(module)
        except ImportError:
            skip("%s has no %s (python3-%s)" % (sys.executable, module, module))
    with tempfile.TemporaryDirectory(prefix="hora-hvd-pickle-") as tmp:
        with tarfile.open(archive) as tar:
            # Python files only: the launcher's side of Horovod does not load its libraries.
            members = [m for m in tar.getmembers() if m.isdir() or m.name.endswith(".py")]
            tar.extractall(tmp, members=members)
        sys.path.insert(0, os.path.join(tmp, "site"))
        from horovod.runner.common.util import codec, secret
        from horovod.runner.elastic import worker
        check_hosts_updated(worker)
        check_worker_addresses(worker, codec, secret)


if __name__ == "__main__":
    TOOL = sys.argv[1]
    main()
