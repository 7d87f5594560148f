"""Cutting photographs into training tiles, and finding the photograph a tile came from.

A model trained at 256 px learns from 256 px views of the world; a folder of
4000x3000 photographs becomes a dataset by cutting each into tiles (a grid at
a stride, or random crops), leaving out the near-empty ones (sky, a white
wall, a scanner's margin). Each tile's name keeps its photograph's name and
its place, ``<photo>__x<left>y<top>.png``, so that ``data split`` can keep
the tiles of one photograph in one split: tiles of a photograph overlap or
touch, and a test set holding a neighbour of a training tile measures
memory, not generalisation.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Optional

import numpy as np
from PIL import Image

from nectargan_core import staging

from .errors import DatasetError
from .photoset import PhotoSet

#: ``<photo>__x<left>y<top>``: the stem of a tile that ``data tile`` wrote; a tile of a tile adds a second place
#: (``<photo>__x0y0__x256y0``), and any character may be in ``<photo>`` (a newline included).
TILE_STEM = re.compile(r"^(?P<source>.+?)(?:__x\d+y\d+)+$", re.DOTALL)


def source_of(stem: str) -> Optional[str]:
    """The photograph a tile was cut from (its stem, before the first place), or None for a name ``data tile`` did
    not write."""
    match = TILE_STEM.match(stem)
    return match["source"] if match else None


def grid_offsets(length: int, size: int, stride: int) -> list[int]:
    """Offsets of tiles of ``size`` every ``stride`` along ``length``, the last flush with the end (so every pixel
    is in a tile); none when ``length < size``."""
    if length < size:
        return []
    offsets = list(range(0, length - size + 1, stride))
    if offsets[-1] != length - size:
        offsets.append(length - size)
    return offsets


def detail(tile: Image.Image) -> float:
    """How much a tile shows: the standard deviation of its luminance, in 8-bit grey levels (0 for a flat tile)."""
    grey = np.asarray(tile.convert("L"), dtype=np.float32)
    return float(grey.std())


@dataclass
class TileReport:
    """What ``data tile`` did, per split (``""`` for a flat folder)."""

    photos: dict[str, int] = field(default_factory=dict)
    tiles: dict[str, int] = field(default_factory=dict)
    flat: int = 0  # tiles left out as near-empty
    small: list[Path] = field(default_factory=list)  # photographs smaller than one tile
    reduced: list[Path] = field(default_factory=list)  # photographs of more than 8 bits per sample, tiled in 8
    loose: list[Path] = field(default_factory=list)  # images beside the split folders, not tiled


def tile_photos(source: Path, out: Path, *, size: int, stride: Optional[int] = None, crops: Optional[int] = None,
                seed: int = 0, min_detail: float = 2.0,
                progress: Optional[Callable[[int, int], None]] = None) -> TileReport:
    """Cut every photograph in ``source`` into ``size`` x ``size`` tiles written to ``out`` as PNG.

    ``stride`` (default ``size``): a grid of tiles every ``stride`` pixels,
    the last row and column flush with the edges. ``crops``: instead, that
    many random tiles per photograph (positions drawn with ``seed`` and the
    photograph's name, so the same inputs give the same tiles). A tile whose
    luminance varies by less than ``min_detail`` grey levels (standard
    deviation) is left out. Photographs are read upright (EXIF orientation)
    one at a time; a ``source`` with train/, val/ or test/ is tiled split by
    split into the same folders of ``out``. ``out`` appears only when every
    tile is written.
    """
    if stride is not None and crops is not None:
        raise DatasetError("give --stride (a grid) or --crops (random tiles), not both")
    if stride is not None and stride > size:
        raise DatasetError(f"--stride {stride}: more than --size {size} leaves pixels between the tiles; use at most "
                           f"{size} (or --crops N for a sample of each photograph)")
    stride = stride or size
    photos = PhotoSet.open(source, out, "tile")
    report = TileReport(loose=photos.loose, reduced=photos.reduced)
    with staging(photos.out) as stage:
        for split, target, path, photo in photos.photos(stage, progress):
            report.photos[split] = report.photos.get(split, 0) + 1
            report.tiles.setdefault(split, 0)
            for name, tile in _tiles(photo, path, size, stride, crops, seed, report):
                if detail(tile) < min_detail:
                    report.flat += 1
                    continue
                tile.save(target / name, format="PNG")
                report.tiles[split] += 1
        if sum(report.tiles.values()) == 0:
            why = (f"every tile was near-empty (luminance deviation below --min-detail {min_detail})"
                   if report.flat else f"every photograph is smaller than {size}x{size}")
            raise DatasetError(f"{source}: no tiles written: {why}")
        photos.publish(stage)
    return report


def _tiles(photo: Image.Image, path: Path, size: int, stride: int, crops: Optional[int], seed: int,
           report: TileReport) -> Iterator[tuple[str, Image.Image]]:
    """The named tiles of the photograph at ``path`` (none, noted in ``report``, when it is smaller than a tile)."""
    width, height = photo.size
    if width < size or height < size:
        report.small.append(path)
        return
    if crops is None:
        places = [(x, y) for y in grid_offsets(height, size, stride) for x in grid_offsets(width, size, stride)]
    else:
        draw = random.Random(f"{seed}/{path.name}")
        places = sorted({(draw.randint(0, width - size), draw.randint(0, height - size)) for _ in range(crops)},
                        key=lambda place: (place[1], place[0]))
    for x, y in places:
        yield f"{path.stem}__x{x}y{y}.png", photo.crop((x, y, x + size, y + size))
