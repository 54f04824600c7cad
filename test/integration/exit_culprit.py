"""The Python twin of exit_culprit.cc: every rank runs STEPS hora.torch allreduces; at step STEP,
rank CULPRIT leaves the way MODE says with exit code CODE. horarun must name that rank and exit
with its code.

    python3 exit_culprit.py MODE CODE STEP CULPRIT [STEPS]
    MODE: sys.exit   sys.exit(CODE) after hvd.init(): the interpreter finalizes, libhora's exit
                     handler says goodbye, then the process exits CODE
          os._exit   os._exit(CODE): no exit handlers, the connection drops
          raise      an uncaught exception (exit code 1; CODE is ignored)
          signal     os.kill(os.getpid(), CODE)
"""
import os
import sys

import torch

import hora.torch as hvd


def main():
    mode, code, step, culprit = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    steps = int(sys.argv[5]) if len(sys.argv) > 5 else 200
    hvd.init()
    t = torch.ones(1024)
    for s in range(steps):
        if hvd.rank() == culprit and s == step:
            print('rank %d leaving at step %d: %s %d' % (hvd.rank(), s, mode, code), flush=True)
            if mode == 'sys.exit':
                sys.exit(code)
            if mode == 'os._exit':
                os._exit(code)
            if mode == 'raise':
                raise RuntimeError('exit_culprit.py: raised on purpose')
            if mode == 'signal':
                os.kill(os.getpid(), code)
            sys.exit('exit_culprit.py: unknown mode ' + mode)
        hvd.allreduce(t, name='step')


if __name__ == '__main__':
    main()
