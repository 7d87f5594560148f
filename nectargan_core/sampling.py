"""A sampler whose order depends only on (seed, epoch) and that can start mid-epoch.

Shuffling with a generator seeded from ``seed + epoch`` makes every epoch's
order reproducible without saving RNG state, and ``skip(n)`` lets a resumed
run continue exactly where a mid-epoch checkpoint left off, without loading
the samples it skips.

In a distributed run the engine calls ``shard(world_size, rank)``: every rank
draws the same permutation, pads it (by repeating its start) to a multiple of
the world size, and keeps every ``world_size``-th index from ``rank`` on, as
``torch.utils.data.DistributedSampler`` does. Batch ``k`` of the ranks
together then holds exactly the samples of batch ``k`` of a single process
with a ``world_size`` times larger batch.
"""

from __future__ import annotations

from typing import Iterator, Sized

import torch
from torch.utils.data import Sampler


class ResumableSampler(Sampler[int]):
    """Indices in an order fixed by ``(seed, epoch)``, resumable mid-epoch and sharded by rank.

    ``ResumableSampler(data, shuffle=True, seed=0)``: ``data`` is the dataset
    (its ``len``) or the number of samples. Use it as the sampler of a trainer's
    train DataLoader: the engine calls :meth:`set_epoch`, :meth:`skip` on a
    mid-epoch resume and :meth:`shard` in a distributed run.
    """
    def __init__(self, data: Sized | int, *, shuffle: bool = True, seed: int = 0) -> None:
        self.length = data if isinstance(data, int) else len(data)
        self.shuffle = shuffle
        self.seed = seed
        self.epoch = 0
        self.num_replicas = 1
        self.rank = 0
        self._skip = 0

    def set_epoch(self, epoch: int) -> None:
        """Called by the engine before each epoch."""
        self.epoch = epoch
        self._skip = 0

    def skip(self, samples: int) -> None:
        """Start the current epoch after its first ``samples`` samples of this rank (once)."""
        self._skip = max(0, samples)

    def shard(self, num_replicas: int, rank: int) -> None:
        """Yield only rank ``rank``'s share of every epoch (of ``num_replicas``)."""
        if not 0 <= rank < num_replicas:
            raise ValueError(f"rank {rank} is not in [0, {num_replicas})")
        self.num_replicas, self.rank = num_replicas, rank

    def full_order(self) -> list[int]:
        """The epoch's permutation of the whole dataset (the same on every rank)."""
        if not self.shuffle:
            return list(range(self.length))
        generator = torch.Generator()
        generator.manual_seed(self.seed + self.epoch)
        return torch.randperm(self.length, generator=generator).tolist()

    def order(self) -> list[int]:
        """This rank's indices for the epoch, in order."""
        order = self.full_order()
        if self.num_replicas == 1:
            return order
        total = self._sharded_length() * self.num_replicas
        while len(order) < total and order:
            order += order[: total - len(order)]
        return order[self.rank:total:self.num_replicas]

    def _sharded_length(self) -> int:
        return -(-self.length // self.num_replicas)

    def __iter__(self) -> Iterator[int]:
        start, self._skip = self._skip, 0
        return iter(self.order()[start:])

    def __len__(self) -> int:
        return max(0, self._sharded_length() - self._skip)
