#!/usr/bin/env python3
"""Training steps per second of a model whose step is dominated by communication:
LAYERS x Linear(WIDTH, WIDTH) (default 4 x 2048: 4 gradients of 16.8 MB fp32, 67 MB a step),
batch 16 per rank, SGD. One program for every contender, chosen by --framework:

    hora     hora.torch.DistributedOptimizer (PYTHONPATH=build/python)
    horovod  horovod.torch.DistributedOptimizer, Horovod 0.28.1 (PYTHONPATH=<unpacked>/site)
    ddp      torch.nn.parallel.DistributedDataParallel over torch's gloo backend

It runs under horarun (every framework: horarun sets HOROVOD_*, RANK, WORLD_SIZE, MASTER_ADDR,
MASTER_PORT) and under Horovod's own `horovodrun --gloo` (horovod). For DDP outside horarun it
falls back to HOROVOD_RANK/HOROVOD_SIZE. Rank 0 prints one line:

    framework=hora np=2 steps_per_sec=1.234 step_ms=810.4 ... threads=1 cpu_ms_per_step=...

steps_per_sec is the slowest rank's (a MAX allreduce of the elapsed time). The torch intra-op
thread count is left as the launcher's environment sets it (OMP_NUM_THREADS), since that is
what a user gets; --threads N overrides it.
"""

import argparse
import os
import time

import torch
import torch.nn as nn


def make_model(layers, width):
    torch.manual_seed(0)
    mods = []
    for _ in range(layers):
        mods += [nn.Linear(width, width), nn.ReLU()]
    return nn.Sequential(*mods)


def env_int(*names, default=None):
    for n in names:
        if n in os.environ:
            return int(os.environ[n])
    if default is None:
        raise SystemExit('torch_steps_bench: none of %s is set; start it with horarun or horovodrun'
                         % ', '.join(names))
    return default


def main():
    p = argparse.ArgumentParser()
    p.add_argument('--framework', choices=['hora', 'horovod', 'ddp'], required=True)
    p.add_argument('--steps', type=int, default=20)
    p.add_argument('--warmup', type=int, default=3)
    p.add_argument('--batch-size', type=int, default=16, help='per rank')
    p.add_argument('--layers', type=int, default=4)
    p.add_argument('--width', type=int, default=2048)
    p.add_argument('--threads', type=int, default=0, help='torch intra-op threads (0: as set)')
    args = p.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)

    model = make_model(args.layers, args.width)
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    if args.framework in ('hora', 'horovod'):
        if args.framework == 'hora':
            import hora.torch as hvd
        else:
            import horovod.torch as hvd
        hvd.init()
        rank, size = hvd.rank(), hvd.size()
        hvd.broadcast_parameters(model.state_dict(), root_rank=0)
        opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters())

        def slowest(seconds):
            return hvd.allreduce(torch.tensor([seconds], dtype=torch.float64), op=hvd.Max).item()

        def finish():
            hvd.shutdown()
    else:
        import torch.distributed as dist
        rank = env_int('RANK', 'HOROVOD_RANK')
        size = env_int('WORLD_SIZE', 'HOROVOD_SIZE')
        os.environ.setdefault('MASTER_ADDR', '127.0.0.1')
        os.environ.setdefault('MASTER_PORT', '29517')
        dist.init_process_group('gloo', rank=rank, world_size=size)
        model = nn.parallel.DistributedDataParallel(model)

        def slowest(seconds):
            t = torch.tensor([seconds], dtype=torch.float64)
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            return t.item()

        def finish():
            # torch 1.13's gloo group (destroy_process_group, or interpreter exit with DDP's
            # reducer alive) can hang for minutes at the end: leave once every rank is done.
            dist.barrier()
            os._exit(0)

    g = torch.Generator().manual_seed(1 + rank)
    x = torch.randn(args.batch_size, args.width, generator=g)
    y = torch.randn(args.batch_size, args.width, generator=g)

    def step():
        opt.zero_grad()
        ((model(x) - y) ** 2).mean().backward()
        opt.step()

    for _ in range(args.warmup):
        step()
    slowest(0.0)  # a barrier: every rank starts timing together
    start, cpu_start = time.perf_counter(), time.process_time()
    for _ in range(args.steps):
        step()
    # CPU seconds of this process (every thread: torch's, the framework's background threads)
    # per step: on a shared machine, steps/s ~ the CPU share a rank gets / its CPU per step.
    cpu = time.process_time() - cpu_start
    elapsed = slowest(time.perf_counter() - start)
    if rank == 0:
        print('framework=%s np=%d steps_per_sec=%.3f step_ms=%.1f steps=%d batch=%d '
              'grad_mb=%.1f threads=%d cpu_ms_per_step=%.1f'
              % (args.framework, size, args.steps / elapsed, 1000 * elapsed / args.steps,
                 args.steps, args.batch_size,
                 sum(q.numel() for q in model.parameters()) * 4 / 1e6, torch.get_num_threads(),
                 1000 * cpu / args.steps),
              flush=True)
    finish()


if __name__ == '__main__':
    main()
