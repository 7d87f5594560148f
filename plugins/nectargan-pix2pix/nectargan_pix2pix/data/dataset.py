"""The paired dataset: one split of A/B pairs, each sample a dict of two aligned tensors.

A sample is ``{"A": Tensor, "B": Tensor, "path": str, "index": int}``: A is the
generator's input and B its target (after ``direction``), float32
``C x H x W`` in [-1, 1] with ``in_channels`` and ``out_channels`` channels;
``path`` is the aligned file, or the A-folder file in the folders layout;
``index`` is the position in the sorted split. The default collate function
turns a list of samples into ``{"A": N x C x H x W, "B": ..., "path": [str],
"index": LongTensor}``.

A training sample's augmentation depends only on (seed, epoch, index): a
resumed run, another worker count or another visiting order see the same
pixels for the same sample.
"""

from __future__ import annotations

from typing import Any, Mapping, Union

import numpy as np
import torch
from torch.utils.data import Dataset

from .augment import build_transform
from .check import inspect_split
from .decode import read_image, to_channels
from .errors import DatasetError
from .listing import Pair, split_dir
from .options import SPLITS, PairedDataOptions, Split, parse_options

#: What the DataLoader may pass to ``__getitem__``: an index, or ``(epoch, index)`` from EpochSampler.
Key = Union[int, tuple[int, int]]


def sample_seed(seed: int, epoch: int, index: int) -> int:
    """A well-mixed 64-bit seed for one sample in one epoch (neighbouring inputs give unrelated seeds)."""
    return int(np.random.SeedSequence((seed, epoch, index)).generate_state(1, np.uint64)[0])


class PairedDataset(Dataset):
    """One split (``train``, ``val`` or ``test``) of ``options.root``.

    Every pair is checked when the dataset is built (see ``options.verify``), so a
    missing, unreadable or inconsistent file stops the run before training,
    with a one-line :class:`DatasetError` naming it. ``seed`` is the run seed
    that training augmentations derive from.
    """

    def __init__(self, options: PairedDataOptions | Mapping[str, Any], split: Split = "train", *,
                 seed: int = 0) -> None:
        if split not in SPLITS:
            raise ValueError(f"split must be one of {', '.join(SPLITS)} (got {split!r})")
        self.options = parse_options(options)
        self.split = split
        self.seed = seed
        self.epoch = 0
        opts = self.options
        path = split_dir(opts.root, opts.folder(split))
        crops = split == "train" or getattr(opts, split).preprocess == "center_crop"
        min_size = opts.crop_size if opts.load_size is None and crops else None
        report = inspect_split(path, opts.layout, verify=opts.verify, min_size=min_size)
        if report.problems:
            more = len(report.problems) - 1
            hint = f" (+{more} more problem(s); list them with: nectargan data check {opts.root})" if more else ""
            raise DatasetError(report.problems[0] + hint)
        self.path = path
        self.layout = report.layout
        limit = opts.max_images if split == "train" else getattr(opts, split).max_images
        self.pairs: list[Pair] = report.pairs[:limit]
        self.transform = build_transform(opts, split)

    def set_epoch(self, epoch: int) -> None:
        """The epoch used when indexed with a plain int (EpochSampler passes it with each index)."""
        self.epoch = epoch

    def __len__(self) -> int:
        return len(self.pairs)

    def __getitem__(self, key: Key) -> dict[str, Any]:
        epoch, index = key if isinstance(key, tuple) else (self.epoch, key)
        index = range(len(self.pairs))[index]
        pair = self.pairs[index]
        a, b = self.load(pair)
        if self.split == "train":
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(sample_seed(self.seed, epoch, index))
                a, b = self.transform(a, b)
        else:
            a, b = self.transform(a, b)
        return {"A": a, "B": b, "path": str(pair.a), "index": index}

    def load(self, pair: Pair) -> tuple[torch.Tensor, torch.Tensor]:
        """A and B of ``pair`` in [0, 1], after ``direction`` and channel conversion, before any transform."""
        if pair.b is None:
            image = read_image(pair.a)
            width = image.shape[-1]
            if width % 2:
                raise DatasetError(f"{pair.a}: width {width} is odd, so its A and B halves differ in size")
            a, b = image[..., : width // 2], image[..., width // 2:]
        else:
            a, b = read_image(pair.a), read_image(pair.b)
        if self.options.direction == "BtoA":
            a, b = b, a
        return to_channels(a, self.options.in_channels), to_channels(b, self.options.out_channels)


def build_paired_dataset(split: Split = "train", seed: int = 0, **options: Any) -> PairedDataset:
    """The registered factory of the ``paired`` dataset: ``options`` are the ``data`` section's keys."""
    return PairedDataset(options, split, seed=seed)
