"""Elastic TensorFlow and Keras jobs under horarun on two test hosts x 1 rank: hosts come from a
discovery script (--host-discovery-script, --min-np 1 --max-np 2), h2's worker is killed and h2
leaves the listing (the job shrinks to h1), then h2 comes back (the job grows to 2). Run twice:
hora.tensorflow.elastic (TensorFlowState, a DistributedGradientTape loop under
hvd.elastic.run) and hora.keras.elastic (KerasState, model.fit with the commit and update
callbacks). Each worker prints what every commit saved and what it holds after every sync
(weights checksum, epoch, batch), and the test checks that after the shrink the survivor holds
its own last commit, and after the growth both ranks hold it (the new worker got rank 0's
weights, epoch and batch), that training went on from there, and that both ranks end with the
same weights. The hosts are network namespaces (scripts/testhosts.sh up --index auto), torn
down at the end even when the test fails; exits 77 (skipped) without root, ip netns or sshd."""

import os
import re
import signal
import subprocess
import sys
import time

from harness import run, two_test_hosts

TRAIN = r'''
import os, sys, time, zlib
import numpy as np
import tensorflow as tf
import keras

import hora.tensorflow as hvd_tf
MODE, STOP = sys.argv[1], sys.argv[2]
if MODE == 'tf':
    import hora.tensorflow as hvd
else:
    import hora.keras as hvd
hvd.init()
BATCHES, GLOBAL_BATCH = 12, 24
rng = np.random.default_rng(7)
X = rng.normal(size=(BATCHES * GLOBAL_BATCH, 8)).astype('float32')
Y = (X @ rng.normal(size=(8, 1))).astype('float32')


def crc(values):
    return '%08x' % zlib.crc32(b''.join(np.asarray(v).tobytes() for v in values))


def log(kind, state, values):
    print('%s host=%s size=%d epoch=%d batch=%d w=%s' % (
        kind, os.environ['HORA_HOSTNAME'], hvd.size(), state.epoch, state.batch, crc(values)),
        flush=True)


def stop(state):
    # Rank 0 decides for everyone, once the test has seen what it waits for.
    return hvd_tf.broadcast_object(os.path.exists(STOP) and state.epoch >= 2, root_rank=0,
                                   name='stop')


def shard(batch):
    rows = slice(batch * GLOBAL_BATCH, (batch + 1) * GLOBAL_BATCH)
    return X[rows][hvd.rank()::hvd.size()], Y[rows][hvd.rank()::hvd.size()]


keras.utils.set_random_seed(100 + hvd.rank())  # different on purpose: sync() gives rank 0's
if MODE == 'tf':
    w = tf.Variable(tf.random.normal([8, 1]))
    b = tf.Variable(tf.zeros([1]))

    class State(hvd.elastic.TensorFlowState):
        def save(self):
            super().save()
            log('COMMIT', self, [w, b])

    state = State([w, b], epoch=0, batch=0)

    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((x @ w + b - y) ** 2)
        grads = hvd.DistributedGradientTape(tape).gradient(loss, [w, b])
        for v, g in zip([w, b], grads):
            v.assign_sub(0.05 * g)

    @hvd.elastic.run
    def train(state):
        log('SYNC', state, [w, b])
        while True:
            for state.batch in range(state.batch, BATCHES):
                if state.batch % 3 == 0:
                    state.commit()
                step(*shard(state.batch))
                time.sleep(0.05)
            state.epoch, state.batch = state.epoch + 1, 0
            state.commit()
            if stop(state):
                return [w, b]
else:
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(4), keras.layers.Dense(1)])
    model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.02, momentum=0.5)),
                  loss='mse')

    class State(hvd.elastic.KerasState):
        def save(self):
            super().save()
            log('COMMIT', self, model.get_weights())

    state = State(model, epoch=0, batch=0)

    class Pace(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            time.sleep(0.05)

    # The state's epoch and batch are brought up to date before each commit.
    callbacks = [Pace(), hvd.elastic.UpdateBatchStateCallback(state),
                 hvd.elastic.UpdateEpochStateCallback(state),
                 hvd.elastic.CommitStateCallback(state, batches_per_commit=3)]

    @hvd.elastic.run
    def train(state):
        log('SYNC', state, model.get_weights())
        while True:
            x = np.concatenate([shard(i)[0] for i in range(BATCHES)])
            y = np.concatenate([shard(i)[1] for i in range(BATCHES)])
            model.fit(x, y, batch_size=GLOBAL_BATCH // hvd.size(), epochs=state.epoch + 1,
                      initial_epoch=state.epoch, verbose=0, shuffle=False, callbacks=callbacks)
            if stop(state):
                return model.get_weights()

log('DONE', state, train(state))
'''

LINE = re.compile(r'(COMMIT|SYNC|DONE) host=(\S+) size=(\d+) epoch=(\d+) batch=(\d+) w=(\S+)')


class Job(object):
    """One horarun job in the background; its output in a file read as it grows."""

    def __init__(self, tmp, env, mode):
        self.tmp, self.env, self.mode = tmp, env, mode
        self.hosts = os.path.join(tmp, 'hosts')
        self.stop = os.path.join(tmp, 'stop-' + mode)
        self.out = os.path.join(tmp, 'out-' + mode)
        self.set_hosts('h1:1', 'h2:1')
        discover = os.path.join(tmp, 'discover.sh')
        with open(discover, 'w') as f:
            f.write('#!/bin/sh\ncat %s\n' % self.hosts)
        os.chmod(discover, 0o755)
        with open(self.out, 'w') as out:
            self.proc = subprocess.Popen(
                [os.environ['HORARUN'], '--ssh-config', env['HORA_TESTHOSTS_SSH_CONFIG'],
                 '-np', '2', '--min-np', '1', '--max-np', '2', '--start-timeout', '180',
                 # A host whose worker failed is blacklisted; it may come back after 2-3 s.
                 '--blacklist-cooldown-range', '2', '3',
                 '--host-discovery-script', discover, sys.executable,
                 os.path.join(tmp, 'train.py'), mode, self.stop],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=tmp,
                start_new_session=True)

    def set_hosts(self, *hosts):
        with open(self.hosts + '.new', 'w') as f:
            f.write(''.join(h + '\n' for h in hosts))
        os.rename(self.hosts + '.new', self.hosts)

    def text(self):
        with open(self.out) as f:
            return f.read()

    def lines(self):
        """(kind, host, size, epoch, batch, checksum, position) of every state line so far."""
        return [m.groups()[:2] + tuple(int(g) for g in m.groups()[2:5]) + (m.group(6), m.start())
                for m in LINE.finditer(self.text())]

    def wait(self, what, deadline_s, cond):
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            found = cond(self.lines())
            if found:
                return found
            if self.proc.poll() is not None:
                break
            time.sleep(0.2)
        raise AssertionError('%s: %s not seen within %d s (horarun %s); output:\n%s' % (
            self.mode, what, deadline_s, self.proc.poll(), self.summary()))

    def summary(self):
        """The output without the commits at a size already seen (a long job's bulk)."""
        seen, keep = set(), []
        for line in self.text().splitlines():
            m = LINE.search(line)
            key = m and m.group(1) == 'COMMIT' and (m.group(2), m.group(3))
            if key and key in seen:
                continue
            seen.add(key)
            keep.append(line)
        return '\n'.join(keep[-80:])

    def kill_h2(self, index):
        """SIGKILLs the TensorFlow worker in h2's namespace."""
        pids = subprocess.run(['ip', 'netns', 'pids', 'hora%s-h2' % index],
                              capture_output=True, text=True).stdout.split()
        killed = []
        for pid in pids:
            try:
                with open('/proc/%s/cmdline' % pid, 'rb') as f:
                    cmd = f.read().split(b'\0')
            except OSError:
                continue
            if any(a.endswith(b'train.py') for a in cmd):
                os.kill(int(pid), signal.SIGKILL)
                killed.append(pid)
        assert killed, '%s: no worker on h2 to kill (pids %s)' % (self.mode, pids)

    def finish(self, deadline_s):
        try:
            rc = self.proc.wait(deadline_s)
        except subprocess.TimeoutExpired:
            raise AssertionError('%s: horarun still running after %d s:\n%s' % (
                self.mode, deadline_s, self.summary()))
        assert rc == 0, '%s: horarun exited %d:\n%s' % (self.mode, rc, self.summary())

    def kill(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


def shrink_and_grow(tmp, env, mode):
    job = Job(tmp, env, mode)
    try:
        first = job.wait('a commit at size 2 in epoch 1', 240, lambda ls: [
            l for l in ls if l[0] == 'COMMIT' and l[2] == 2 and l[3] >= 1])
        job.kill_h2(env['HORA_TESTHOSTS_INDEX'])
        job.set_hosts('h1:1')
        killed_at = first[0][6]

        # The shrink: h1's worker restored its last commit before the failure and goes on alone.
        shrunk = job.wait('a sync at size 1', 120, lambda ls: [
            l for l in ls if l[0] == 'SYNC' and l[2] == 1])[0]
        commits = [l for l in job.lines() if l[0] == 'COMMIT' and l[1] == 'h1' and l[2] == 2
                   and l[6] < shrunk[6]]
        assert commits and commits[-1][6] >= killed_at, (mode, commits)
        assert shrunk[1] == 'h1' and shrunk[3:6] == commits[-1][3:6], (
            '%s: after the shrink h1 holds %s, its last commit was %s' % (mode, shrunk,
                                                                          commits[-1]))
        job.wait('a commit at size 1', 60, lambda ls: [
            l for l in ls if l[0] == 'COMMIT' and l[2] == 1 and l[6] > shrunk[6]])

        # The growth: h2 is back; both ranks hold what h1 committed last, then train on.
        job.set_hosts('h1:1', 'h2:1')
        grown = job.wait('a sync at size 2 on both hosts', 240, lambda ls: (lambda s: (
            len(s) == 2 and s))([l for l in ls if l[0] == 'SYNC' and l[2] == 2
                                 and l[6] > shrunk[6]]))
        assert sorted(l[1] for l in grown) == ['h1', 'h2'], (mode, grown)
        assert grown[0][3:6] == grown[1][3:6], '%s: the ranks differ after the growth: %s' % (
            mode, grown)
        before = [l for l in job.lines() if l[0] == 'COMMIT' and l[1] == 'h1' and l[2] == 1
                  and l[6] < min(g[6] for g in grown)]
        assert grown[0][3:6] == before[-1][3:6], (
            '%s: after the growth the ranks hold %s, h1 committed %s last' % (mode, grown[0],
                                                                             before[-1]))
        assert (grown[0][3], grown[0][4]) > (shrunk[3], shrunk[4]), (mode, shrunk, grown)
        job.wait('a commit at size 2 after the growth', 120, lambda ls: [
            l for l in ls if l[0] == 'COMMIT' and l[1] == 'h2' and l[6] > grown[0][6]])
        open(job.stop, 'w').close()
        job.finish(180)
        done = [l for l in job.lines() if l[0] == 'DONE']
        assert sorted(l[1] for l in done) == ['h1', 'h2'], (mode, done)
        assert all(l[2] == 2 for l in done) and done[0][3:6] == done[1][3:6], (mode, done)
        print('  %s: shrank at epoch %d batch %d, grew at epoch %d batch %d, done at epoch %d' % (
            mode, shrunk[3], shrunk[4], grown[0][3], grown[0][4], done[0][3]))
    finally:
        job.kill()


def test_shrink_and_grow_on_two_hosts():
    with two_test_hosts('hora-tf-elastic-') as (env, tmp):
        with open(os.path.join(tmp, 'train.py'), 'w') as f:
            f.write(TRAIN)
        for mode in os.environ.get('HORA_TF_ELASTIC_MODES', 'tf,keras').split(','):
            shrink_and_grow(tmp, env, mode)


run(globals())
