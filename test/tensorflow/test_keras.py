"""hora.keras (Keras 3, TensorFlow backend) at the job's size: DistributedOptimizer in
model.fit trains exactly as one process on the ranks' batches put together; the callbacks
(broadcast, metric average, learning-rate schedule and warmup, best checkpoint),
backward_passes_per_step, load_model, the module's collectives and its names."""

import os
import shutil
import tempfile

import numpy as np
import tensorflow as tf
import keras

import hora.keras as hvd
import hora.tensorflow.keras as hvd_tk
from harness import run

hvd.init()
R, N = hvd.rank(), hvd.size()
B = 4      # rows per rank per step
STEPS = 5


def data(r):
    g = np.random.default_rng(7 + r)
    x = g.normal(size=(B * STEPS, 6)).astype(np.float32)
    return x, (x @ np.arange(6, dtype=np.float32).reshape(6, 1) / 6).astype(np.float32)


def model(seed=0):
    keras.utils.set_random_seed(seed)
    return keras.Sequential([keras.Input((6,)), keras.layers.Dense(8, activation='tanh'),
                             keras.layers.Dense(1)])


def same_on_every_rank(weights):
    flat = np.concatenate([w.ravel() for w in weights]).astype(np.float64)
    gathered = hvd.allgather(flat[None, :]).numpy()
    return all(np.array_equal(gathered[0], g) for g in gathered)


def test_names():
    assert hvd_tk is hvd
    assert hvd_tk.callbacks is hvd.callbacks
    assert hvd.size() == N and hvd.rank() == R


def test_fit_matches_one_process_on_the_joint_batches():
    m = model()
    opt = hvd.DistributedOptimizer(keras.optimizers.SGD(0.1))
    m.compile(optimizer=opt, loss='mse')
    x, y = data(R)
    m.fit(x, y, batch_size=B, epochs=2, shuffle=False, verbose=0)
    # One process: step k's batch is every rank's k-th batch; the mean loss over it has the
    # average of the ranks' gradients as its gradient.
    ref = model()
    ref.compile(optimizer=keras.optimizers.SGD(0.1), loss='mse')
    xs = [data(r)[0] for r in range(N)]
    ys = [data(r)[1] for r in range(N)]
    jx = np.concatenate([np.concatenate([x_[k * B:(k + 1) * B] for x_ in xs])
                         for k in range(STEPS)])
    jy = np.concatenate([np.concatenate([y_[k * B:(k + 1) * B] for y_ in ys])
                         for k in range(STEPS)])
    ref.fit(jx, jy, batch_size=B * N, epochs=2, shuffle=False, verbose=0)
    for a, b in zip(m.get_weights(), ref.get_weights()):
        assert np.allclose(a, b, atol=1e-5), (a, b)
    assert same_on_every_rank(m.get_weights())
    assert type(opt).__name__ == 'SGD' and isinstance(opt, keras.optimizers.SGD)
    named = hvd.DistributedOptimizer('adam')  # Keras' shorthand
    assert isinstance(named, keras.optimizers.Adam) and named._hora_distributed


def test_broadcast_and_metric_average_callbacks():
    m = model(seed=R)  # different initial weights on every rank
    m.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.Adam(0.01)), loss='mse')
    raw, averaged = [], []

    class Record(keras.callbacks.Callback):
        def __init__(self, into):
            super().__init__()
            self.into = into

        def on_epoch_end(self, epoch, logs=None):
            self.into.append(float(logs['loss']))

    x, y = data(R)
    m.fit(x, y, batch_size=B, epochs=2, verbose=0,
          callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0), Record(raw),
                     hvd.callbacks.MetricAverageCallback(), Record(averaged)])
    assert same_on_every_rank(m.get_weights())
    assert same_on_every_rank([np.array(averaged)])
    every = hvd.allgather(tf.constant([raw], dtype=tf.float64)).numpy()
    assert np.allclose(averaged, every.mean(0)), (averaged, every)


def test_learning_rate_callbacks():
    m = model()
    m.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.1, momentum=0.9)),
              loss='mse')
    x, y = data(R)
    hist = m.fit(x, y, batch_size=B, epochs=3, verbose=0, callbacks=[
        hvd.callbacks.LearningRateScheduleCallback(initial_lr=0.1, multiplier=0.5)])
    assert np.allclose(hist.history['lr'], [0.1, 0.05, 0.025])
    assert np.isclose(m.optimizer.momentum, 0.9)  # restored after each change

    seen = []

    class Lr(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            seen.append(float(keras.ops.convert_to_numpy(self.model.optimizer.learning_rate)))

    m = model()
    m.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.1)), loss='mse')
    m.fit(x, y, batch_size=B, epochs=3, verbose=0, callbacks=[
        hvd.callbacks.LearningRateWarmupCallback(initial_lr=0.1, warmup_epochs=2), Lr()])
    first = 0.1 / N * (1.0 / STEPS * (N - 1) / 2 + 1)
    assert np.isclose(seen[0], first), (seen[0], first)
    assert np.isclose(seen[2 * STEPS - 1], 0.1), seen  # the warmup's last batch
    assert np.isclose(seen[-1], 0.1)


def test_backward_passes_per_step():
    var = keras.Variable(np.zeros(2, np.float32))
    opt = hvd.DistributedOptimizer(keras.optimizers.SGD(1.0), backward_passes_per_step=2,
                                   average_aggregated_gradients=True)
    g = tf.constant([float(R + 1), 1.0])
    opt.apply([g], [var])
    assert np.array_equal(var.numpy(), [0.0, 0.0])  # no step on the first pass
    opt.apply([g], [var])
    # (g + g) / 2 passes, averaged over the ranks.
    want = -np.array([np.mean([r + 1 for r in range(N)]), 1.0])
    assert np.allclose(var.numpy(), want), var.numpy()
    assert int(opt.iterations.numpy()) == 2


def test_sparse_gradients_in_fit():
    keras.utils.set_random_seed(0)
    m = keras.Sequential([keras.Input((3,), dtype='int32'), keras.layers.Embedding(10, 4),
                          keras.layers.Flatten(), keras.layers.Dense(1)])
    m.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.1)), loss='mse')
    ids = (np.arange(12).reshape(4, 3) + R) % 10
    m.fit(ids, np.ones((4, 1), np.float32) * R, batch_size=2, epochs=1, verbose=0)
    assert same_on_every_rank(m.get_weights())


def test_load_model_and_checkpoint():
    tmp = tempfile.mkdtemp(prefix='hora-keras-test-')
    try:
        m = model()
        m.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.Adam(0.01)), loss='mse')
        x, y = data(R)
        best = os.path.join(tmp, 'best.keras')
        m.fit(x, y, batch_size=B, epochs=2, verbose=0, validation_data=(x, y),
              callbacks=[hvd.callbacks.BestModelCheckpoint(filepath=best)])
        assert os.path.exists(best)
        path = os.path.join(tmp, 'model.keras')
        m.save(path)
        loaded = hvd.load_model(path)
        assert getattr(loaded.optimizer, '_hora_distributed', False)
        assert type(loaded.optimizer).__name__ == 'Adam'
        for a, b in zip(loaded.get_weights(), m.get_weights()):
            assert np.array_equal(a, b)
        loaded.fit(x, y, batch_size=B, epochs=1, verbose=0)
        assert same_on_every_rank(loaded.get_weights())
    finally:
        shutil.rmtree(tmp)


def test_module_collectives():
    assert np.isclose(hvd.allreduce(float(R)).numpy(), np.mean(range(N)))
    assert hvd.allreduce([1.0, 2.0], op=hvd.Sum).numpy().tolist() == [N, 2.0 * N]
    assert hvd.allgather([R]).numpy().tolist() == list(range(N))
    assert hvd.broadcast([R, R], N - 1).numpy().tolist() == [N - 1, N - 1]
    got = hvd.reducescatter(np.ones((N, 2), np.float32) * (R + 1), op=hvd.Sum).numpy()
    assert np.array_equal(got, np.full((1, 2), sum(r + 1 for r in range(N)), np.float32))


def test_tensorflow_distributed_optimizer_is_keras():
    import hora.tensorflow as hvd_tf
    opt = hvd_tf.DistributedOptimizer(keras.optimizers.SGD(0.1))
    assert getattr(opt, '_hora_distributed', False)
    try:
        hvd.DistributedOptimizer(keras.optimizers.SGD(0.1), op=hvd.Adasum
                                 if hasattr(hvd, 'Adasum') else 2)
    except ValueError:
        pass
    else:
        raise AssertionError('op=Adasum was accepted by hora.keras.DistributedOptimizer')


def test_elastic_state_in_a_fixed_size_job():
    m = model(seed=R)
    m.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.1)), loss='mse')
    x, y = data(R)
    m.fit(x[:B], y[:B], batch_size=B, epochs=1, verbose=0)  # builds the optimizer
    state = hvd.elastic.KerasState(m, batch=0, epoch=0)
    calls = []

    @hvd.elastic.run
    def train(state):
        calls.append(1)
        state.model.fit(x, y, batch_size=B, epochs=2, verbose=0, callbacks=[
            hvd.elastic.CommitStateCallback(state, batches_per_commit=2),
            hvd.elastic.UpdateBatchStateCallback(state),
            hvd.elastic.UpdateEpochStateCallback(state)])
    train(state)  # outside an elastic job: sync (rank 0's state everywhere), then one call
    assert calls == [1] and state.epoch == 2 and state.batch == 0
    assert same_on_every_rank(m.get_weights())
    saved = [w.copy() for w in m.get_weights()]
    m.set_weights([w + 1 for w in saved])
    state.restore()  # back to the last commit
    for a, b in zip(m.get_weights(), saved):
        assert np.array_equal(a, b)


run(globals())
