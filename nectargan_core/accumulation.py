"""Gradient accumulation groups: which batches share one optimizer step.

With accumulation over ``every`` batches, the batches of an epoch form groups
of ``every`` consecutive batches; the optimizers step once per group, on its
last batch. The last group of an epoch may be shorter (7 batches in groups of
3: 3, 3, 1). Each batch's loss is divided by the size of *its* group, so a
group's summed gradients are the mean over its batches, as one batch of the
group's total size would give, the short group included.

Torch-free: the position is plain arithmetic on the batch index.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class AccumulationGroup:
    """Where one batch sits in its accumulation group.

    ``start`` is the group's first batch index within the epoch, ``size`` the
    number of batches in the group and ``index`` this batch's index.
    """

    start: int
    size: int
    index: int

    @classmethod
    def of(cls, batch_idx: int, every: int, total: int | None) -> "AccumulationGroup":
        """The group of batch ``batch_idx`` (counted from 0 in its epoch).

        ``every`` is the accumulation (1: every batch is its own group) and
        ``total`` the number of batches in the epoch (``None`` when the loader
        has no length: every group then has ``every`` batches).
        """
        if every < 1:
            raise ValueError(f"accumulation must be at least 1 (got {every})")
        if batch_idx < 0:
            raise ValueError(f"batch_idx must be at least 0 (got {batch_idx})")
        start = batch_idx - batch_idx % every
        size = every if total is None else max(1, min(every, total - start))
        return cls(start=start, size=size, index=batch_idx)

    @property
    def last(self) -> bool:
        """Whether this batch ends its group: the optimizers step after it."""
        return self.index + 1 >= self.start + self.size

    @property
    def scale(self) -> float:
        """What each loss of this batch is multiplied by: ``1 / size``."""
        return 1.0 / self.size
