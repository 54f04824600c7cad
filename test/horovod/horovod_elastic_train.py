# A real Horovod elastic PyTorch program, run by horovod_test.sh under horarun in a fixed-size
# job (as `horovodrun -np 2 python horovod_elastic_train.py` runs it): `@hvd.elastic.run`
# registers the worker's notification service (PUT worker_addresses/<host>:<local_rank>),
# `hvd.elastic.TorchState` syncs model, optimizer and counters from rank 0, and the loop
# commits every few batches. Prints "horovod-elastic ok rank=R size=N" when every rank holds
# the same weights; raises otherwise.
import horovod.torch as hvd
import torch

hvd.init()
rank, size = hvd.rank(), hvd.size()
torch.manual_seed(1234 + rank)  # different initial weights: the state's sync must fix that

model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())

EPOCHS, BATCHES = 2, 6


def shard(epoch, batch):
    """This rank's batch: a function of the position alone, so a restored state replays it."""
    gen = torch.Generator().manual_seed((hvd.rank() * EPOCHS + epoch) * BATCHES + batch)
    x = torch.randn(32, 8, generator=gen)
    return x, x.sum(dim=1, keepdim=True)


@hvd.elastic.run
def train(state):
    for state.epoch in range(state.epoch, EPOCHS):
        for state.batch in range(state.batch, BATCHES):
            x, y = shard(state.epoch, state.batch)
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
            state.loss = loss.item()
            if state.batch % 2 == 1:
                state.commit()
        state.batch = 0
        state.commit()
    return state.loss


state = hvd.elastic.TorchState(model, optimizer, batch=0, epoch=0, loss=0.0)
loss = train(state)
assert state.epoch == EPOCHS - 1 and state.batch == 0, f"state: {state.epoch} {state.batch}"

# Every rank holds the same parameters: synced start, averaged gradients, same steps.
flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
everyone = hvd.allgather(flat.unsqueeze(0))
for r in range(size):
    assert torch.equal(everyone[r], everyone[0]), f"rank {r} parameters differ"
checksum = float(flat.double().sum())
print(f"horovod-elastic ok rank={rank} size={size} loss={loss:.4f} weights={checksum:.6f}",
      flush=True)
hvd.shutdown()
