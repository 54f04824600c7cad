"""DistributedOptimizer's sparse gradients, sparse_as_dense, groups / num_groups and
process_set, and sparse_allreduce_async, run by every rank of a horarun job
(-np 1..4). Each test computes every rank's gradient in this process, averages them, and
compares that with what the distributed optimizer applied."""

import pytest
import torch

import hora.torch as hvd


@pytest.fixture(autouse=True)
def _init(world):
    yield


VOCAB, DIM = 12, 3


class Net(torch.nn.Module):
    def __init__(self, sparse):
        super().__init__()
        torch.manual_seed(7)
        self.emb = torch.nn.Embedding(VOCAB, DIM, sparse=sparse)
        self.fc = torch.nn.Linear(DIM, 2)

    def forward(self, ids):
        return self.fc(self.emb(ids)).sum()


def batch(r):
    """Rank r's token ids: overlapping across ranks, one repeated within the batch."""
    return torch.tensor([r % VOCAB, (r + 3) % VOCAB, (2 * r + 1) % VOCAB, r % VOCAB])


def expected_grads(make):
    """Every parameter's gradient averaged over the ranks, computed here for each rank."""
    total = None
    for r in range(hvd.size()):
        model = make()
        model(batch(r)).backward()
        grads = [p.grad.to_dense() for p in model.parameters()]
        total = grads if total is None else [t + g for t, g in zip(total, grads)]
    return [t / hvd.size() for t in total]


def train_step(model, **kwargs):
    """One step of SGD(lr=1) through DistributedOptimizer; returns the applied gradients (the
    parameters' change) in model order."""
    before = [p.detach().clone() for p in model.parameters()]
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=1.0),
                                   named_parameters=model.named_parameters(), **kwargs)
    opt.zero_grad()
    model(batch(hvd.rank())).backward()
    opt.step()
    return [b - p.detach() for b, p in zip(before, model.parameters())]


@pytest.mark.parametrize('sparse_as_dense', [False, True])
def test_sparse_gradients_match_dense(sparse_as_dense):
    want = expected_grads(lambda: Net(sparse=False))
    model = Net(sparse=True)
    got = train_step(model, sparse_as_dense=sparse_as_dense)
    assert model.emb.weight.grad.is_sparse  # the optimizer kept the gradient sparse
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-6)
    # The dense model through the same optimizer applies the same update.
    dense = train_step(Net(sparse=False))
    for g, d in zip(got, dense):
        torch.testing.assert_close(g, d, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize('op', [hvd.Average, hvd.Sum])
def test_sparse_allreduce_async(op):
    rows = torch.tensor([[hvd.rank() % 5, 4]])
    values = torch.tensor([[1.0 + hvd.rank(), 2.0], [10.0, 20.0 * (hvd.rank() + 1)]])
    t = torch.sparse_coo_tensor(rows, values, (6, 2))
    handle = hvd.sparse_allreduce_async(t, name='sparse.%d' % op, op=op)
    assert callable(handle)  # as Horovod's: a function, not a handle
    out = handle()
    assert out.is_sparse and out.shape == t.shape
    want = sum(torch.sparse_coo_tensor(torch.tensor([[r % 5, 4]]),
                                       torch.tensor([[1.0 + r, 2.0], [10.0, 20.0 * (r + 1)]]),
                                       (6, 2)).to_dense() for r in range(hvd.size()))
    if op == hvd.Average:
        want = want / hvd.size()
    torch.testing.assert_close(out.to_dense(), want)


def test_sparse_allreduce_refuses_min():
    t = torch.sparse_coo_tensor(torch.tensor([[0]]), torch.tensor([1.0]), (3,))
    with pytest.raises(ValueError, match='Average or hvd.Sum'):
        hvd.sparse_allreduce_async(t, name='sparse.min', op=hvd.Min)


class Deep(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(11)
        self.layers = torch.nn.Sequential(torch.nn.Linear(4, 5), torch.nn.Tanh(),
                                          torch.nn.Linear(5, 3), torch.nn.Tanh(),
                                          torch.nn.Linear(3, 1))

    def forward(self, r):
        torch.manual_seed(100 + r)
        return self.layers(torch.randn(6, 4)).pow(2).sum()


def deep_step(model, **kwargs):
    before = [p.detach().clone() for p in model.parameters()]
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=1.0),
                                   named_parameters=model.named_parameters(), **kwargs)
    for _ in range(2):  # two steps: the group counts start again after a step
        before = [p.detach().clone() for p in model.parameters()]
        opt.zero_grad()
        model(hvd.rank()).backward()
        opt.step()
    return opt, [b - p.detach() for b, p in zip(before, model.parameters())]


def expected_deep():
    """The second step's averaged gradients, computed here for each rank."""
    model = Deep()
    for step in range(2):
        grads = None
        for r in range(hvd.size()):
            model.zero_grad()
            model(r).backward()
            g = [p.grad.clone() for p in model.parameters()]
            grads = g if grads is None else [a + b for a, b in zip(grads, g)]
        grads = [g / hvd.size() for g in grads]
        if step == 0:
            with torch.no_grad():
                for p, g in zip(model.parameters(), grads):
                    p -= g
    return grads


def groups_of(opt):
    return sorted(len(g) for g in opt._group_counts)


@pytest.mark.parametrize('how', ['none', 'int', 'num_groups', 'list'])
def test_groups_match_ungrouped(how):
    model = Deep()
    params = list(model.parameters())
    kwargs = {'none': {}, 'int': {'groups': 2}, 'list': {'groups': [params[0:2], params[4:5]]},
              'num_groups': {'num_groups': 3}}[how]
    if how == 'num_groups':
        with pytest.warns(DeprecationWarning):
            opt, got = deep_step(model, **kwargs)
    else:
        opt, got = deep_step(model, **kwargs)
    want = expected_deep()
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-6)
    if hvd.size() > 1:  # groups are formed when hooks are (more than one rank)
        assert groups_of(opt) == {'none': [], 'int': [3, 3], 'num_groups': [2, 2, 2],
                                  'list': [1, 1, 1, 1, 2]}[how]


def test_groups_validation():
    params = list(Deep().parameters())
    opt = torch.optim.SGD(params, lr=1.0)
    with pytest.raises(ValueError, match='only appear once'):
        hvd.DistributedOptimizer(opt, groups=[params[:2], params[1:3]])
    with pytest.raises(ValueError, match='torch.Tensor'):
        hvd.DistributedOptimizer(opt, groups=[['weight']])
    with pytest.raises(ValueError, match='non-negative integer'):
        hvd.DistributedOptimizer(opt, groups=-1)
    with pytest.raises(ValueError, match='backward_passes_per_step'):
        hvd.DistributedOptimizer(opt, backward_passes_per_step=0)


def test_process_set():
    params = list(Deep().parameters())
    opt = torch.optim.SGD(params, lr=1.0)
    hvd.DistributedOptimizer(opt, process_set=hvd.global_process_set)  # accepted
    # A set never registered (init or add_process_set) is refused, as Horovod refuses it;
    # registered sets: test_process_sets.py.
    other = hvd.ProcessSet(list(range(hvd.size())))
    with pytest.raises(ValueError, match='not registered'):
        hvd.DistributedOptimizer(opt, process_set=other)
    with pytest.raises(ValueError, match='has not been registered'):
        hvd.allreduce(torch.ones(2), process_set=other)
