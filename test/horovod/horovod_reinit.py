# Horovod re-initialised in one process, as an elastic reset does: hvd.init(), an allreduce,
# hvd.shutdown(), hvd.init() again (the gloo contexts rendezvous a second time through the same
# scopes: global, local_<host>, cross_<local rank>), an allreduce again. Run by horovod_test.sh
# under horarun. Prints "horovod-reinit ok rank=R size=N" when both rounds gave the right sums.
import horovod.torch as hvd
import torch

ROUNDS = 3
for round_ in range(ROUNDS):
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    t = torch.full((4,), float(rank + 1 + round_))
    expected = size * (size + 1) / 2 + size * round_
    got = hvd.allreduce(t, op=hvd.Sum, name=f"sum_{round_}")
    assert torch.equal(got, torch.full((4,), expected)), f"round {round_}: {got} != {expected}"
    assert hvd.broadcast_object(f"round {round_}", root_rank=0) == f"round {round_}"
    hvd.shutdown()
    assert not hvd.is_initialized(), f"round {round_}: still initialized after shutdown"

print(f"horovod-reinit ok rank={rank} size={size} rounds={ROUNDS}", flush=True)
