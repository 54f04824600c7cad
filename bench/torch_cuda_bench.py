"""hora.torch's allreduce on CUDA tensors next to torch.distributed's NCCL backend, side by side
in one process (docs/gpu.md). Run it as one rank:

    horarun -np 1 python3 bench/torch_cuda_bench.py

For each size: the mean time of one completed allreduce (the call and the GPU work: hora's call
returns once NCCL has finished; torch's is followed by torch.cuda.synchronize()), in
microseconds, after warm-up calls, and the ratio torch / hora (above 1: hora is faster). Both
reduce the same float32 tensor on the same GPU; hora through its own NCCL communicator, torch
through its ProcessGroupNCCL. Exit 77 where torch sees no GPU."""

import os
import socket
import sys
import time

import torch
import torch.distributed as dist

import hora.torch as hvd


def timed(fn, iters, warmup=5):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(iters):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / iters * 1e6


def main():
    if not torch.cuda.is_available():
        print('torch sees no GPU: nothing to time')
        return 77
    hvd.init()
    if hvd.size() != 1:
        print('run it as one rank (horarun -np 1): torch.distributed is set up for one')
        return 2
    dev = torch.device('cuda', hvd.local_rank())
    torch.cuda.set_device(dev)
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        port = s.getsockname()[1]
    dist.init_process_group('nccl', init_method='tcp://127.0.0.1:%d' % port, rank=0,
                            world_size=1)
    print('# hora.torch allreduce (HORA_GPU_OPERATIONS=%s) vs torch.distributed nccl, %s' %
          (os.environ.get('HORA_GPU_OPERATIONS') or 'nccl', torch.cuda.get_device_name(dev)))
    print('%12s %12s %12s %8s' % ('size (B)', 'hora (us)', 'torch (us)', 'torch/hora'))
    size = 1024
    while size <= 256 << 20:
        t = torch.ones(size // 4, device=dev)
        iters = 50 if size <= 1 << 20 else 10

        def hora_call():
            hvd.allreduce_(t, op=hvd.Sum, name='bench')

        def torch_call():
            dist.all_reduce(t)
            torch.cuda.synchronize()
        h = timed(hora_call, iters)
        g = timed(torch_call, iters)
        print('%12d %12.1f %12.1f %8.2f' % (size, h, g, g / h))
        size *= 4
    dist.destroy_process_group()
    hvd.shutdown()
    return 0


if __name__ == '__main__':
    sys.exit(main())
