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
from torch.utils.data import Dataset, default_collate

from nectargan_core import SplitListing

from .augment import build_transform
from .check import UnreadableImage, image_size, inspect_split
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
        if opts.verify != "none":
            check_batchable(self.pairs, opts, split)
        self.transform = build_transform(opts, split)

    def set_epoch(self, epoch: int) -> None:
        """The epoch used when indexed with a plain int (EpochSampler passes it with each index)."""
        self.epoch = epoch

    def __len__(self) -> int:
        return len(self.pairs)

    def listing(self) -> SplitListing:
        """The split's files in sample order (a pair's A, then its B): a checkpoint records them, so a resume
        can tell whether its mid-epoch position still points at the same pairs."""
        files = (path for pair in self.pairs for path in (pair.a, pair.b) if path is not None)
        return SplitListing.of_files(self.path, files)

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


def keeps_file_sizes(options: PairedDataOptions, split: Split) -> bool:
    """Whether ``split``'s samples keep their files' sizes (nothing resizes or crops them)."""
    unsized = options.load_size is None and options.crop_size is None
    return unsized if split == "train" else unsized or getattr(options, split).preprocess == "none"


def resizing_hint(options: PairedDataOptions, split: Split) -> str:
    if split != "train" and getattr(options, split).preprocess == "none":
        return f"data.{split}.preprocess is none; set it to center_crop or resize, or data.{split}.batch_size: 1"
    key = "data.batch_size" if split == "train" else f"data.{split}.batch_size"
    return f"data.load_size and data.crop_size are null; set data.load_size, or {key}: 1"


def check_batchable(pairs: list[Pair], options: PairedDataOptions, split: Split) -> None:
    """With resizing off and batches of several images, every image must have one size: else one line naming two."""
    batch = options.batch_size if split == "train" else getattr(options, split).batch_size
    if batch < 2 or len(pairs) < 2 or not keeps_file_sizes(options, split):
        return
    try:
        first = image_size(pairs[0].a)
        sizes = ((pair, image_size(pair.a)) for pair in pairs[1:])
        for pair, size in sizes:
            if size == first:
                continue
            raise DatasetError(f"{pair.a} is {size[0]}x{size[1]} but {pairs[0].a} is {first[0]}x{first[1]}: "
                               f"images of different sizes cannot share a batch of {batch} with resizing off "
                               f"({resizing_hint(options, split)})")
    except UnreadableImage as exc:
        raise DatasetError(str(exc)) from None


def collate(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """``default_collate``, after checking that the samples can be stacked (one line naming two files if not).

    :func:`check_batchable` finds this when the dataset is built; this catches it with ``verify: none``.
    """
    for sample in samples[1:]:
        for side in ("A", "B"):
            if sample[side].shape != samples[0][side].shape:
                got, want = tuple(sample[side].shape), tuple(samples[0][side].shape)
                raise DatasetError(f"{sample['path']} gives {side} of shape {got} but {samples[0]['path']} {want}: "
                                   "images of different sizes cannot share a batch with resizing off; set "
                                   "data.load_size, or a batch size of 1")
    return default_collate(samples)


def build_paired_dataset(split: Split = "train", seed: int = 0, **options: Any) -> PairedDataset:
    """The registered factory of the ``paired`` dataset: ``options`` are the ``data`` section's keys."""
    return PairedDataset(options, split, seed=seed)
