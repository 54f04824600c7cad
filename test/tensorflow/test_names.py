"""Every public name of Horovod 0.28.1's horovod.tensorflow and horovod.tensorflow.keras
exists in hora.tensorflow / hora.keras, or is listed, with its reason, in docs/tensorflow.md
("Horovod names hora does not have"). The lists are the top-level names of Horovod's
horovod/tensorflow/__init__.py and horovod/tensorflow/keras/__init__.py (v0.28.1, read from
its source), less the modules they import (os, tf, warnings, version, inspect, keras)."""

import os
import re

import hora.keras
import hora.tensorflow
from harness import run

HOROVOD_TENSORFLOW = [
    'Adasum', 'Average', 'BroadcastGlobalVariablesHook', 'Compression',
    'DistributedGradientTape', 'DistributedOptimizer', 'LocalGradientAggregationHelper', 'Max',
    'Min', 'PartialDistributedGradientTape', 'ProcessSet', 'Product', 'Sum',
    'SyncBatchNormalization', 'add_process_set', 'allgather', 'allgather_object', 'allreduce',
    'alltoall', 'broadcast', 'broadcast_', 'broadcast_global_variables', 'broadcast_object',
    'broadcast_object_fn', 'broadcast_variables', 'ccl_built', 'check_extension',
    'check_num_rank_power_of_2', 'cross_rank', 'cross_size', 'cuda_built', 'ddl_built',
    'device_compatibility_check', 'elastic', 'global_process_set', 'gloo_built',
    'gloo_enabled', 'gpu_available', 'grouped_allgather', 'grouped_allreduce',
    'grouped_reducescatter', 'handle_average_backwards_compatibility', 'init', 'is_homogeneous',
    'is_initialized', 'join', 'local_rank', 'local_rank_op', 'local_size', 'local_size_op',
    'mpi_built', 'mpi_enabled', 'mpi_threads_supported', 'nccl_built',
    'process_set_included_op', 'rank', 'rank_op', 'reducescatter', 'refs_to_vars',
    'remove_process_set', 'rocm_built', 'shutdown', 'size', 'size_op', 'split_list',
    'start_timeline', 'stop_timeline', 'vars_to_refs',
]
HOROVOD_TENSORFLOW_KERAS = [
    'Average', 'Compression', 'DistributedOptimizer', 'K', 'ProcessSet', 'Sum',
    'add_process_set', 'allgather', 'allreduce', 'broadcast', 'broadcast_global_variables',
    'callbacks', 'ccl_built', 'cross_rank', 'cross_size', 'cuda_built', 'ddl_built', 'elastic',
    'global_process_set', 'gloo_built', 'gloo_enabled', 'init', 'is_initialized',
    'is_version_greater_equal_than', 'load_model', 'local_rank', 'local_size', 'mpi_built',
    'mpi_enabled', 'mpi_threads_supported', 'nccl_built', 'rank', 'reducescatter',
    'remove_process_set', 'rocm_built', 'shutdown', 'size', 'start_timeline', 'stop_timeline',
]
HOROVOD_KERAS_CALLBACKS = [
    'BroadcastGlobalVariablesCallback', 'MetricAverageCallback', 'LearningRateScheduleCallback',
    'LearningRateWarmupCallback', 'BestModelCheckpoint',
]
HOROVOD_ELASTIC = ['run', 'TensorFlowKerasState', 'TensorFlowState']
HOROVOD_KERAS_ELASTIC = ['KerasState', 'CommitStateCallback', 'UpdateBatchStateCallback',
                         'UpdateEpochStateCallback', 'run']

DOC = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'docs',
                   'tensorflow.md')


def documented_missing():
    """The names in backquotes on the lines of docs/tensorflow.md's section "Horovod names
    hora does not have", with the module each line names."""
    with open(DOC) as f:
        text = f.read()
    section = text.split('## Horovod names hora does not have', 1)[1].split('\n## ', 1)[0]
    return set(re.findall(r'`([A-Za-z_][A-Za-z0-9_.]*)`', section))


def check(module, names, prefix):
    missing = documented_missing()
    absent = [n for n in names if not hasattr(module, n)]
    undocumented = [n for n in absent if prefix + n not in missing]
    assert not undocumented, ('%s lacks %s, and docs/tensorflow.md does not say why'
                              % (module.__name__, undocumented))
    # A name listed as missing that hora has after all: the list is stale.
    stale = [n for n in names if hasattr(module, n) and prefix + n in missing]
    assert not stale, 'docs/tensorflow.md lists %s as missing, but hora has them' % stale


def test_tensorflow_names():
    check(hora.tensorflow, HOROVOD_TENSORFLOW, 'horovod.tensorflow.')


def test_keras_names():
    check(hora.keras, HOROVOD_TENSORFLOW_KERAS, 'horovod.tensorflow.keras.')
    check(hora.keras.callbacks, HOROVOD_KERAS_CALLBACKS, 'horovod.tensorflow.keras.callbacks.')
    check(hora.keras.elastic, HOROVOD_KERAS_ELASTIC, 'horovod.tensorflow.keras.elastic.')
    check(hora.tensorflow.elastic, HOROVOD_ELASTIC, 'horovod.tensorflow.elastic.')


run(globals())
