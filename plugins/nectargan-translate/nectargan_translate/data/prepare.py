"""Turning images you have into the layouts the dataset reads (PIL only, no torch).

* :func:`pair_folders` writes aligned A|B files from two folders of same-named images.
* :func:`split_folder` distributes a flat folder into train/, val/ and test/.
* :func:`split_unpaired` distributes two piles of unpaired images (or the reference's
  trainA/ and trainB/) into the unpaired layout's trainA/ valA/ testA/, trainB/ valB/ testB/.

All check everything before writing anything, so a mistake leaves the files as they were.
None leaves a partial dataset when interrupted: ``pair_folders`` builds its
output in a temp folder renamed into place when complete; the splits
record their plan first, so the folder is marked unfinished (``data check``
and training refuse it) until the same split, run again, completes it.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path
from typing import Optional

from PIL import Image

from nectargan_core import (atomic_write, atomic_write_text, commit_folder, output_taken, printable, read_json_object,
                            staging, temp_path)

from .check import SPLIT_MARKER, image_size
from .domains import DOMAINS, domain_dir
from .pixels import UnreadableImage, upright
from .errors import DatasetError
from .listing import Pair, list_images, match_folders
from .tiles import source_of
from .options import SPLITS


def pair_folders(a_dir: Path, b_dir: Path, out: Path, *, size: Optional[int] = None) -> dict[str, int]:
    """Write ``out/NAME.png`` = A|B for every name found in both folders; return pairs per split.

    When ``a_dir`` holds train/, val/ or test/ sub-folders, each is paired with
    the same sub-folder of ``b_dir`` into the same sub-folder of ``out``.
    ``size`` resizes both images to ``size x size``; without it, A and B must
    already be the same size.
    """
    splits = [s for s in SPLITS if (a_dir / s).is_dir()]
    jobs = {s: (a_dir / s, b_dir / s, out / s) for s in splits} if splits else {"": (a_dir, b_dir, out)}
    plans: dict[str, list[Pair]] = {}
    for key, (a, b, _) in jobs.items():
        for folder in (a, b):
            if not folder.is_dir():
                raise DatasetError(f"{folder}: folder does not exist")
        pairs, problems = match_folders(a, b)
        problems += [problem for pair in pairs if (problem := _problem(pair, size is None))]
        if problems:
            more = f" (+{len(problems) - 1} more problem(s))" if len(problems) > 1 else ""
            raise DatasetError(problems[0] + more)
        plans[key] = pairs
    if output_taken(out):
        raise DatasetError(f"{out}: folder is not empty; choose a new output folder")
    with staging(out) as stage:  # renamed to out only when every pair is written
        for key, pairs in plans.items():
            target = stage / key if key else stage
            target.mkdir(parents=True, exist_ok=True)
            for pair in pairs:
                assert pair.b is not None
                _join(pair.a, pair.b, size).save(target / f"{pair.name}.png", format="PNG")
        commit_folder(stage, out)
    return {key or "all": len(pairs) for key, pairs in plans.items()}


def _problem(pair: Pair, same_size: bool) -> Optional[str]:
    """Why ``pair`` cannot be joined: an image that does not decode, or (``same_size``) differing sizes."""
    assert pair.b is not None
    try:
        a_size, b_size = image_size(pair.a, full=True), image_size(pair.b, full=True)
    except UnreadableImage as exc:
        return str(exc)
    if same_size and a_size != b_size:
        return (f"{pair.b}: size {b_size[0]}x{b_size[1]} differs from {pair.a} ({a_size[0]}x{a_size[1]}); "
                "pass --size to resize both")
    return None


def _join(a_path: Path, b_path: Path, size: Optional[int]) -> Image.Image:
    """A and B side by side in one image; differing modes meet in RGB (RGBA if either has alpha)."""
    with Image.open(a_path) as a_file, Image.open(b_path) as b_file:
        a, b = upright(a_file), upright(b_file)  # as training reads them: EXIF orientation applied
    if a.mode != b.mode:
        common = "RGBA" if "A" in a.getbands() + b.getbands() else "RGB"
        a, b = a.convert(common), b.convert(common)
    if size is not None:
        a = a.resize((size, size), Image.Resampling.BICUBIC)
        b = b.resize((size, size), Image.Resampling.BICUBIC)
    joined = Image.new(a.mode, (a.width * 2, a.height))
    joined.paste(a, (0, 0))
    joined.paste(b, (a.width, 0))
    return joined


def split_folder(folder: Path, *, val: float, test: float, seed: int, copy: bool = False,
                 group: Optional[bool] = None) -> tuple[dict[str, int], Optional[dict[str, int]]]:
    """Move (or copy) the images of ``folder`` into its train/, val/ and test/; return the images per split, and
    the source photographs per split when tiles were grouped (else None).

    A folder holding A/ and B/ is split by pair name, keeping each pair in one
    split. The assignment depends only on the sorted names and ``seed``:
    the names are shuffled with ``random.Random(seed)``, the first
    ``round(n * val)`` go to val, the next ``round(n * test)`` to test, the rest to train.

    ``group``: keep the tiles of one photograph (the names ``data tile``
    writes, ``<photo>__x<left>y<top>``) in one split: the photographs are
    shuffled instead (an image not named as a tile is a photograph of its
    own), and each goes, with all its tiles, to val while that brings val's
    count nearer ``round(n * val)`` images, else to test likewise, else to
    train. None (the default): grouped when any name is a tile's.

    The assignment is written to ``folder/.nectargan-split.json`` before the
    first file moves and the file is deleted after the last: while it exists,
    ``data check`` and training refuse the folder, and running the same split
    again finishes it (each file moves by one rename; copies are atomic).
    """
    if not folder.is_dir():
        raise DatasetError(f"{folder}: folder does not exist")
    marker = folder / SPLIT_MARKER
    options = {"val": val, "test": test, "seed": seed, "copy": copy}
    if group is not None:
        options["group"] = group
    recorded = os.path.lexists(marker)
    if not recorded:
        assignment, paired, groups = _plan_split(folder, val=val, test=test, seed=seed, group=group)
        recorded = not _record_plan(marker, {"options": options, "paired": paired, "assignment": assignment,
                                             "groups": groups})  # False: a split started at once recorded first
        if not recorded and not all((folder / relative).is_file() for units in assignment.values()
                                    for unit in units for relative in unit):
            marker.unlink(missing_ok=True)  # planned while another split of it moved files, which then finished
            raise DatasetError(f"{folder}: another 'nectargan data split' of it finished first; it is split")
    if recorded:  # an interrupted split's plan, or the plan of the same split running at once: follow it
        try:
            plan = _recorded_plan(folder, options)
        except DatasetError:
            if not os.path.lexists(marker):  # the same split, running at once, finished (and removed it) meanwhile
                raise DatasetError(f"{folder}: another 'nectargan data split' of it finished first; it is split") \
                    from None
            raise
        assignment, paired, groups = plan["assignment"], plan["paired"], plan.get("groups")
    for split, units in assignment.items():
        for unit in units:
            for relative in unit:
                _transfer(folder / relative, folder / split / relative, copy)
    if paired and not copy:
        for side in ("A", "B"):
            if (folder / side).is_dir() and not any((folder / side).iterdir()):
                (folder / side).rmdir()
    marker.unlink(missing_ok=True)  # gone: the same split, running at once, finished first; the result is one
    return {split: len(assignment[split]) for split in SPLITS}, groups


def _record_plan(marker: Path, plan: dict) -> bool:
    """Write the split's plan to ``marker`` if no plan is there yet (one link: two splits at once record one
    plan, and the other follows it); whether this one's was recorded."""
    stage = temp_path(marker)
    atomic_write_text(stage, json.dumps(plan) + "\n")
    try:
        os.link(stage, marker)
        return True
    except FileExistsError:
        return False
    finally:
        stage.unlink(missing_ok=True)


def _plan_split(folder: Path, *, val: float, test: float, seed: int, group: Optional[bool] = None,
                ) -> tuple[dict[str, list[list[str]]], bool, Optional[dict[str, int]]]:
    """Which files (relative to ``folder``, grouped by pair) go to each split; whether it is an A/B folder; and
    the photographs per split when tiles are grouped by their photograph."""
    taken = [s for s in SPLITS if (folder / s).exists()]
    if taken:
        raise DatasetError(f"{folder}: already has {', '.join(s + '/' for s in taken)}; it looks split already")
    paired = (folder / "A").is_dir() and (folder / "B").is_dir()
    if paired:
        pairs, problems = match_folders(folder / "A", folder / "B")
        if problems:
            raise DatasetError(problems[0])
        units = {pair.name: [pair.a, pair.b] for pair in pairs}
    else:
        units = {path.name: [path] for path in list_images(folder)}
    names = sorted(units)
    n_val, n_test = round(len(names) * val), round(len(names) * test)
    if len(names) - n_val - n_test < 1:
        raise DatasetError(f"{folder}: {len(names)} image(s) leave none for train with --val {val} --test {test}")
    sources = {name: source_of(Path(name).stem if not paired else name) for name in names}
    tiled = any(source is not None for source in sources.values())
    if group and not tiled:
        raise DatasetError(printable(f"{folder}: --group keeps the tiles of one photograph together, but no name is "
                                     "a tile's as 'data tile' names them (<photo>__x<left>y<top>); split without "
                                     "--group"))
    groups = None
    if group or (group is None and tiled):
        chosen, groups = _deal_groups(names, sources, n_val, n_test, seed)
        if not chosen["train"]:
            raise DatasetError(f"{folder}: the tiles come from {sum(groups.values())} photograph(s), too few to "
                               f"leave one for train with --val {val} --test {test}; add photographs, or split "
                               "with --no-group (the test set then holds neighbours of training tiles)")
    else:
        random.Random(seed).shuffle(names)
        chosen = {"val": names[:n_val], "test": names[n_val:n_val + n_test], "train": names[n_val + n_test:]}
    assignment = {split: [[path.relative_to(folder).as_posix() for path in units[name] if path is not None]
                          for name in chosen[split]] for split in SPLITS}
    return assignment, paired, groups


def _deal_groups(names: list[str], sources: dict[str, Optional[str]], n_val: int, n_test: int,
                 seed: int) -> tuple[dict[str, list[str]], dict[str, int]]:
    """The names per split when each photograph's tiles stay together, and the photographs per split; a name that
    is no tile's is a photograph of its own."""
    tiles: dict[tuple[bool, str], list[str]] = {}
    for name in names:
        source = sources[name]
        tiles.setdefault((True, source) if source is not None else (False, name), []).append(name)
    photos = sorted(tiles)
    random.Random(seed).shuffle(photos)
    chosen: dict[str, list[str]] = {split: [] for split in SPLITS}
    groups = {split: 0 for split in SPLITS}
    for photo in photos:  # to val (then test) while that brings its count nearer its target, else to train
        half = len(tiles[photo]) / 2
        split = "val" if len(chosen["val"]) + half <= n_val else "test" if len(chosen["test"]) + half <= n_test \
            else "train"
        chosen[split] += tiles[photo]
        groups[split] += 1
    return chosen, groups


def split_unpaired(folder: Path, *, val: float, test: float, seed: int, copy: bool = False,
                   group: Optional[bool] = None) -> dict[str, int]:
    """Move (or copy) images into the unpaired layout's split folders; return the images per folder.

    Two starting points: ``folder/A/`` and ``folder/B/`` (two piles of images,
    nothing pairs them) are dealt into ``trainA/ valA/ testA/`` and ``trainB/
    valB/ testB/``; or the reference layout's ``trainA/`` and ``trainB/`` give
    ``val`` (and ``test``) of their images to ``valA/ valB/`` (``testA/
    testB/``), which must not exist yet. Each domain is split on its own, as
    :func:`split_folder` splits a folder: its names sorted, shuffled with
    ``random.Random(seed)``, the first ``round(n * val)`` to val, the next
    ``round(n * test)`` to test. The plan is recorded first, so an interrupted
    split is refused by ``data check`` and training and finished by the same
    split run again. ``group`` keeps the tiles of one photograph in one split,
    as :func:`split_folder` does, in each domain.
    """
    if not folder.is_dir():
        raise DatasetError(f"{folder}: folder does not exist")
    marker = folder / SPLIT_MARKER
    options = {"val": val, "test": test, "seed": seed, "copy": copy, "unpaired": True}
    if group is not None:
        options["group"] = group
    if marker.exists():
        moves = _recorded_plan(folder, options)["moves"]
    else:
        moves = _plan_unpaired(folder, val=val, test=test, seed=seed, group=group)
        atomic_write_text(marker, json.dumps({"options": options, "moves": moves}) + "\n")
    for source, target in moves:
        _transfer(folder / source, folder / target, copy)
    if not copy:
        for pile in ("A", "B"):
            if (folder / pile).is_dir() and not any((folder / pile).iterdir()):
                (folder / pile).rmdir()
    marker.unlink()
    counts: dict[str, int] = {}
    for split in SPLITS:
        for domain in DOMAINS:
            if domain_dir(folder, split, domain).is_dir():
                counts[f"{split}{domain}"] = len(list_images(domain_dir(folder, split, domain)))
    return counts


def _plan_unpaired(folder: Path, *, val: float, test: float, seed: int,
                   group: Optional[bool] = None) -> list[list[str]]:
    """The moves (source, target; relative to ``folder``) of :func:`split_unpaired`."""
    piles = all((folder / pile).is_dir() for pile in DOMAINS)
    if piles:
        taken = [domain_dir(folder, split, domain).name for split in SPLITS for domain in DOMAINS
                 if domain_dir(folder, split, domain).exists()]
        if taken:
            raise DatasetError(f"{folder}: already has {', '.join(name + '/' for name in taken)} beside A/ and B/; "
                               "move them away or split A/ and B/ elsewhere")
        sources = {domain: folder / domain for domain in DOMAINS}
    elif all(domain_dir(folder, "train", domain).is_dir() for domain in DOMAINS):
        for split, fraction in (("val", val), ("test", test)):
            taken = [domain_dir(folder, split, domain).name for domain in DOMAINS
                     if domain_dir(folder, split, domain).exists()]
            if fraction and taken:
                raise DatasetError(f"{folder}: already has {', '.join(name + '/' for name in taken)}; pass "
                                   f"--{split} 0 to keep it as it is")
        sources = {domain: domain_dir(folder, "train", domain) for domain in DOMAINS}
    else:
        raise DatasetError(f"{folder}: an unpaired split starts from A/ and B/ (two piles of images) or from "
                           "trainA/ and trainB/ (to take val and test images from); found neither")
    moves = []
    for domain, source in sources.items():
        names = [path.name for path in list_images(source)]
        n_val, n_test = round(len(names) * val), round(len(names) * test)
        if len(names) - n_val - n_test < 1:
            raise DatasetError(f"{source}: {len(names)} image(s) leave none for train with --val {val} "
                               f"--test {test}")
        sources_of = {name: source_of(Path(name).stem) for name in names}
        tiled = any(photo is not None for photo in sources_of.values())
        if group and not tiled:
            raise DatasetError(printable(f"{source}: --group keeps the tiles of one photograph together, but no "
                                         "name is a tile's (<photo>__x<left>y<top>); split without --group"))
        if group or (group is None and tiled):
            chosen, _ = _deal_groups(names, sources_of, n_val, n_test, seed)
            if not chosen["train"]:
                raise DatasetError(f"{source}: too few photographs to leave one for train with --val {val} "
                                   f"--test {test}; add photographs, or split with --no-group")
        else:
            random.Random(seed).shuffle(names)
            chosen = {"val": names[:n_val], "test": names[n_val:n_val + n_test], "train": names[n_val + n_test:]}
        for split, picked in chosen.items():
            target = domain_dir(folder, split, domain).relative_to(folder)
            if target == source.relative_to(folder):
                continue  # the train images of trainA/ stay where they are
            moves += [[(source.relative_to(folder) / name).as_posix(), (target / name).as_posix()]
                      for name in sorted(picked)]
    return moves


def _recorded_plan(folder: Path, options: dict) -> dict:
    """The plan of an interrupted split of ``folder``, if it was made with ``options``; else a one-line error."""
    plan = _read_marker(folder / SPLIT_MARKER)
    if plan["options"] != options:
        recorded = plan["options"]
        flags = f"--val {recorded['val']} --test {recorded['test']} --seed {recorded['seed']}" + (
            " --copy" if recorded["copy"] else "") + (" --unpaired" if recorded.get("unpaired") else "")
        if recorded.get("group") is not None:
            flags += " --group" if recorded["group"] else " --no-group"
        raise DatasetError(f"{folder}: an interrupted split ({flags}) is unfinished; run 'nectargan data split "
                           f"{folder} {flags}' to finish it")
    return plan


def _read_marker(marker: Path) -> dict:
    try:
        plan = read_json_object(marker)
        assert isinstance(plan["options"], dict)
        if plan["options"].get("unpaired"):
            assert isinstance(plan["moves"], list)
            assert all(isinstance(move, list) and len(move) == 2 and all(isinstance(p, str) for p in move)
                       for move in plan["moves"])
            return plan
        assert isinstance(plan["assignment"], dict)
        assert all(split in SPLITS for split in plan["assignment"]) and isinstance(plan["paired"], bool)
        groups = plan.get("groups")
        assert groups is None or isinstance(groups, dict) and all(isinstance(n, int) for n in groups.values())
        return plan
    except (OSError, ValueError, KeyError, TypeError, AssertionError):
        raise DatasetError(f"{marker}: unreadable record of an interrupted split; put the files back where they "
                           "were, delete it and split again") from None


def _transfer(source: Path, target: Path, copy: bool) -> None:
    """Copy (atomically) or move ``source`` to ``target``; a move already done is skipped."""
    if not source.is_file():
        if not copy and target.is_file():
            return  # moved before the interruption
        raise DatasetError(f"{source}: no longer exists, but the split started with it; put it back and run "
                           "the split again")
    target.parent.mkdir(parents=True, exist_ok=True)
    if copy:
        with open(source, "rb") as handle:
            atomic_write(target, lambda out: shutil.copyfileobj(handle, out))
        shutil.copystat(source, target)
    else:
        try:
            shutil.move(str(source), str(target))
        except FileNotFoundError:
            if not target.is_file():
                raise
            # the same split running at once moved it first (the plan is the recorded one): done either way
