"""One rank of a hora.spark or hora.ray job: ``python3 -m hora.driver._rank``, the child process
of the engine's task (hora.driver.task), with the rank's environment (docs/environment.md).

Its stdin carries, length-prefixed, the pickled (control address, token, rank, host) and the
cloudpickled (fn, args, kwargs): the function and the job's token travel through the pipe, never
on a command line or in a file. stdin stays open while the task lives; when it closes (the task
ended, was killed or gave up on this rank) the rank exits at once, so an engine that kills its
task never leaves the rank running.

The rank reports its own outcome to the driver, and waits for the driver's answer, before it
exits: the driver has the traceback before it sees the rank's rendezvous connection end.
"""

import os
import pickle
import sys
import threading
import traceback

from hora.driver import wire
from hora.runner import recv_msg


def _watch_stdin():
    # Anything after the two messages is not expected; the end of the pipe is the signal. Raw
    # reads of the descriptor: a daemon thread blocked in sys.stdin's buffered reader holds its
    # lock, which the interpreter's shutdown then cannot take.
    while os.read(0, 65536):
        pass
    sys.stderr.write('hora: rank %s: the task that started this rank has ended; exiting\n'
                     % os.environ.get('HORA_RANK', '?'))
    sys.stderr.flush()
    os._exit(143)


class _Stdin(object):
    """recv_msg's socket interface over file descriptor 0."""

    def recv(self, n):
        return os.read(0, n)


def _dumps(message):
    import cloudpickle
    return cloudpickle.dumps(message)


def main():
    pipe = _Stdin()
    control, token, rank, host = pickle.loads(recv_msg(pipe, 1 << 20))
    payload = recv_msg(pipe)
    threading.Thread(target=_watch_stdin, name='hora stdin watch',
                     daemon=True).start()
    try:
        fn, args, kwargs = pickle.loads(payload)
        del payload
        value = fn(*args, **kwargs)
    except BaseException as e:  # noqa: BLE001 (SystemExit and KeyboardInterrupt are failures too)
        text = traceback.format_exc()
        sys.stderr.write(text)
        sys.stderr.flush()
        try:
            exc = _dumps(e)
        except Exception:  # noqa: BLE001 (an exception that does not pickle: the text suffices)
            exc = None
        wire.request(control, token, ('error', rank, host, text, exc))
        sys.exit(1)
    try:
        data = _dumps(value)
    except Exception as e:  # noqa: BLE001
        text = ('hora: rank %d: its return value of type %s could not be pickled: %s: %s\n'
                % (rank, type(value).__name__, type(e).__name__, e))
        sys.stderr.write(text)
        wire.request(control, token, ('error', rank, host, text, None))
        sys.exit(1)
    wire.request(control, token, ('result', rank, data))


if __name__ == '__main__':
    main()
