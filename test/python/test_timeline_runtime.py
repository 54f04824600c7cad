"""hvd.start_timeline(file_path, mark_cycles) / hvd.stop_timeline() at run time, with
Horovod 0.28.1's semantics: rank 0 writes a Chrome trace of the ops between start and stop; the
file is complete JSON when stop_timeline() returns; start while recording switches to the new
file; stop without a timeline does nothing; only rank 0's call matters; ValueError before init().

Run at -np 2 (test/python/meson.build). Every rank runs the same tests, so the collectives match;
only rank 0 reads the files. Each test runs under a deadline (faulthandler ends the rank)."""

import json
import os
import shutil
import subprocess
import sys
import tempfile

import pytest
import torch

import hora.torch as hvd

DEADLINE_S = 60


@pytest.fixture(autouse=True)
def _deadline(world_with_deadline):
    yield


@pytest.fixture
def shared_dir(world):
    """A directory every rank names the same way (rank 0 creates it; the ranks share a machine)."""
    path = tempfile.mkdtemp(prefix='hora-timeline-') if hvd.rank() == 0 else None
    path = hvd.broadcast_object(path, root_rank=0, name='timeline.dir')
    yield path
    hvd.barrier()  # every rank is done with it
    if hvd.rank() == 0:
        shutil.rmtree(path, ignore_errors=True)


def allreduces(names, steps=3):
    for _ in range(steps):
        for name in names:
            out = hvd.allreduce(torch.ones(8), name=name, op=hvd.Sum)
            assert out[0].item() == hvd.size()


def load(path):
    """The trace as JSON (json.load fails on an unterminated file) -> (rows, events)."""
    with open(path) as f:
        events = json.load(f)
    assert isinstance(events, list)
    rows = {e['pid']: e['args']['name'] for e in events
            if e['ph'] == 'M' and e['name'] == 'process_name'}
    return rows, events


def activities(path):
    """{tensor name: [activity, ...]} from the complete ("X": begin ts + duration) events."""
    rows, events = load(path)
    out = {}
    for e in events:
        if e['ph'] == 'X':
            assert e['ts'] >= 0 and e['dur'] >= 0, e
            out.setdefault(rows[e['pid']], []).append(e['name'])
    return out


def cycle_marks(path):
    return sum(1 for e in load(path)[1] if e['ph'] == 'i' and e['name'] == 'CYCLE_START')


def test_start_stop_records_the_named_ops(shared_dir):
    path = os.path.join(shared_dir, 'one.json')
    allreduces(['tl.before'], steps=1)
    hvd.start_timeline(path)
    allreduces(['tl.a', 'tl.b'])
    hvd.stop_timeline()
    allreduces(['tl.after'], steps=1)
    if hvd.rank() != 0:
        return
    acts = activities(path)  # complete JSON as soon as stop_timeline() returned
    for name in ('allreduce.tl.a', 'allreduce.tl.b'):
        assert acts.get(name, []).count('NEGOTIATE_ALLREDUCE') == 3, acts
        assert acts[name].count('ALLREDUCE') == 3, acts
    assert 'allreduce.tl.before' not in acts and 'allreduce.tl.after' not in acts, acts
    assert cycle_marks(path) == 0  # mark_cycles defaults to False


def test_a_second_start_stop_writes_a_second_valid_file(shared_dir):
    first, second = os.path.join(shared_dir, 'first.json'), os.path.join(shared_dir, 'second.json')
    hvd.start_timeline(first)
    allreduces(['tl.first'])
    hvd.stop_timeline()
    hvd.start_timeline(second)
    allreduces(['tl.second'])
    hvd.stop_timeline()
    if hvd.rank() == 0:
        a, b = activities(first), activities(second)
        assert 'allreduce.tl.first' in a and 'allreduce.tl.second' not in a, a
        assert 'allreduce.tl.second' in b and 'allreduce.tl.first' not in b, b
        assert b['allreduce.tl.second'].count('ALLREDUCE') == 3, b


def test_mark_cycles_adds_cycle_markers(shared_dir):
    path = os.path.join(shared_dir, 'cycles.json')
    hvd.start_timeline(path, mark_cycles=True)
    allreduces(['tl.cycles'])
    hvd.stop_timeline()
    if hvd.rank() == 0:
        # A world of one runs each op at once, without engine cycles: nothing to mark.
        assert cycle_marks(path) >= 1 or hvd.size() == 1
        assert activities(path)['allreduce.tl.cycles'].count('ALLREDUCE') == 3


def test_start_while_recording_switches_files(shared_dir):
    """Horovod: start_timeline with another path closes the current file and opens the new one;
    with the same path it keeps recording (only mark_cycles changes)."""
    old, new = os.path.join(shared_dir, 'old.json'), os.path.join(shared_dir, 'new.json')
    hvd.start_timeline(old)
    allreduces(['tl.old'])
    hvd.start_timeline(old, mark_cycles=True)  # same path: not truncated
    allreduces(['tl.same'])
    hvd.start_timeline(new)
    allreduces(['tl.new'])
    if hvd.rank() == 0:
        a = activities(old)  # already closed and complete
        assert 'allreduce.tl.old' in a and 'allreduce.tl.same' in a, a
        assert 'allreduce.tl.new' not in a, a
        assert cycle_marks(old) >= 1 or hvd.size() == 1  # a world of one has no cycles
    hvd.stop_timeline()
    if hvd.rank() == 0:
        b = activities(new)
        assert 'allreduce.tl.new' in b and 'allreduce.tl.old' not in b, b


def test_stop_without_start_does_nothing(shared_dir):
    hvd.stop_timeline()
    hvd.stop_timeline()
    allreduces(['tl.nothing'], steps=1)
    assert os.listdir(shared_dir) == []


def test_only_rank_zero_call_matters(shared_dir):
    path = os.path.join(shared_dir, 'rank0.json')
    if hvd.rank() == 0:
        hvd.start_timeline(path)
    allreduces(['tl.rank0'])
    if hvd.rank() == 0:
        hvd.stop_timeline()
        assert activities(path)['allreduce.tl.rank0'].count('ALLREDUCE') == 3


def test_a_file_rank_zero_cannot_create_raises(shared_dir):
    path = os.path.join(shared_dir, 'no such dir', 'x.json')
    if hvd.rank() == 0:
        with pytest.raises(hvd.HoraError, match="no such dir/x.json.*start_timeline"):
            hvd.start_timeline(path)
    else:
        hvd.start_timeline(path)  # other ranks write nothing, so nothing fails there
    allreduces(['tl.unharmed'], steps=1)  # the engine carries on
    hvd.stop_timeline()


def test_before_init_raises_value_error(world):
    """Horovod raises ValueError before hvd.init(); a fresh process has not called it."""
    if hvd.rank() != 0:
        return
    code = ('import hora.torch as hvd\n'
            'for call in (lambda: hvd.start_timeline("x.json"), hvd.stop_timeline):\n'
            '    try:\n'
            '        call()\n'
            '    except ValueError as e:\n'
            '        print("ValueError:", e)\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith(('HORA_', 'HOROVOD_'))}
    out = subprocess.run([sys.executable, '-c', code], env=env, capture_output=True, text=True,
                         timeout=DEADLINE_S - 10)
    assert out.returncode == 0, out.stderr
    assert out.stdout.count('ValueError:') == 2, out.stdout
    assert 'hvd.init()' in out.stdout
