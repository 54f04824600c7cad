"""hora.torch.DistributedOptimizer: the gradients every rank applies equal those of one process
training on the concatenation of all ranks' batches."""

import pytest
import torch

import hora.torch as hvd

BATCH = 6  # per rank


@pytest.fixture(autouse=True)
def _init(world):
    yield


def make_model():
    torch.manual_seed(7)
    return torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))


def global_batch(step, size):
    g = torch.Generator().manual_seed(1000 + step)
    x = torch.randn(BATCH * size, 5, generator=g, dtype=torch.float64).float()
    y = torch.randint(0, 3, (BATCH * size,), generator=g)
    return x, y


def my_slice(x, y):
    r = hvd.rank()
    return x[r * BATCH:(r + 1) * BATCH], y[r * BATCH:(r + 1) * BATCH]


def loss_fn(model, x, y):
    return torch.nn.functional.cross_entropy(model(x), y)


def reference_grads(steps_x_y):
    """Gradients of one process that sees every rank's data: the mean loss over the global
    batch of each backward pass, summed over the passes."""
    model = make_model()
    for x, y in steps_x_y:
        loss_fn(model, x, y).backward()
    return [p.grad.clone() for p in model.parameters()]


@pytest.mark.parametrize('compression', ['none', 'fp16'])
def test_gradients_equal_single_process_on_concatenated_batch(compression):
    model = make_model()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.5),
                                   named_parameters=model.named_parameters(),
                                   compression=getattr(hvd.Compression, compression))
    x, y = global_batch(0, hvd.size())
    loss_fn(model, *my_slice(x, y)).backward()
    opt.synchronize()
    expect = reference_grads([(x, y)])
    tol = dict(atol=1e-6, rtol=1e-5) if compression == 'none' else dict(atol=2e-3, rtol=2e-3)
    for p, e in zip(model.parameters(), expect):
        assert p.grad.dtype == torch.float32
        torch.testing.assert_close(p.grad, e, **tol)
    with opt.skip_synchronize():
        opt.step()
    # Every rank applied the same update.
    params = hvd.allgather_object([p.detach().clone() for p in model.parameters()])
    for ps in params:
        assert all(torch.equal(a, b) for a, b in zip(ps, params[0]))


def test_training_steps_match_single_process():
    model = make_model()
    ref = make_model()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.3, momentum=0.9),
                                   named_parameters=model.named_parameters())
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.3, momentum=0.9)
    for step in range(4):
        x, y = global_batch(step, hvd.size())
        opt.zero_grad()
        loss_fn(model, *my_slice(x, y)).backward()
        opt.step()
        ref_opt.zero_grad()
        loss_fn(ref, x, y).backward()
        ref_opt.step()
    for p, q in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p.detach(), q.detach(), atol=1e-5, rtol=1e-5)


def test_backward_passes_per_step_accumulates_locally():
    model = make_model()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters(),
                                   backward_passes_per_step=3)
    batches = [global_batch(10 + k, hvd.size()) for k in range(3)]
    for k, (x, y) in enumerate(batches):
        loss_fn(model, *my_slice(x, y)).backward()
        if k < 2 and hvd.size() > 1:
            assert all(h is None for h, _ in opt._handles.values()), \
                'no allreduce before the last backward pass'
    opt.synchronize()
    for p, e in zip(model.parameters(), reference_grads(batches)):
        torch.testing.assert_close(p.grad, e, atol=1e-6, rtol=1e-5)
    if hvd.size() > 1:
        # One backward pass too many before step() is an error, as in Horovod.
        with opt.skip_synchronize():
            opt.step()
        opt.zero_grad()
        for k in range(3):
            loss_fn(model, *my_slice(*batches[k])).backward()
        with pytest.raises(AssertionError, match='backward_passes_per_step'):
            loss_fn(model, *my_slice(*batches[0])).backward()
        opt.synchronize()


def test_sum_op_and_predivide_factor():
    model = make_model()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters(), op=hvd.Sum)
    x, y = global_batch(20, hvd.size())
    loss_fn(model, *my_slice(x, y)).backward()
    opt.synchronize()
    for p, e in zip(model.parameters(), reference_grads([(x, y)])):
        torch.testing.assert_close(p.grad, e * hvd.size(), atol=1e-5, rtol=1e-5)

    model = make_model()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters(),
                                   gradient_predivide_factor=2.0)
    loss_fn(model, *my_slice(x, y)).backward()
    opt.synchronize()
    for p, e in zip(model.parameters(), reference_grads([(x, y)])):
        torch.testing.assert_close(p.grad, e, atol=1e-6, rtol=1e-5)


def test_parameter_without_gradient_is_still_reduced():
    # A parameter unused on some ranks gets a zero gradient there; synchronize() submits it.
    model = make_model()
    extra = torch.nn.Parameter(torch.zeros(2))
    params = list(model.named_parameters()) + [('extra', extra)]
    opt = hvd.DistributedOptimizer(torch.optim.SGD([p for _, p in params], lr=0.1),
                                   named_parameters=params)
    x, y = global_batch(30, hvd.size())
    loss = loss_fn(model, *my_slice(x, y))
    if hvd.rank() == 0:
        loss = loss + extra.sum()
    loss.backward()
    opt.synchronize()
    assert torch.allclose(extra.grad, torch.full((2,), 1.0 / hvd.size()))


def test_duplicate_names_are_refused():
    model = make_model()
    params = list(model.named_parameters())
    with pytest.raises(ValueError, match='unique'):
        hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                 named_parameters=[(params[0][0], p) for _, p in params])
