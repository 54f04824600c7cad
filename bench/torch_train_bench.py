#!/usr/bin/env python3
"""Training steps per second of one model, with hora.torch.DistributedOptimizer (--mode hora) or
torch.nn.parallel.DistributedDataParallel over torch's gloo backend (--mode ddp), or with no
gradient exchange at all (--mode local: each rank trains alone; the ceiling of the other two).

Launch it with horarun in both modes (horarun sets RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT,
which torch.distributed reads):

    PYTHONPATH=build/python build/cli/horarun -np 2 /usr/bin/python3 bench/torch_train_bench.py --mode hora
    build/cli/horarun -np 2 /usr/bin/python3 bench/torch_train_bench.py --mode ddp

Rank 0 prints one line: `mode=hora np=2 steps_per_sec=123.4 ...`. Every rank uses one thread
and random data of a fixed seed, so both modes do the same arithmetic; only the gradient
exchange differs.
"""

import argparse
import os
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def make_model(hidden):
    torch.manual_seed(0)
    return nn.Sequential(nn.Flatten(), nn.Linear(28 * 28, hidden), nn.ReLU(),
                         nn.Linear(hidden, hidden // 2), nn.ReLU(), nn.Linear(hidden // 2, 10))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('--mode', choices=['hora', 'ddp', 'local'], required=True)
    parser.add_argument('--steps', type=int, default=300)
    parser.add_argument('--warmup', type=int, default=30)
    parser.add_argument('--batch-size', type=int, default=32, help='per rank')
    parser.add_argument('--hidden', type=int, default=256)
    args = parser.parse_args()
    torch.set_num_threads(1)

    model = make_model(args.hidden)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    if args.mode == 'hora':
        import hora.torch as hvd
        hvd.init()
        rank, size = hvd.rank(), hvd.size()
        hvd.broadcast_parameters(model.state_dict(), root_rank=0)
        opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters())

        def barrier():
            hvd.barrier()

        def slowest(seconds):
            return hvd.allreduce(torch.tensor(seconds, dtype=torch.float64), op=hvd.Max).item()
    elif args.mode == 'local':
        # No gradient exchange at all: the ceiling both other modes approach.
        rank, size = int(os.environ.get('RANK', 0)), int(os.environ.get('WORLD_SIZE', 1))

        def barrier():
            pass

        def slowest(seconds):
            return seconds
    else:
        import torch.distributed as dist
        dist.init_process_group('gloo', rank=int(os.environ['RANK']),
                                world_size=int(os.environ['WORLD_SIZE']))
        rank, size = dist.get_rank(), dist.get_world_size()
        model = nn.parallel.DistributedDataParallel(model)

        def barrier():
            dist.barrier()

        def slowest(seconds):
            t = torch.tensor(seconds, dtype=torch.float64)
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            return t.item()

    g = torch.Generator().manual_seed(1 + rank)
    x = torch.randn(16, args.batch_size, 1, 28, 28, generator=g)
    y = torch.randint(0, 10, (16, args.batch_size), generator=g)

    def step(i):
        opt.zero_grad()
        F.cross_entropy(model(x[i % 16]), y[i % 16]).backward()
        opt.step()

    for i in range(args.warmup):
        step(i)
    barrier()
    start = time.perf_counter()
    for i in range(args.steps):
        step(i)
    elapsed = slowest(time.perf_counter() - start)
    params = sum(p.numel() for p in model.parameters())
    if rank == 0:
        print('mode=%s np=%d steps_per_sec=%.1f steps=%d batch=%d params=%d'
              % (args.mode, size, args.steps / elapsed, args.steps, args.batch_size, params),
              flush=True)
    if args.mode == 'hora':
        hvd.shutdown()
    elif args.mode == 'ddp':
        dist.destroy_process_group()


if __name__ == '__main__':
    main()
