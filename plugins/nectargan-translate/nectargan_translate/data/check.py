"""Checking a split before training: every problem found up front, one line each.

A broken file found at epoch 37 wastes the 36 before it. The dataset runs
:func:`inspect_split` when it is built (reading only image headers by
default), and ``nectargan data check`` runs it with full decoding (the very
decoder training uses, :mod:`.pixels`). Uses PIL only, so the command does
not import torch.
"""

from __future__ import annotations

import os

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Optional

from .listing import Layout, Pair, detect_layout, find_pairs
from .pixels import UnreadableImage, oriented_size, read_pixels

Verify = Literal["header", "full", "none"]
#: Written into a folder before ``data split`` moves anything, removed when it is done (see :mod:`.prepare`).
SPLIT_MARKER = ".nectargan-split.json"


@dataclass
class SplitReport:
    """What :func:`inspect_split` found in one split folder."""

    path: Path
    layout: Layout
    pairs: list[Pair] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    #: Images stored turned, with an EXIF orientation (2-8) that reading applies.
    oriented: list[tuple[Path, int]] = field(default_factory=list)


def image_size(path: Path, full: bool = False) -> tuple[int, int]:
    """``(width, height)`` as the image is read (after its EXIF orientation), from the header;
    ``full`` also decodes every pixel exactly as training does (finds truncation and damage)."""
    width, height, _ = _measure(path, full)
    return width, height


def _measure(path: Path, full: bool) -> tuple[int, int, int]:
    width, height, orientation = oriented_size(path)
    if full:
        height, width = read_pixels(path).shape[:2]
    return width, height, orientation


def inspect_split(
    path: Path, layout: Layout | Literal["auto"] = "auto", *, verify: Verify = "header",
    min_size: Optional[int] = None,
) -> SplitReport:
    """List the pairs of ``path`` and check each one.

    ``min_size``: the smallest side an image (an aligned half) may have, set
    when training crops images that are not resized first.
    """
    layout = detect_layout(path) if layout == "auto" else layout
    pairs, problems = find_pairs(path, layout)
    report = SplitReport(path, layout, pairs, unfinished_split(path) + problems)
    if verify == "none":
        return report
    for pair in pairs:
        try:
            problem = _check_pair(pair, verify == "full", min_size, report.oriented)
        except UnreadableImage as exc:
            problem = str(exc)
        if problem:
            report.problems.append(problem)
    return report


def unfinished_split(path: Path) -> list[str]:
    """A problem line if ``path`` (a split folder or the folder being split) is in an interrupted ``data split``."""
    for folder in (path, path.parent):
        if os.path.lexists(folder / SPLIT_MARKER):  # whatever it is (a FIFO, a link): the split is unfinished
            return [f"{folder}: a 'nectargan data split' of this folder was interrupted ({SPLIT_MARKER} is there); "
                    "run the same split again to finish it"]
    return []


def _check_pair(pair: Pair, full: bool, min_size: Optional[int],
                oriented: list[tuple[Path, int]]) -> Optional[str]:
    width, height, orientation = _measure(pair.a, full)
    if orientation != 1:
        oriented.append((pair.a, orientation))
    if pair.b is None:
        if width % 2:
            return (f"{pair.a}: width {width} is odd, so its A and B halves differ in size; "
                    "an aligned file holds A|B as two equal halves")
        width //= 2
        where = f"{pair.a}: each half is"
    else:
        *b_size, b_orientation = _measure(pair.b, full)
        b_size = tuple(b_size)
        if b_orientation != 1:
            oriented.append((pair.b, b_orientation))
        if b_size != (width, height):
            return (f"{pair.b}: size {b_size[0]}x{b_size[1]} differs from {pair.a} ({width}x{height}); "
                    "A and B of a pair must be the same size")
        where = f"{pair.a}: image is"
    if min_size is not None and min(width, height) < min_size:
        return (f"{where} {width}x{height}, smaller than crop_size {min_size}; "
                "set data.load_size to resize first, or lower data.crop_size")
    return None
