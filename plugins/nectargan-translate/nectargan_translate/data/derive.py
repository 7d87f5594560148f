"""Making the other half of a pair from photographs: edges, grey, blur, low resolution, JPEG artefacts, holes.

Most image-to-image tasks people train start from photographs alone: the
input side is computed from the photo (edges -> photo, grey -> colour,
blurred -> sharp, small -> large, compressed -> clean, holed -> whole). Each
derivation here is deterministic (the same photo, options and seed give the
same bytes) and keeps the photo's size, so the pair is aligned: A is the
derived image, B the photograph, written side by side as the paired dataset
reads them (train AtoB to learn the restoration).
"""

from __future__ import annotations

import io
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

import numpy as np
from PIL import Image, ImageFilter

from nectargan_core import staging

from .errors import DatasetError
from .photoset import PhotoSet

METHODS = ("edges", "grey", "blur", "downscale", "jpeg", "mask")


@dataclass(frozen=True)
class Derivation:
    """One way to compute A from a photograph, with its settings."""

    method: str
    low: float = 40.0  # edges: hysteresis thresholds on the gradient magnitude (Sobel, 8-bit scale)
    high: float = 100.0
    sigma: float = 1.4  # edges: Gaussian smoothing before the gradient; blur: the blur's radius
    factor: int = 4  # downscale
    quality: int = 20  # jpeg
    holes: int = 3  # mask: rectangles per image, each 1/8 to 1/4 of the image's sides
    seed: int = 0

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise DatasetError(f"unknown derivation {self.method!r}; choose one of {', '.join(METHODS)}")
        if self.method == "edges" and not 0 <= self.low <= self.high:
            raise DatasetError(f"--low {self.low} and --high {self.high}: need 0 <= low <= high")
        if self.method == "blur" and self.sigma < 0.1:
            raise DatasetError(f"--sigma {self.sigma:g}: a blur below 0.1 pixel leaves the photo as it is; use at "
                               "least 0.1")

    def describe(self) -> str:
        """The derivation in a few words, for the command's last line."""
        return {"edges": f"edges (Canny, sigma {self.sigma}, thresholds {self.low:g}/{self.high:g})",
                "grey": "greyscale", "blur": f"Gaussian blur (radius {self.sigma:g})",
                "downscale": f"downscaled {self.factor}x and scaled back", "jpeg": f"JPEG at quality {self.quality}",
                "mask": f"{self.holes} grey hole(s)"}[self.method]

    def apply(self, photo: Image.Image, name: str) -> Image.Image:
        """A for ``photo`` (named ``name``, which seeds the holes' places), in the photo's mode and size."""
        if self.method == "edges":
            lines = canny(np.asarray(photo.convert("L"), dtype=np.float32), self.sigma, self.low, self.high)
            derived = Image.fromarray(np.where(lines, 0, 255).astype(np.uint8), "L")  # black lines on white
        elif self.method == "grey":
            derived = photo.convert("L")
        elif self.method == "blur":
            derived = photo.filter(ImageFilter.GaussianBlur(self.sigma))
        elif self.method == "downscale":
            small = (max(1, photo.width // self.factor), max(1, photo.height // self.factor))
            derived = photo.resize(small, Image.Resampling.BICUBIC).resize(photo.size, Image.Resampling.BICUBIC)
        elif self.method == "jpeg":
            buffer = io.BytesIO()
            photo.convert("RGB" if photo.mode not in ("L", "RGB") else photo.mode).save(
                buffer, format="JPEG", quality=self.quality)
            derived = Image.open(buffer)
            derived.load()
        else:
            derived = photo.copy()
            draw = random.Random(f"{self.seed}/{name}")
            for _ in range(self.holes):
                w = draw.randint(max(1, photo.width // 8), max(1, photo.width // 4))
                h = draw.randint(max(1, photo.height // 8), max(1, photo.height // 4))
                x, y = draw.randint(0, photo.width - w), draw.randint(0, photo.height - h)
                derived.paste(_grey(derived.mode), (x, y, x + w, y + h))
        return derived if derived.mode == photo.mode else derived.convert(photo.mode)


def _grey(mode: str) -> int | tuple[int, ...]:
    """Mid grey in ``mode`` (opaque where there is alpha)."""
    if mode == "I;16":
        return 32768
    bands = len(mode) if mode in ("RGB", "RGBA", "LA") else 1
    return (128,) * (bands - 1) + (255,) if mode in ("RGBA", "LA") else (128,) * bands if bands > 1 else 128


def canny(grey: np.ndarray, sigma: float, low: float, high: float) -> np.ndarray:
    """Canny's edges of a ``H x W`` luminance image (0-255): Gaussian smoothing, Sobel gradients, thinning to
    the local maxima across each edge, and hysteresis (weak edges kept where they touch a strong one)."""
    image = Image.fromarray(np.clip(grey, 0, 255).astype(np.uint8), "L")
    if sigma > 0:
        image = image.filter(ImageFilter.GaussianBlur(sigma))
    p = np.pad(np.asarray(image, dtype=np.float32), 1, mode="edge")
    gx = (p[:-2, 2:] + 2 * p[1:-1, 2:] + p[2:, 2:]) - (p[:-2, :-2] + 2 * p[1:-1, :-2] + p[2:, :-2])
    gy = (p[2:, :-2] + 2 * p[2:, 1:-1] + p[2:, 2:]) - (p[:-2, :-2] + 2 * p[:-2, 1:-1] + p[:-2, 2:])
    magnitude = np.hypot(gx, gy)
    # the gradient's direction, in four sectors: 0 (horizontal), 45, 90 (vertical), 135 degrees
    sector = (np.round(np.arctan2(gy, gx) * (4 / np.pi)).astype(np.int64)) % 4
    m = np.pad(magnitude, 1)
    neighbours = {0: (m[1:-1, 2:], m[1:-1, :-2]), 1: (m[2:, 2:], m[:-2, :-2]),
                  2: (m[2:, 1:-1], m[:-2, 1:-1]), 3: (m[2:, :-2], m[:-2, 2:])}
    thin = np.zeros_like(magnitude, dtype=bool)
    for direction, (ahead, behind) in neighbours.items():
        thin |= (sector == direction) & (magnitude >= ahead) & (magnitude >= behind)
    weak = thin & (magnitude >= low) & (magnitude > 0)
    edges = weak & (magnitude >= high)
    while True:  # grow the strong edges along the weak ones (8-connected) until nothing changes
        grown = np.pad(edges, 1)
        around = np.zeros_like(edges)
        for dy in (0, 1, 2):
            for dx in (0, 1, 2):
                around |= grown[dy:dy + edges.shape[0], dx:dx + edges.shape[1]]
        wider = weak & around
        if np.array_equal(wider, edges):
            return edges
        edges = wider


@dataclass
class DeriveReport:
    """What ``data derive`` wrote, per split (``all`` for a flat folder)."""

    pairs: dict[str, int] = field(default_factory=dict)
    reduced: list[Path] = field(default_factory=list)  # photographs of more than 8 bits per sample, written in 8
    loose: list[Path] = field(default_factory=list)  # images beside the split folders, not read


def derive_pairs(source: Path, out: Path, derivation: Derivation,
                 progress: Optional[Callable[[int, int], None]] = None) -> DeriveReport:
    """Write ``out/NAME.png`` = A|B for every photograph B in ``source``, A computed by ``derivation``.

    A ``source`` with train/, val/ or test/ gives the same folders in
    ``out``. Photographs are read upright one at a time; ``out`` appears only
    when every pair is written.
    """
    photos = PhotoSet.open(source, out, "derive pairs from")
    report = DeriveReport(loose=photos.loose, reduced=photos.reduced)
    with staging(photos.out) as stage:
        for split, target, path, photo in photos.photos(stage, progress):
            derived = derivation.apply(photo, path.name)
            joined = Image.new(photo.mode, (photo.width * 2, photo.height))
            joined.paste(derived, (0, 0))
            joined.paste(photo, (photo.width, 0))
            joined.save(target / f"{path.stem}.png", format="PNG", icc_profile=photo.info.get("icc_profile"))
            report.pairs[split] = report.pairs.get(split, 0) + 1
        photos.publish(stage)
    return report
