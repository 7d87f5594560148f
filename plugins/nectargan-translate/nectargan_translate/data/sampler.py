"""The training sampler of the translation datasets: indices that carry their epoch.

Its own module because both loaders use it: the DataLoader of
:mod:`.loader` and the decoded-once loader of :mod:`.cache`.
"""

from __future__ import annotations

from typing import Iterator

from nectargan_core import ResumableSampler


class EpochSampler(ResumableSampler):
    """Yields ``(epoch, index)`` instead of ``index``.

    Persistent DataLoader workers keep their own copy of the dataset, which
    ``dataset.set_epoch`` in the main process never reaches; an epoch that
    travels with each index does, so augmentations follow the epoch with any
    worker setting.
    """

    def __iter__(self) -> Iterator[tuple[int, int]]:  # type: ignore[override]
        epoch, order = self.epoch, super().__iter__()
        return ((epoch, index) for index in order)
