"""What the photo tools (``data tile``, ``data derive``) share: a folder of photographs read one at a time into a
new output folder that appears only when complete.

:class:`PhotoSet` lists and checks the photographs (by split when the
folder has train/, val/ or test/), checks the output folder, and yields each
photograph upright in 8 bits with the folder its outputs go to, inside a
staging folder that :meth:`PhotoSet.publish` renames into place.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Optional

from PIL import Image

from nectargan_core import commit_folder, output_taken, printable

from .errors import DatasetError
from .listing import photo_folders
from .options import SPLITS
from .pixels import UnreadableImage, open_photo


@dataclass
class PhotoSet:
    """The photographs of ``source`` by split (``""`` for a flat folder), bound for the new folder ``out``."""

    source: Path
    out: Path
    listed: dict[str, list[Path]]
    #: Images beside the split folders (not read).
    loose: list[Path] = field(default_factory=list)
    #: Photographs of more than 8 bits per sample, read scaled to 8.
    reduced: list[Path] = field(default_factory=list)

    @classmethod
    def open(cls, source: Path, out: Path, purpose: str) -> "PhotoSet":
        """List and check ``source`` (one line for what is wrong) and the output folder ``out``."""
        listed, loose = photo_folders(source, SPLITS, purpose)
        return cls(source, output_folder(out, source), listed, loose)

    @property
    def total(self) -> int:
        return sum(len(photos) for photos in self.listed.values())

    def photos(self, stage: Path, progress: Optional[Callable[[int, int], None]] = None,
               ) -> Iterator[tuple[str, Path, Path, Image.Image]]:
        """``(split, output folder in stage, path, photo)`` for each photograph, upright, 8-bit L/RGB/RGBA;
        ``progress(done, total)`` after each."""
        done = 0
        for key, photos in self.listed.items():
            target = stage / key if key else stage
            target.mkdir(parents=True, exist_ok=True)
            for path in photos:
                try:
                    photo, bits = open_photo(path)
                except UnreadableImage as exc:
                    raise DatasetError(str(exc)) from None
                if bits > 8:
                    self.reduced.append(path)
                yield key or "all", target, path, photo
                done += 1
                if progress is not None:
                    progress(done, self.total)

    def publish(self, stage: Path) -> None:
        """Rename the finished ``stage`` to ``out``; one line when another process filled ``out`` meanwhile
        (``commit_folder``'s FolderTakenError)."""
        commit_folder(stage, self.out)


def output_folder(out: Path, source: Path) -> Path:
    """``out`` as an absolute path (``.`` has no name to build beside), refused when it holds anything or is the
    source."""
    out = Path(os.path.abspath(out))
    if out == Path(os.getcwd()):  # renamed into place whole, it would take the shell's folder from under it
        raise DatasetError(printable(f"{out}: is the current folder; give a new folder's name (the output appears "
                                     "whole, by a rename, when it is complete)"))
    if out == Path(os.path.abspath(source)):
        raise DatasetError(printable(f"{out}: is the input folder; choose a new output folder"))
    if output_taken(out):
        raise DatasetError(printable(f"{out}: folder is not empty; choose a new output folder"))
    return out
