"""The unpaired layout (CycleGAN's): one folder of images per domain and split.

A dataset root holds ``trainA/`` and ``trainB/`` (and ``valA/ valB/``,
``testA/ testB/`` when present), as the CycleGAN reference's datasets do
(horse2zebra, monet2photo, ...). The two domains of a split may hold any
numbers of images, with any names: nothing pairs them. Listings are sorted
by file name, with the paired layouts' extension filter, so index ``i``
means the same image on every machine.

PIL only (no torch): ``nectargan data check`` and the unpaired dataset share it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Optional

from .check import UnreadableImage, image_size, unfinished_split
from .errors import DatasetError
from .listing import IMAGE_EXTENSIONS, list_images, not_image_files
from .options import SPLITS

DOMAINS = ("A", "B")


def domain_dir(root: str | Path, folder: str, domain: str) -> Path:
    """``root/<folder><domain>``: ``trainA``, ``testB``, ..."""
    return Path(root) / f"{folder}{domain}"


def is_unpaired(root: Path) -> bool:
    """Whether ``root`` is laid out by domain: it holds ``trainA/`` or ``trainB/`` (or a val or test domain)."""
    return any(domain_dir(root, split, domain).is_dir() for split in SPLITS for domain in DOMAINS)


def present_splits(root: Path) -> list[str]:
    """The splits of ``root`` with at least one domain folder, in train, val, test order."""
    return [split for split in SPLITS if any(domain_dir(root, split, domain).is_dir() for domain in DOMAINS)]


@dataclass
class DomainsReport:
    """What :func:`inspect_domains` found in one split: each domain's images, and every problem."""

    root: Path
    folder: str
    images: dict[str, list[Path]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    @property
    def a(self) -> list[Path]:
        return self.images.get("A", [])

    @property
    def b(self) -> list[Path]:
        return self.images.get("B", [])

    def counts(self) -> str:
        return f"{self.folder}A {len(self.a)}, {self.folder}B {len(self.b)}"


def inspect_domains(root: str | Path, folder: str, *, verify: Literal["header", "full", "none"] = "header",
                    min_size: Optional[int] = None) -> DomainsReport:
    """List and check both domains of the split in ``root/<folder>A`` and ``root/<folder>B``.

    Each missing or empty domain folder is a problem, and so (unless
    ``verify`` is ``none``) is each image that does not read (``full``:
    decode every pixel) or, with ``min_size``, whose smaller side is below it.
    """
    root = Path(root)
    report = DomainsReport(root, folder)
    report.problems += unfinished_split(domain_dir(root, folder, "A"))  # a data split of root still under way
    for domain in DOMAINS:
        path = domain_dir(root, folder, domain)
        if not path.is_dir():
            other = domain_dir(root, folder, "B" if domain == "A" else "A")
            report.problems.append(f"{path}: folder does not exist; the unpaired layout needs {folder}A/ and "
                                   f"{folder}B/ side by side" + (f" (found {other.name}/)" if other.is_dir() else ""))
            continue
        images = list_images(path)
        report.problems += not_image_files(path)
        if not images:
            report.problems.append(f"{path}: no images (looked for {', '.join(IMAGE_EXTENSIONS)})")
        report.images[domain] = images
        if verify == "none":
            continue
        for image in images:
            try:
                width, height = image_size(image, full=verify == "full")
            except UnreadableImage as exc:
                report.problems.append(str(exc))
                continue
            if min_size is not None and min(width, height) < min_size:
                report.problems.append(f"{image}: image is {width}x{height}, smaller than crop_size {min_size}; "
                                       "set data.load_size to resize first, or lower data.crop_size")
    return report


def require_root(root: str | Path | None) -> Path:
    """``root`` as a path, or a one-line error when it is unset or missing."""
    if root is None:
        raise DatasetError("data.root is not set; point it at a folder holding trainA/ and trainB/")
    path = Path(root)
    if not path.is_dir():
        raise DatasetError(f"{path}: dataset folder does not exist (data.root)")
    return path
