"""The unpaired dataset: one split of two image domains that nothing pairs.

A sample is ``{"A": Tensor, "B": Tensor, "A_path": str, "B_path": str,
"index": int}``, float32 ``C x H x W`` in [-1, 1]. As in the reference's
``unaligned`` dataset, the split has ``max(|A|, |B|)`` items; item ``i`` takes
``A[i mod |A|]`` and, in training, a B image drawn at random (``B[i mod |B|]``
with ``serial``, and always in val and test, which are never random).

Everything random about a training item (which B, each image's crop and
flips) is drawn from (seed, epoch, index) alone, so a resumed run, another
worker count or another visiting order sees the same pixels for the same
item; the sampler (:class:`nectargan_translate.data.loader.EpochSampler`)
hands the epoch over with each index.

Decoding, channel conversion and the transforms are the paired dataset's
(:mod:`nectargan_translate.data`); each image is transformed on its own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

import torch
from torch.utils.data import Dataset

from nectargan_core import SplitListing

from .augment import PairTransform, build_transform
from .decode import read_image, to_channels
from .domains import DOMAINS, inspect_domains, require_root
from .errors import DatasetError
from .options import SPLITS, Split
from .paired import Key, sample_seed
from .unpaired_options import UnpairedDataOptions, parse_unpaired


class DomainImages(Dataset):
    """The images of one domain of an unpaired split, each once, in order, with the split's fixed preprocessing.

    What validation and ``nectargan test`` read: ``{"image": Tensor, "path": str, "index": int}``.
    """

    def __init__(self, domain: str, paths: Sequence[Path], channels: int, transform: PairTransform,
                 batch_size: int) -> None:
        self.domain = domain
        self.paths = list(paths)
        self.channels = channels
        self.transform = transform
        self.batch_size = batch_size

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int) -> dict[str, Any]:
        index = range(len(self.paths))[index]
        path = self.paths[index]
        return {"image": self.transform.single(to_channels(read_image(path), self.channels)), "path": str(path),
                "index": index}


class UnpairedDataset(Dataset):
    """One split (``train``, ``val`` or ``test``) of ``options.root``: the folders ``<split>A/`` and ``<split>B/``.

    Both folders are listed and checked when the dataset is built (see
    ``options.verify``): a missing folder, an empty one or an unreadable image
    stops the run before training with one line naming it. ``seed`` is the
    run seed that training draws derive from.
    """

    def __init__(self, options: UnpairedDataOptions | Mapping[str, Any], split: Split = "train", *,
                 seed: int = 0) -> None:
        if split not in SPLITS:
            raise ValueError(f"split must be one of {', '.join(SPLITS)} (got {split!r})")
        self.options = opts = parse_unpaired(options)
        self.split = split
        self.seed = seed
        self.epoch = 0
        root = require_root(opts.root)
        folder = opts.folder(split)
        crops = split == "train" or getattr(opts, split).preprocess == "center_crop"
        min_size = opts.crop_size if opts.load_size is None and crops else None
        report = inspect_domains(root, folder, verify=opts.verify, min_size=min_size)
        if report.problems:
            more = len(report.problems) - 1
            hint = f" (+{more} more problem(s); list them with: nectargan data check {root})" if more else ""
            raise DatasetError(report.problems[0] + hint)
        self.path = root
        self.folder = folder
        limit = opts.max_images if split == "train" else getattr(opts, split).max_images
        first, second = (report.a, report.b) if opts.direction == "AtoB" else (report.b, report.a)
        #: Each domain's images, sorted by name (after ``direction``).
        self.paths: dict[str, list[Path]] = {"A": first[:limit], "B": second[:limit]}
        self.channels = {"A": opts.in_channels, "B": opts.out_channels}
        self.transforms = {domain: build_transform(opts, split, self.channels[domain]) for domain in DOMAINS}

    def set_epoch(self, epoch: int) -> None:
        """The epoch used when indexed with a plain int (EpochSampler passes it with each index)."""
        self.epoch = epoch

    def __len__(self) -> int:
        return max(len(self.paths["A"]), len(self.paths["B"]))

    def listing(self) -> SplitListing:
        """Both domains' files, A then B (a checkpoint records them: see ``PairedDataset.listing``)."""
        return SplitListing.of_files(self.path, [*self.paths["A"], *self.paths["B"]])

    def __getitem__(self, key: Key) -> dict[str, Any]:
        epoch, index = key if isinstance(key, tuple) else (self.epoch, key)
        index = range(len(self))[index]
        a_paths, b_paths = self.paths["A"], self.paths["B"]
        a_path = a_paths[index % len(a_paths)]
        if self.split == "train":
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(sample_seed(self.seed, epoch, index))
                b_index = index % len(b_paths) if self.options.serial else int(torch.randint(len(b_paths), ()))
                b_path = b_paths[b_index]
                a, b = self.load("A", a_path), self.load("B", b_path)
        else:
            b_path = b_paths[index % len(b_paths)]
            a, b = self.load("A", a_path), self.load("B", b_path)
        return {"A": a, "B": b, "A_path": str(a_path), "B_path": str(b_path), "index": index}

    def load(self, domain: str, path: Path) -> torch.Tensor:
        """The image at ``path`` as a sample of ``domain``: its channels, then its split's transform."""
        return self.transforms[domain].single(to_channels(read_image(path), self.channels[domain]))

    def domain(self, domain: str) -> DomainImages:
        """The images of ``domain`` (``A`` or ``B``) of this split, each once: for metrics, never augmented."""
        if domain not in DOMAINS:
            raise ValueError(f"domain must be A or B (got {domain!r})")
        view: Split = "val" if self.split == "train" else self.split  # train images: val's fixed preprocessing
        transform = build_transform(self.options, view, self.channels[domain])
        return DomainImages(domain, self.paths[domain], self.channels[domain], transform,
                            getattr(self.options, view).batch_size)


def build_unpaired_dataset(split: Split = "train", seed: int = 0, **options: Any) -> UnpairedDataset:
    """The registered factory of the ``unpaired`` dataset: ``options`` are the ``data`` section's keys."""
    return UnpairedDataset(options, split, seed=seed)
