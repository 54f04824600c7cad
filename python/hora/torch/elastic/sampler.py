"""Horovod's ElasticSampler (``horovod.torch.elastic.sampler``) on hora.torch."""

import math
import random

import torch.utils.data

from hora.torch.mpi_ops import rank, size


class ElasticSampler(torch.utils.data.Sampler):
    """Partitions a dataset over the ranks, as DistributedSampler does, and partitions what is
    left of the epoch again over the new ranks after a reset.

    The epoch's indices (shuffled with ``seed + epoch`` when ``shuffle``, the same on every
    rank) minus the first ``processed_num`` are padded by repeating their start to a multiple of
    size(); rank r takes every size()-th of them from the r-th. Keep it in a TorchState (its
    state is saved, restored and synced with the rest), call record_batch() after each batch
    and set_epoch() at the end of each epoch.

    Args:
        dataset: the dataset (its length must not change).
        shuffle: shuffle the indices every epoch (default True).
        seed: the shuffle's seed, the same on every rank (default 0).
    """

    def __init__(self, dataset, shuffle=True, seed=0):
        self.dataset = dataset
        self.shuffle = shuffle
        self.seed = seed
        self.epoch = 0
        self.processed_num = 0  # indices of this epoch processed by all ranks together
        self.num_replicas = 0
        self.rank = 0
        self.remaining_indices = []
        self.num_samples = 0
        self.total_size = 0
        self.reset()

    def set_epoch(self, epoch):
        """Starts ``epoch``: a new order (when shuffling) and nothing processed yet. Call it at
        the end of an epoch, so that a reset within an epoch does not repeat its samples."""
        self.epoch = epoch
        self.processed_num = 0
        self.reset()

    def record_batch(self, batch_idx, batch_size):
        """Records that every rank processed one more batch of ``batch_size`` samples."""
        self.processed_num += batch_size * self.num_replicas

    def state_dict(self):
        return {'epoch': self.epoch, 'processed_num': self.processed_num}

    def load_state_dict(self, state_dict):
        self.epoch = state_dict['epoch']
        self.processed_num = state_dict['processed_num']
        self.reset()

    def reset(self):
        """Partitions the epoch's unprocessed indices over the current size() and rank()."""
        self.num_replicas = size()
        self.rank = rank()
        order = list(range(len(self.dataset)))
        if self.shuffle:
            random.Random(self.seed + self.epoch).shuffle(order)
        self.remaining_indices = order[self.processed_num:]
        self.num_samples = int(math.ceil(len(self.remaining_indices) / float(self.num_replicas)))
        self.total_size = self.num_samples * self.num_replicas

    def __iter__(self):
        padded = list(self.remaining_indices)
        # Pad by wrapping around, so that every rank gets num_samples indices.
        while len(padded) < self.total_size:
            padded += padded[:self.total_size - len(padded)]
        self.indices = padded[self.rank:self.total_size:self.num_replicas]
        assert len(self.indices) == self.num_samples
        return iter(self.indices)

    def __len__(self):
        return self.num_samples
