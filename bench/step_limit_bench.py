"""What a training step of spark_start's model can cost at best, per framework, measured side by
side in one job of 2 ranks (bench/step_limit.sh starts it with horarun on 2 test hosts x 1):

    step_limit_bench.py [--iters 100] [--rounds 5] [--parts compute,gloo,hora,...]

The model and batch are spark_start_bench.py's (a 784-256-256-10 MLP, batch 64 per rank, SGD,
one torch thread per rank): its 6 gradients hold 269,322 float32 (1.08 MB). Each part is a loop
of --iters iterations, timed on rank 0 after a barrier, and every rank runs the same loop at the
same time; the parts take turns, one further each round, so that a busy moment of the shared
machine falls on all alike; the table gives each part's median over the rounds, in ms per
iteration:

  compute       forward + backward + SGD step, no communication (both ranks compute at once,
                as they do in a real step)
  compute1      the same on rank 0 while rank 1 waits (a rank alone on the machine's 2 cores)
  gloo          torch.distributed.all_reduce of one 1.08 MB float32 tensor (gloo, what DDP's one
                bucket does per step)
  gloo_4b       the same with 1 element (the latency of one exchange)
  hora          hora.torch.allreduce_ of the same 1.08 MB tensor (the engine's bit-vector exchange,
                then the data allreduce)
  hora_4b       the same with 1 element
  hora_grouped  hora.torch.grouped_allreduce_ of the model's 6 gradient tensors (what
                DistributedOptimizer(groups=1) submits per step)
  ddp           a whole DDP step (torch DistributedDataParallel over gloo, SGD)
  compute_gloo  compute, then gloo's allreduce of the 1.08 MB tensor (a step as DDP's one bucket
                makes it, without DDP's copies and hooks)
  compute_hora  compute, then hora.torch.allreduce_ of it
  hora_step     a whole hora.torch.DistributedOptimizer step (its default: each gradient
                submitted as its hook fires, as Horovod's)
  hora_g1       a whole DistributedOptimizer(groups=1) step
  raw           no framework: the two ranks swap the 1.08 MB over one plain TCP connection, both
                directions at once (a sender thread, recv_into on the main one), and add nothing.
                Every allreduce of 2 ranks that sends the gradients uncompressed moves at least
                this much into each rank (a ring: half in its reduce-scatter, half in its
                allgather), so compute + raw is the fastest step any such allreduce allows here
  compute_raw   compute, then the raw swap, in one loop (the floor of a step, waits included)

and the limits: steps/s = 1000 / (compute + the framework's allreduce), and their ratio.
"""

import argparse
import os
import socket
import statistics
import threading
import time

import torch
import torch.distributed as dist

import hora.torch as hvd


def mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(),
                               torch.nn.Linear(256, 256), torch.nn.ReLU(),
                               torch.nn.Linear(256, 10))


class RawExchange:
    """A plain TCP connection between the 2 ranks (rank 0 listens, its port broadcast through
    torch.distributed) that swaps one buffer both ways at once: the floor under any allreduce."""

    def __init__(self, rank, nbytes):
        port = [0]
        if rank == 0:
            server = socket.create_server(('0.0.0.0', 0))
            port[0] = server.getsockname()[1]
        dist.broadcast_object_list(port, src=0)
        if rank == 0:
            self.conn, _ = server.accept()
            server.close()
        else:
            self.conn = socket.create_connection((os.environ['MASTER_ADDR'], port[0]))
        self.conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.out = memoryview(bytearray(os.urandom(nbytes)))
        self.into = memoryview(bytearray(nbytes))
        self.go = threading.Semaphore(0)
        self.sent = threading.Semaphore(0)
        threading.Thread(target=self._send_loop, daemon=True).start()

    def _send_loop(self):
        while True:
            self.go.acquire()
            self.conn.sendall(self.out)
            self.sent.release()

    def __call__(self):
        self.go.release()
        got, n = 0, len(self.into)
        while got < n:
            got += self.conn.recv_into(self.into[got:])
        self.sent.acquire()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--iters', type=int, default=100)
    ap.add_argument('--rounds', type=int, default=5)
    ap.add_argument('--parts', default='compute,compute1,gloo,gloo_4b,hora,hora_4b,hora_grouped,'
                    'compute_gloo,compute_hora,ddp,hora_step,hora_g1,raw,compute_raw')
    a = ap.parse_args()
    torch.set_num_threads(1)  # the test hosts share this machine's 2 cores
    hvd.init()
    rank = hvd.rank()
    # horarun sets RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT for torch.distributed.
    dist.init_process_group('gloo')

    g = torch.Generator().manual_seed(rank)
    x = torch.randn(64, 784, generator=g)
    y = torch.randint(0, 10, (64,), generator=g)
    loss_fn = torch.nn.CrossEntropyLoss()

    def stepper(model, opt):
        def step():
            opt.zero_grad()
            loss_fn(model(x), y).backward()
            opt.step()
        return step

    plain = mlp()
    compute = stepper(plain, torch.optim.SGD(plain.parameters(), lr=0.01))
    grads = [torch.randn_like(p) for p in plain.parameters()]
    flat = torch.randn(sum(t.numel() for t in grads))
    one = torch.zeros(1)
    ddp_model = torch.nn.parallel.DistributedDataParallel(mlp())
    ddp = stepper(ddp_model, torch.optim.SGD(ddp_model.parameters(), lr=0.01))

    def hora_stepper(groups):
        m = mlp()
        opt = hvd.DistributedOptimizer(torch.optim.SGD(m.parameters(), lr=0.01),
                                       named_parameters=m.named_parameters(), groups=groups)
        return stepper(m, opt)

    parts = {
        'compute': compute,
        'compute1': compute,
        'gloo': lambda: dist.all_reduce(flat),
        'gloo_4b': lambda: dist.all_reduce(one),
        'hora': lambda: hvd.allreduce_(flat, name='flat'),
        'hora_4b': lambda: hvd.allreduce_(one, name='one'),
        'hora_grouped': lambda: hvd.grouped_allreduce_(grads, name='grads'),
        'ddp': ddp,
        'compute_gloo': lambda: (compute(), dist.all_reduce(flat)),
        'compute_hora': lambda: (compute(), hvd.allreduce_(flat, name='flat')),
        'hora_step': hora_stepper(None),
        'hora_g1': hora_stepper(1),
    }
    order = a.parts.split(',')
    if 'raw' in order or 'compute_raw' in order:
        parts['raw'] = RawExchange(rank, flat.numel() * flat.element_size())
        parts['compute_raw'] = lambda: (compute(), parts['raw']())
    times = {k: [] for k in order}
    cpu = {k: [] for k in order}
    for k in order:  # warm-up: caches, the engine's response cache, DDP's buckets
        for _ in range(5):
            if k != 'compute1' or rank == 0:
                parts[k]()
    for r in range(a.rounds):
        for i in range(len(order)):
            k = order[(i + r) % len(order)]
            dist.barrier()
            t0, c0 = time.perf_counter(), time.process_time()
            if k != 'compute1' or rank == 0:
                for _ in range(a.iters):
                    parts[k]()
            times[k].append((time.perf_counter() - t0) * 1e3 / a.iters)
            cpu[k].append((time.process_time() - c0) * 1e3 / a.iters)
    dist.barrier()
    if rank == 0:
        med = {k: statistics.median(v) for k, v in times.items()}
        print('load average: %.2f %.2f %.2f' % os.getloadavg())
        print('%-14s %12s %16s %14s' % ('part', 'ms/iter', 'min-max', 'CPU ms/iter'))
        for k in order:
            print('%-14s %12.2f %16s %14.2f' % (k, med[k], '%.2f-%.2f' % (
                min(times[k]), max(times[k])), statistics.median(cpu[k])))
        c = med.get('compute')
        if c is not None and 'gloo' in med:
            td = 1e3 / (c + med['gloo'])
            print()
            print('limits (steps/s = 1000 / (compute + allreduce)):')
            print('  gloo (DDP, TorchDistributor)    %6.0f steps/s' % td)
            for k in ('hora', 'hora_grouped'):
                if k in med:
                    h = 1e3 / (c + med[k])
                    print('  %-30s  %6.0f steps/s   %.2fx gloo' % (k, h, h / td))
            # hora without its bit-vector exchange: a 1-element hora allreduce is two exchanges
            # (the bit vector, then the data), so half of hora_4b stands for the bit vector.
            if 'hora_4b' in med and 'hora' in med:
                h = 1e3 / (c + med['hora'] - med['hora_4b'] / 2)
                print('  %-30s  %6.0f steps/s   %.2fx gloo' % ('hora, no bit-vector exchange', h,
                                                              h / td))
        if 'compute_gloo' in med and 'compute_hora' in med:
            print('compute, then one 1.08 MB allreduce, in one loop: gloo %.0f steps/s, hora %.0f '
                  'steps/s (%.2fx gloo)' % (1e3 / med['compute_gloo'], 1e3 / med['compute_hora'],
                                            med['compute_gloo'] / med['compute_hora']))
        if c is not None and 'raw' in med and 'ddp' in med:
            # The floor: compute, then the least any uncompressed allreduce moves, with nothing
            # else. In wall time, and in CPU time (each rank has one of the 2 cores: a step
            # cannot take less than its own CPU work).
            best = c + med['raw']
            best_cpu = statistics.median(cpu['compute']) + statistics.median(cpu['raw'])
            print('floor (compute + raw exchange of the 1.08 MB, no framework): %.2f ms wall = '
                  '%.0f steps/s = %.2fx ddp; %.2f ms CPU = at most %.2fx ddp' % (
                      best, 1e3 / best, med['ddp'] / best, best_cpu, med['ddp'] / best_cpu))
        if 'compute_raw' in med and 'ddp' in med:
            print('compute, then the raw swap, in one loop: %.0f steps/s = %.2fx ddp' % (
                1e3 / med['compute_raw'], med['ddp'] / med['compute_raw']))
        if 'ddp' in med:
            print('whole steps: ' + ', '.join(
                '%s %.0f steps/s (%.2fx ddp)' % (k, 1e3 / med[k], med['ddp'] / med[k])
                for k in ('ddp', 'hora_step', 'hora_g1') if k in med))
        print('step_limit_done', flush=True)
    hvd.shutdown()
    # torch 1.13's gloo group can hang for minutes at interpreter exit (torch_steps_bench.py).
    dist.barrier()
    os._exit(0)


if __name__ == '__main__':
    main()
