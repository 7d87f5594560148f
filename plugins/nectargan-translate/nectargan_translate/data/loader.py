"""DataLoaders for the paired dataset.

Training batches come through :class:`EpochSampler`, a
:class:`nectargan_core.ResumableSampler` (shuffled by seed and epoch,
resumable mid-epoch) that hands the epoch to the dataset with every index.
Validation and test batches are read in order, unshuffled. With
``data.cache`` (see :mod:`.cache`) the training split is decoded once and the
loader is a :class:`~.cache.CachedLoader`, which gives the same batches.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

import torch
from torch.utils.data import DataLoader

from nectargan_core import leave_stopping_to_main

from .paired import PairedDataset, collate
from .sampler import EpochSampler
from .unpaired import UnpairedDataset

__all__ = ["EpochSampler", "build_dataloader"]


def build_dataloader(dataset: PairedDataset, *, device: Optional[torch.device | str] = None,
                     indices: Optional[Sequence[int]] = None) -> Any:
    """A DataLoader for ``dataset`` configured by its options.

    train: ``data.batch_size``, EpochSampler (``data.shuffle``, ``dataset.seed``), ``data.drop_last``.
    val/test: ``data.val.batch_size`` / ``data.test.batch_size``, in order, every sample kept (or only
    ``indices``, in their order: a process's share of a distributed validation).
    ``pin_memory: null`` pins when ``device`` is CUDA. Worker processes ignore SIGINT and SIGTERM
    (:func:`nectargan_core.signals.leave_stopping_to_main`).
    train with ``data.cache`` on: a :class:`~.cache.CachedLoader` (same sampler, batches and length).
    """
    options = dataset.options
    choice = None
    if isinstance(dataset, (PairedDataset, UnpairedDataset)) and dataset.split == "train":
        from .cache import cached_loader

        cached, choice = cached_loader(dataset, device)
        if cached is not None:
            return cached
    workers = options.num_workers
    pin = options.pin_memory
    if pin is None:
        pin = device is not None and torch.device(device).type == "cuda"
    loading = dict(num_workers=workers, pin_memory=pin, collate_fn=collate,
                   persistent_workers=options.persistent_workers and workers > 0,
                   prefetch_factor=options.prefetch_factor if workers else None)
    if dataset.split == "train":
        sampler = EpochSampler(len(dataset), shuffle=options.shuffle, seed=dataset.seed)
        loader = DataLoader(dataset, batch_size=options.batch_size, sampler=sampler, drop_last=options.drop_last,
                            **loading)
        loader.cache_choice = choice  # what the start summary shows (see cache.cache_summary)
    else:
        order = {"shuffle": False} if indices is None else {"sampler": list(indices)}
        loader = DataLoader(dataset, batch_size=getattr(options, dataset.split).batch_size, **order, **loading)
    # Workers ignore SIGINT/SIGTERM: a stop sent to every process of the job is the main process's to handle.
    return leave_stopping_to_main(loader)
