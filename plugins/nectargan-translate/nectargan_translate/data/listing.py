"""Finding pairs on disk: sorted, extension-filtered listings in the two layouts.

* ``aligned``: every image of a split holds A and B side by side (A | B).
* ``folders``: a split holds ``A/`` and ``B/``; a pair is the two files with
  the same name without extension (``A/0001.png`` with ``B/0001.jpg``).

Listings are sorted by file name so that index ``i`` means the same pair on
every machine, and hidden files (``.DS_Store``, macOS ``._*`` forks) are skipped.
"""

from __future__ import annotations

import errno
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Optional, Sequence

from nectargan_core import file_kind, printable

from .errors import DatasetError

IMAGE_EXTENSIONS: tuple[str, ...] = (".bmp", ".jpeg", ".jpg", ".png", ".tif", ".tiff", ".webp")
Layout = Literal["aligned", "folders"]

#: How many unmatched names an error message lists.
SHOWN_NAMES = 5


@dataclass(frozen=True)
class Pair:
    """One pair: an aligned A|B file (``b`` is None) or an A file and a B file."""

    name: str
    a: Path
    b: Optional[Path] = None


def list_images(folder: Path) -> list[Path]:
    """Image files directly in ``folder``, sorted by name."""
    return sorted(
        path for path in folder.iterdir()
        if path.is_file() and not path.name.startswith(".") and path.suffix.lower() in IMAGE_EXTENSIONS
    )


def photo_folders(source: Path, splits: Sequence[str], purpose: str) -> tuple[dict[str, list[Path]], list[Path]]:
    """The images the photo tools (``data tile``, ``data derive``) read, by split: ``{split: images}`` when
    ``source`` holds split folders, else ``{"": images}``; and the images left beside split folders (not read).
    A one-line DatasetError for a missing folder, an entry named like an image that is no file, two images
    whose names differ only in the extension (both would be written under one name), or no image at all."""
    if not source.is_dir():
        raise DatasetError(f"{source}: folder does not exist")
    present = [s for s in splits if (source / s).is_dir()]
    folders = {s: source / s for s in present} if present else {"": source}
    loose = list_images(source) if present else []
    listed: dict[str, list[Path]] = {}
    for key, folder in folders.items():
        problems = not_image_files(folder)
        if problems:
            raise DatasetError(problems[0])
        listed[key] = list_images(folder)
        stems: dict[str, Path] = {}
        for path in listed[key]:
            if path.stem.lower() in stems:
                raise DatasetError(printable(f"{path}: has the name of {stems[path.stem.lower()].name} but for the "
                                             "extension; the outputs of both would get one name: rename one"))
            stems[path.stem.lower()] = path
    if not any(listed.values()):
        raise DatasetError(f"{source}: no images (.png, .jpg, ...) to {purpose}")
    return listed, loose


def not_image_files(folder: Path) -> list[str]:
    """One problem per entry of ``folder`` named like an image that is not a regular file.

    A folder, FIFO or device called ``x.png``, or a link to a missing file or to
    itself, would otherwise be left out of the listing without a word: a
    picture the user meant to train on, silently missing.
    """
    problems = []
    for path in sorted(folder.iterdir()):
        if path.name.startswith(".") or path.suffix.lower() not in IMAGE_EXTENSIONS:
            continue
        problem = entry_problem(path, folder)
        if problem is not None:
            problems.append(problem)
    return problems


def entry_problem(path: Path, folder: Optional[Path] = None) -> Optional[str]:
    """Why ``path``, named or given as an image, is not an image file (None for a regular file, through links):
    a folder, FIFO, device or socket, a link that loops or leads nowhere. The one rule of every command that
    lists inputs: such an entry is named, never left out without a word or called "not found"."""
    try:
        mode = path.stat().st_mode  # through links
    except OSError as exc:
        what = ("a symbolic link that loops" if exc.errno == errno.ELOOP
                else "a symbolic link to a missing file" if exc.errno == errno.ENOENT and path.is_symlink()
                else f"unreadable ({exc.strerror})")
        return printable(f"{path}: not an image file but {what}; fix the link or remove it")
    if stat.S_ISREG(mode):
        return None
    fix = f"move it out of {folder} or rename it" if folder is not None else "give an image file"
    return printable(f"{path}: not an image file but {file_kind(mode)}; {fix}")


def split_dir(root: str | Path | None, folder: str) -> Path:
    """``root/folder``, or an error naming whichever of the two is missing."""
    if root is None:
        raise DatasetError("data.root is not set; point it at a folder holding train/ (and val/, test/)")
    base = Path(root)
    if not base.is_dir():
        raise DatasetError(f"{base}: dataset folder does not exist (data.root)")
    path = base / folder
    if not path.is_dir():
        found = sorted(p.name for p in base.iterdir() if p.is_dir() and not p.name.startswith("."))
        raise DatasetError(f"{path}: split folder does not exist (found: {', '.join(found) or 'no folders'})")
    return path


def detect_layout(path: Path) -> Layout:
    """``folders`` when the split holds both ``A/`` and ``B/``, ``aligned`` otherwise."""
    return "folders" if (path / "A").is_dir() and (path / "B").is_dir() else "aligned"


def find_pairs(path: Path, layout: Layout | Literal["auto"] = "auto") -> tuple[list[Pair], list[str]]:
    """The pairs of one split folder, and every problem met matching them (one line each)."""
    layout = detect_layout(path) if layout == "auto" else layout
    if layout == "aligned":
        pairs = [Pair(p.stem, p) for p in list_images(path)]
        problems = not_image_files(path) + ([] if pairs else [_empty(path)])
        return pairs, problems
    problems = [f"{path / side}: folder does not exist; the folders layout needs A/ and B/"
                for side in "AB" if not (path / side).is_dir()]
    return ([], problems) if problems else match_folders(path / "A", path / "B")


def match_folders(a_dir: Path, b_dir: Path) -> tuple[list[Pair], list[str]]:
    """Pairs of same-named images in two folders, and every problem (duplicate or unmatched names)."""
    a_files, a_problems = _by_stem(a_dir)
    b_files, b_problems = _by_stem(b_dir)
    problems = a_problems + b_problems
    problems += _unmatched(a_dir, b_dir, sorted(a_files.keys() - b_files.keys()), a_files)
    problems += _unmatched(b_dir, a_dir, sorted(b_files.keys() - a_files.keys()), b_files)
    pairs = [Pair(stem, a_files[stem], b_files[stem]) for stem in sorted(a_files.keys() & b_files.keys())]
    if not a_files and not b_files:
        problems.append(_empty(a_dir))
    return pairs, problems


def _by_stem(folder: Path) -> tuple[dict[str, Path], list[str]]:
    files: dict[str, Path] = {}
    problems = not_image_files(folder)
    for path in list_images(folder):
        if path.stem in files:
            problems.append(f"{path}: same name as {files[path.stem].name}; pairs are matched by name "
                            "without extension, so each name must appear once")
        else:
            files[path.stem] = path
    return files, problems


def _unmatched(folder: Path, other: Path, stems: list[str], files: dict[str, Path]) -> list[str]:
    if not stems:
        return []
    shown = ", ".join(files[s].name for s in stems[:SHOWN_NAMES])
    more = f" (+{len(stems) - SHOWN_NAMES} more)" if len(stems) > SHOWN_NAMES else ""
    return [f"{folder}: {len(stems)} file(s) have no match of the same name in {other}: {shown}{more}"]


def _empty(path: Path) -> str:
    return f"{path}: no images (looked for {', '.join(IMAGE_EXTENSIONS)})"
