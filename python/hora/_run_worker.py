"""One rank of hora.run: ``python3 -m hora._run_worker`` under horarun. Fetches the cloudpickled
function from the caller (hora.runner), calls it, and sends back ``('ok', value, None)`` or
``('error', exception, traceback text)``; exits 1 after an exception so that horarun ends the job
as it would for a script."""

import os
import pickle
import socket
import sys
import traceback

from hora.runner import ENV_PORT, ENV_TOKEN, recv_msg, send_msg

_CONNECT_TIMEOUT = 60.0


def _caller_address():
    try:
        port = int(os.environ[ENV_PORT])
        token = os.environ[ENV_TOKEN].encode()
        rendezvous = os.environ['HORA_RENDEZVOUS']
    except (KeyError, ValueError) as e:
        sys.exit('hora._run_worker: %s is missing or wrong: run it through hora.run(), which '
                 'starts it under horarun with %s, %s and HORA_RENDEZVOUS set'
                 % (e, ENV_PORT, ENV_TOKEN))
    host = rendezvous.rsplit(':', 1)[0].strip('[]')  # the launcher, reachable from this rank
    return host, port, token


def _request(address, token, what, payload=None):
    host, port = address
    try:
        with socket.create_connection((host, port), timeout=_CONNECT_TIMEOUT) as sock:
            send_msg(sock, token)
            send_msg(sock, what)
            if payload is not None:
                send_msg(sock, payload)
            return recv_msg(sock)
    except OSError as e:
        sys.exit('hora._run_worker: rank %s: %s from hora.run at %s:%d failed: %s (is that port '
                 'reachable from this host? hora.run listens on every interface of the caller)'
                 % (os.environ.get('HORA_RANK', '?'), what.decode(), host, port, e))


def _dumps(result):
    import cloudpickle
    try:
        return cloudpickle.dumps(result)
    except Exception as e:  # noqa: BLE001 (the value or the exception does not pickle)
        kind, value, tb = result
        text = tb or ''
        text += 'hora.run: the %s of type %s could not be pickled: %s: %s\n' % (
            'exception' if kind == 'error' else 'return value', type(value).__name__,
            type(e).__name__, e)
        return cloudpickle.dumps(('error', None, text))


def main():
    host, port, token = _caller_address()
    rank = int(os.environ.get('HORA_RANK', '0'))
    func, args, kwargs = pickle.loads(_request((host, port), token, b'func'))
    failed = False
    try:
        result = ('ok', func(*args, **kwargs), None)
    except BaseException as e:  # noqa: BLE001 (SystemExit and KeyboardInterrupt too)
        failed = True
        tb = traceback.format_exc()
        sys.stderr.write(tb)
        result = ('error', e, tb)
    _request((host, port), token, b'result %d' % rank, _dumps(result))
    sys.exit(1 if failed else 0)


if __name__ == '__main__':
    main()
