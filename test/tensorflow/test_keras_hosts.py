"""model.fit with hora.keras across two test hosts x 1 rank: network namespaces with sshd
(scripts/testhosts.sh up --index auto, torn down at the end even when the test fails), the job
launched from this machine over SSH. Both ranks train the same model to the same weights.
Exits 77 (skipped) without root, ip netns or sshd."""

import os
import subprocess
import sys

from harness import run, two_test_hosts

TRAIN = '''
import os, numpy as np, keras
import hora.keras as hvd
hvd.init()
keras.utils.set_random_seed(hvd.rank())  # different on each host: the callback syncs them
rng = np.random.default_rng(hvd.rank())
x = rng.normal(size=(512, 16)).astype('float32')
y = (x[:, :8].sum(1) > x[:, 8:].sum(1)).astype('int32')
m = keras.Sequential([keras.Input((16,)), keras.layers.Dense(64, activation='relu'),
                      keras.layers.Dense(2)])
m.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.Adam(0.01)),
          loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
          metrics=['accuracy'])
h = m.fit(x, y, batch_size=32, epochs=3, verbose=0,
          callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0),
                     hvd.callbacks.MetricAverageCallback()])
w = np.concatenate([v.ravel() for v in m.get_weights()]).astype(np.float64)
print('RESULT %s %d %.10e %.4f' % (os.environ['HORA_HOSTNAME'], hvd.size(), w.sum(),
                                   h.history['accuracy'][-1]))
'''


def test_fit_on_two_hosts():
    with two_test_hosts('hora-keras-hosts-') as (env, tmp):
        script = os.path.join(tmp, 'train.py')
        with open(script, 'w') as f:
            f.write(TRAIN)
        out = subprocess.run(
            [os.environ['HORARUN'], '--ssh-config', env['HORA_TESTHOSTS_SSH_CONFIG'],
             '-H', 'h1:1,h2:1', '-np', '2', '--start-timeout', '180', sys.executable, script],
            capture_output=True, text=True, timeout=600, cwd=tmp)
        assert out.returncode == 0, out.stdout + out.stderr
        results = sorted(line.split('RESULT ', 1)[1].split()
                         for line in out.stdout.splitlines() if 'RESULT ' in line)
        assert [r[0] for r in results] == ['h1', 'h2'], out.stdout
        assert all(r[1] == '2' for r in results)
        assert results[0][2] == results[1][2], results  # the same weights on both hosts
        assert float(results[0][3]) > 0.8, results
        print('  ' + '; '.join(' '.join(r) for r in results))


run(globals())
