"""Horovod 0.28.1's own PyTorch examples that need no download and no GPU, run under horarun
with only their import changed (``import horovod.torch as hvd`` -> ``import hora.torch as
hvd``). The example files come from HOROVOD_EXAMPLES (a checkout of Horovod's examples
folder, whose ``pytorch`` folder holds them) or from the Horovod archive (HOROVOD_ARCHIVE) when it carries them; hora's
tree does not copy Horovod's code. Skipped (run_pytest.sh exit 77) without the files or without
torchvision (Debian's python3-torchvision), which the examples import."""

import os
import subprocess
import sys

import pytest

# [file, arguments]: small enough for a 2-core machine; the synthetic benchmark builds its
# model with norm_layer=hvd.SyncBatchNorm.
EXAMPLES = [
    ('pytorch_synthetic_benchmark.py',
     ['--model', 'resnet18', '--batch-size', '2', '--num-warmup-batches', '1',
      '--num-batches-per-iter', '1', '--num-iters', '2', '--no-cuda']),
]


def find_example(name, tmp_path_factory):
    folders = []
    if os.environ.get('HOROVOD_EXAMPLES'):
        folders.append(os.environ['HOROVOD_EXAMPLES'])
    archive = os.environ.get('HOROVOD_ARCHIVE', '')
    if os.path.isfile(archive):
        dest = tmp_path_factory.mktemp('hvd')
        subprocess.run(['tar', '-xJf', archive, '-C', str(dest)], check=True, timeout=300)
        folders.append(str(dest))
    for folder in folders:
        for root, _, files in os.walk(folder):
            if name in files and os.path.basename(root) == 'pytorch':
                return os.path.join(root, name)
    return None


@pytest.mark.parametrize('name,args', EXAMPLES)
@pytest.mark.parametrize('np', [2])
def test_example_runs_on_hora(name, args, np, tmp_path, tmp_path_factory):
    if subprocess.run([sys.executable, '-c', 'import torchvision'],
                      capture_output=True).returncode != 0:
        pytest.skip('no torchvision (python3-torchvision): the examples import it')
    path = find_example(name, tmp_path_factory)
    if path is None:
        pytest.skip('no %s in HOROVOD_EXAMPLES or the Horovod archive' % name)
    with open(path) as f:
        source = f.read()
    assert source.count('import horovod.torch as hvd') == 1, path
    changed = tmp_path / name
    changed.write_text(source.replace('import horovod.torch as hvd', 'import hora.torch as hvd'))
    out = subprocess.run([os.environ['HORARUN'], '-np', str(np), sys.executable, str(changed)]
                         + args, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
    assert 'Total img/sec on %d CPU(s)' % np in out.stdout, out.stdout[-4000:]
