"""A sampler whose order depends only on (seed, epoch) and that can start mid-epoch.

Shuffling with a generator seeded from ``seed + epoch`` makes every epoch's
order reproducible without saving RNG state, and ``skip(n)`` lets a resumed
run continue exactly where a mid-epoch checkpoint left off, without loading
the samples it skips.
"""

from __future__ import annotations

from typing import Iterator, Sized

import torch
from torch.utils.data import Sampler


class ResumableSampler(Sampler[int]):
    def __init__(self, data: Sized | int, *, shuffle: bool = True, seed: int = 0) -> None:
        self.length = data if isinstance(data, int) else len(data)
        self.shuffle = shuffle
        self.seed = seed
        self.epoch = 0
        self._skip = 0

    def set_epoch(self, epoch: int) -> None:
        """Called by the engine before each epoch."""
        self.epoch = epoch
        self._skip = 0

    def skip(self, samples: int) -> None:
        """Start the current epoch after its first ``samples`` samples (once)."""
        self._skip = max(0, samples)

    def order(self) -> list[int]:
        if not self.shuffle:
            return list(range(self.length))
        generator = torch.Generator()
        generator.manual_seed(self.seed + self.epoch)
        return torch.randperm(self.length, generator=generator).tolist()

    def __iter__(self) -> Iterator[int]:
        start, self._skip = self._skip, 0
        return iter(self.order()[start:])

    def __len__(self) -> int:
        return max(0, self.length - self._skip)
