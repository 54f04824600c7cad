"""The control connection between the driver (hora.driver.job) and the tasks and ranks
(hora.driver.task, hora.driver._rank): length-prefixed pickled tuples over TCP, after a token
that proves the peer got the job's closure (it travels there with the rendezvous secret).

Messages to the driver (each answered ``('ok',)`` when it carries a rank's outcome):
  ('hello', rank, host, pid)           a task started its rank's process (pid: the child)
  ('out', rank, stream, bytes)         a line (or the last piece) of the rank's stdout/stderr
  ('result', rank, value_bytes)        the rank's return value, pickled (from the rank itself)
  ('error', rank, host, text, exc)     the rank raised: traceback text, pickled exception or None
  ('exit', rank, host, code, tail)     the rank's process ended (code: its exit status, negative
                                       for a signal; tail: its last stderr lines)
Messages from the driver to a task:
  ('abort', reason)                    end the rank's process now
"""

import hmac
import pickle
import socket

from hora.runner import recv_msg, send_msg

IO_TIMEOUT = 60.0  # seconds a peer may take to send or take one message
MAX_MESSAGE = 1 << 34  # a rank's pickled result may be large, not unbounded


def connect(address, token, timeout=IO_TIMEOUT):
    """A connection to the driver's control port that has sent the token."""
    host, port = address
    sock = socket.create_connection((host, port), timeout=timeout)
    try:
        send_msg(sock, token)
    except BaseException:
        sock.close()
        raise
    return sock


def send(sock, message):
    send_msg(sock, pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL))


def receive(sock):
    return pickle.loads(recv_msg(sock, MAX_MESSAGE))


def check_token(sock, token):
    return hmac.compare_digest(recv_msg(sock, 64), token)


def request(address, token, message, timeout=IO_TIMEOUT):
    """Sends one message on a connection of its own and waits for the driver's answer, so that
    what it carries is recorded before the caller goes on (a rank reports its outcome before its
    process ends and its rendezvous connection drops)."""
    with connect(address, token, timeout) as sock:
        send(sock, message)
        return receive(sock)
