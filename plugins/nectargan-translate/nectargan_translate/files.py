"""Finding input images and naming outputs after them.

Torch-free (PIL reads the headers), so ``nectargan predict`` checks every
path and image header before it imports torch or loads a checkpoint: a typo
in the last input fails in a second, not after the first thousand images.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from nectargan_core import NectarGANError, printable

from .data.check import image_size
from .data.pixels import UnreadableImage
from .data.errors import DatasetError
from .data.listing import IMAGE_EXTENSIONS, entry_problem


@dataclass(frozen=True)
class Job:
    """One input image, its size, and where its output goes (relative to the output folder)."""

    source: Path
    output: Path
    height: int
    width: int


def output_names(inputs: Sequence[Path]) -> list[Path]:
    """``x.png`` for each (relative) input path ``x.ext``.

    Inputs of one folder that share a stem keep their extension in the name
    (``a.jpg``, ``a.png`` -> ``a_jpg.png``, ``a_png.png``), so no output overwrites another.
    """
    stems = Counter(path.with_suffix("") for path in inputs)
    return [path.with_suffix(".png") if stems[path.with_suffix("")] == 1
            else path.with_name(f"{path.stem}_{path.suffix.lstrip('.')}.png") for path in inputs]


def _entries(folder: Path, recursive: bool) -> list[Path]:
    """What ``folder`` holds (with ``recursive``, its sub-folders' entries too); a folder this user cannot list is
    named in one line (``rglob`` left it out without a word)."""
    def refuse(error: OSError) -> None:
        raise DatasetError(printable(f"{error.filename or folder}: cannot be listed ({error.strerror}); let this "
                                     "user read it (chmod a+rx), or leave it out of the inputs"))

    if not recursive:
        try:
            return list(folder.iterdir())
        except OSError as error:
            refuse(error)
    found = []
    for parent, folders, files in os.walk(folder, onerror=refuse):
        found += [Path(parent) / name for name in (*folders, *files)]
    return found


def find_inputs(inputs: Sequence[str | Path], recursive: bool = False) -> list[tuple[Path, Path]]:
    """``(file, name under the output folder)`` for every image named, or found in a named folder.

    Folders are listed sorted, image extensions only, hidden files skipped;
    with ``recursive``, sub-folders too (their structure is kept in the names).
    """
    found: list[tuple[Path, Path]] = []
    for raw in inputs:
        path = Path(raw)
        if path.is_file():
            found.append((path, Path(path.name)))
        elif path.is_dir():
            candidates = _entries(path, recursive)
            named = sorted(p for p in candidates if p.suffix.lower() in IMAGE_EXTENSIONS
                           and not any(part.startswith(".") for part in p.relative_to(path).parts))
            # an entry named like an image that is none (a FIFO, a device, a looping link) is named, not skipped
            problems = [problem for p in named if not (recursive and p.is_dir())
                        for problem in [entry_problem(p, p.parent)] if problem is not None]
            if problems:
                more = f" (and {len(problems) - 1} more such entries)" if len(problems) > 1 else ""
                raise DatasetError(problems[0] + more)
            files = [p for p in named if p.is_file()]
            if not files:
                nested = not recursive and any(p.is_dir() for p in path.iterdir())
                hint = "; add --recursive to search its sub-folders" if nested else ""
                raise DatasetError(f"{path}: no images found (looked for {', '.join(IMAGE_EXTENSIONS)}){hint}")
            found += [(file, file.relative_to(path)) for file in files]
        elif os.path.lexists(path):  # there, but no file or folder: a FIFO, a device, a link that loops
            raise DatasetError(entry_problem(path) or f"{path}: not an image file or a folder")
        else:
            hint = f"; for a resize or crop side, use --size {raw}" if str(raw).isdigit() else ""
            raise DatasetError(f"{path}: input not found{hint}")
    return found


def plan(inputs: Sequence[str | Path], out_dir: Path, recursive: bool = False) -> list[Job]:
    """Every input found and its header read; outputs named, none clashing with another or with an input."""
    if out_dir.exists() and not out_dir.is_dir():
        raise NectarGANError(f"{out_dir}: output path exists and is not a folder")
    found = find_inputs(inputs, recursive)
    jobs, claimed = [], {}
    for (source, _), name in zip(found, output_names([name for _, name in found])):
        destination = out_dir / name
        if destination in claimed:
            raise NectarGANError(f"{claimed[destination]} and {source} would both be written to {destination}; "
                                 "predict them into separate output folders")
        if destination.resolve() == source.resolve():
            raise NectarGANError(f"{destination}: the output would overwrite its input; choose another -o folder")
        claimed[destination] = source
        try:
            width, height = image_size(source)
        except UnreadableImage as exc:
            raise DatasetError(str(exc)) from None
        jobs.append(Job(source, name, height, width))
    return jobs
