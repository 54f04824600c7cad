# A real Horovod PyTorch program, run by horovod_test.sh under horarun: collectives, parameter
# and optimizer-state broadcast, DistributedOptimizer steps, and equal parameters everywhere.
# Prints "horovod-torch ok rank=R size=N" when every check passed; raises otherwise.
import horovod.torch as hvd
import torch

hvd.init()
rank, size = hvd.rank(), hvd.size()
torch.manual_seed(1234 + rank)  # different initial weights per rank: broadcast must fix that

# allreduce: sum and average of rank-dependent tensors.
t = torch.full((4,), float(rank + 1))
total = size * (size + 1) / 2
assert torch.allclose(hvd.allreduce(t, op=hvd.Sum), torch.full((4,), total)), "allreduce sum"
assert torch.allclose(hvd.allreduce(t, op=hvd.Average), torch.full((4,), total / size)), "avg"

# allgather: rank r contributes r+1 rows of value r.
g = hvd.allgather(torch.full((rank + 1, 2), float(rank)))
expected = torch.cat([torch.full((r + 1, 2), float(r)) for r in range(size)])
assert torch.equal(g, expected), f"allgather: {g}"

# broadcast of a plain tensor from the last rank.
b = hvd.broadcast(torch.full((3,), float(rank)), root_rank=size - 1)
assert torch.equal(b, torch.full((3,), float(size - 1))), "broadcast"

model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
hvd.broadcast_parameters(model.state_dict(), root_rank=0)
optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())

# One step so the momentum buffers exist, then broadcast the optimizer state as a user would
# after loading a checkpoint on rank 0.
data_gen = torch.Generator().manual_seed(99 + rank)  # each rank trains on its own shard
for step in range(5):
    x = torch.randn(32, 8, generator=data_gen)
    y = x.sum(dim=1, keepdim=True)
    optimizer.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
    if step == 0:
        hvd.broadcast_optimizer_state(optimizer, root_rank=0)

# Every rank holds the same parameters: averaged gradients, same start, same steps.
flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
everyone = hvd.allgather(flat.unsqueeze(0))
for r in range(size):
    assert torch.allclose(everyone[r], everyone[0], atol=1e-6), f"rank {r} parameters differ"
state = optimizer.state_dict()["state"]
assert len(state) == len(list(model.parameters())), "optimizer state not complete"

print(f"horovod-torch ok rank={rank} size={size} loss={loss.item():.4f}", flush=True)
hvd.shutdown()
