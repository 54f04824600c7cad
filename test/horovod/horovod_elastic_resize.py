# A real Horovod elastic PyTorch program whose size changes while it runs, for the elastic cases
# of test/elastic/elastic_test.sh (horarun --min-np/--max-np --host-discovery-script): it commits
# every step, so a reset (hosts added: HostsUpdatedInterrupt at the next commit; a peer killed:
# HorovodInternalError, then the last commit restored) loses at most one step.
#   python3 horovod_elastic_resize.py STEPS FINAL_SIZE
# Trains STEPS steps, and more (up to 50 times STEPS) until the job has FINAL_SIZE ranks, so a
# slow start of the new workers cannot end the job before it grows. Rank 0 prints
# "step N size S" each step, every rank "reset rank R size S" after each reset, and at the end
# "done: rank R of S, step N, weights W right" once an allgather shows every rank holds the
# same weights (raises otherwise).
import sys
import zlib
import time

import horovod.torch as hvd
import torch

STEPS, FINAL_SIZE = int(sys.argv[1]), int(sys.argv[2])

hvd.init()
torch.manual_seed(1234 + hvd.rank())  # different initial weights: the state's sync must fix that
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())


def batch(step):
    """This rank's batch at `step`: a function of the position alone."""
    gen = torch.Generator().manual_seed(step * 1000 + hvd.rank())
    x = torch.randn(16, 8, generator=gen)
    return x, x.sum(dim=1, keepdim=True)


@hvd.elastic.run
def train(state):
    while state.step < STEPS or (hvd.size() < FINAL_SIZE and state.step < 50 * STEPS):
        x, y = batch(state.step)
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()
        state.step += 1
        if hvd.rank() == 0:
            print(f"step {state.step} size {hvd.size()}", flush=True)
        time.sleep(0.05)
        state.commit()


def on_reset():
    print(f"reset rank {hvd.rank()} size {hvd.size()}", flush=True)


state = hvd.elastic.TorchState(model, optimizer, step=0)
state.register_reset_callbacks([on_reset])
train(state)

flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
everyone = hvd.allgather(flat.unsqueeze(0))
for r in range(hvd.size()):
    assert torch.equal(everyone[r], everyone[0]), f"rank {r}'s weights differ from rank 0's"
weights = format(zlib.crc32(everyone[0].numpy().tobytes()), "08x")
print(f"done: rank {hvd.rank()} of {hvd.size()}, step {state.step}, weights {weights} right",
      flush=True)
hvd.shutdown()
