"""Faults of the environment are one line in every command, and leave what was there as it was (class 9).

* Read-only, full and size-limited output locations (``fault_locations.py``)
  for ``predict``, ``test``, ``export``, ``data synth``, ``data download``,
  ``config init`` and ``train --resume``: one ``error:`` line naming the location, no traceback,
  no 0-byte or partial file, nothing that was there changed. The default run
  takes each command once, in a location kind chosen by seed; the slow series
  takes every command in every kind.
* Checkpoints with an entry removed, generated from a real checkpoint (every
  top-level entry, every tracked object, sampled tensors and nested entries):
  ``predict``/``test``/``export`` and ``--resume`` load it or fail with one
  line naming the file and the missing entry.
* Images of different sizes with resizing off: one line naming two of them.
"""

from __future__ import annotations

import os
import random
import shutil
import tarfile
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from fault_locations import KINDS, Location, make_location, one_error_line, release, run_nectargan, snapshot
from kill_points import TINY, tiny_pix2pix_run
from nectargan_core import Run
from nectargan_core.checkpoint import load_checkpoint
from nectargan_core.errors import CheckpointError, NectarGANError
from nectargan_translate.inference import load_generator

SEED = int(os.environ.get("NECTARGAN_FAULT_SEED", "20251113"))
#: What the error line says, per location kind (data download checks the free space before extracting).
REASONS = {"read-only": ("Read-only file system",), "full": ("No space left on device", "are free there"),
           "size limit": ("File too large",)}


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    return tiny_pix2pix_run(tmp_path_factory)


def copy_run(run_dir: Path, folder: Path) -> None:
    shutil.copytree(run_dir, folder / "run", ignore=shutil.ignore_patterns("export", "test"))


COMMANDS = ["predict", "test", "export", "data synth", "data download", "config init", "train --resume"]


#: command -> (what to seed the location with, the arguments given the location, the path the error names)
def commands(run_dir: Path) -> dict:
    image = run_dir.parent.parent.parent / "data" / "test" / "00010.png"
    return {
        "predict": (None, lambda loc: ("predict", run_dir, image, "-o", loc / "out"), lambda loc: loc / "out"),
        "test": (None, lambda loc: ("test", run_dir, "--out", loc / "out"), lambda loc: loc / "out"),
        "export": (lambda folder: previous_export(run_dir, folder),
                   lambda loc: ("export", run_dir, "--format", "torchscript", "-o", loc / "g.pt"),
                   lambda loc: loc / "g.pt"),
        "data synth": (None, lambda loc: ("data", "synth", loc / "shapes", "--count", "6", "--size", "16"),
                       lambda loc: loc),
        "config init": (None, lambda loc: ("config", "init", "--trainer", "pix2pix", "-o", loc / "new" / "run.yaml"),
                        lambda loc: loc / "new"),
        "data download": (None, lambda loc: ("data", "download", "data", "--url", dataset_archive(run_dir),
                                             "--dest", loc / "datasets"), lambda loc: loc / "datasets"),
        "train --resume": (lambda folder: copy_run(run_dir, folder),
                           lambda loc: ("train", "--resume", loc / "run", "--set", "loop.epochs=2"),
                           lambda loc: loc / "run"),
    }


def dataset_archive(run_dir: Path) -> Path:
    """The run's dataset as a local .tar.gz (made once)."""
    archive = run_dir.parent.parent.parent / "data.tar.gz"
    if not archive.exists():
        with tarfile.open(archive, "w:gz") as tar:
            tar.add(archive.with_name("data"), arcname="data")
    return archive


def previous_export(run_dir: Path, folder: Path) -> None:
    from nectargan_translate.export import export_generator

    export_generator(run_dir, fmt="torchscript", output=folder / "g.pt")


def assert_one_line_and_nothing_changed(run_dir: Path, tmp_path: Path, command: str, kind: str) -> None:
    seed, args, named = commands(run_dir)[command]
    location = make_location(kind, tmp_path, seed, slack=0)
    try:
        before = snapshot(location.path)
        result = run_nectargan(*args(location.path), location=location)
        line = one_error_line(result)
        assert str(named(location.path)) in line and any(reason in line for reason in REASONS[kind]), line
        assert ".tmp-" not in line, line  # the target is named, not the temp file it is written through
        after = snapshot(location.path)
        assert after == before, sorted(set(after) ^ set(before))  # no 0-byte, partial or temp file; nothing changed
    finally:
        release(location)


def default_sample() -> list[tuple[str, str]]:
    """Each command once, in a location kind chosen by seed (every kind at least twice)."""
    kinds = (list(KINDS) * 3)[:len(COMMANDS)]
    random.Random(SEED).shuffle(kinds)
    return list(zip(COMMANDS, kinds))


@pytest.mark.parametrize("command, kind", default_sample())
def test_unwritable_output_is_one_line_and_changes_nothing(run_dir, tmp_path, command, kind):
    assert_one_line_and_nothing_changed(run_dir, tmp_path, command, kind)


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("command", COMMANDS)
def test_unwritable_output_series(run_dir, tmp_path, command, kind):
    assert_one_line_and_nothing_changed(run_dir, tmp_path, command, kind)


def test_config_init_creates_missing_folders(tmp_path):
    target = tmp_path / "a" / "b" / "run.yaml"
    result = run_nectargan("config", "init", "--trainer", "pix2pix", "-o", target)
    assert result.returncode == 0 and result.stdout.strip() == f"wrote {target}", result.stderr
    assert run_nectargan("config", "validate", target).returncode == 0
    under_a_file = tmp_path / "a" / "b" / "run.yaml" / "x.yaml"
    line = one_error_line(run_nectargan("config", "init", "-o", under_a_file))
    assert line == f"error: cannot write the config: {target}: exists and is not a folder; choose another path"


@pytest.mark.parametrize("command", ["predict", "plot", "train"])
def test_a_command_that_wrote_nothing_leaves_no_new_folder(run_dir, tmp_path, command):
    """Under a 16-byte file size limit predict and plot left their new (empty) output folder, and a new train
    its run directory (checkpoints/ and run.lock), and train named no file (the lock's record was the write)."""
    limit = Location("size limit", tmp_path, fsize=16)
    image = run_dir.parent.parent.parent / "data" / "test" / "00010.png"
    args = {"predict": ("predict", run_dir, image, "-o", tmp_path / "new" / "out"),
            "plot": ("plot", run_dir, "-o", tmp_path / "new" / "plots"),
            "train": ("train", "--trainer", "toy", "--set", "run.device=cpu", "--set", "visualizers=[]",
                      "--set", f"run.output_dir={tmp_path / 'new'}", "--set", "run.name=fresh")}[command]
    line = one_error_line(run_nectargan(*args, location=limit, cwd=tmp_path))
    assert line.startswith(f"error: {tmp_path / 'new'}/") and "File too large" in line, line
    assert not (tmp_path / "new").exists()  # not even the output folders a new run's directory went into


# -- crafted checkpoints --------------------------------------------------------------------------------
def entry_paths(checkpoint: dict, rng: random.Random) -> list[tuple[str, ...]]:
    """Entries to remove: every top-level one, every tracked object's state, and (sampled) their own entries."""
    paths = [(key,) for key in checkpoint if key not in ("format", "format_version")]
    for name, state in checkpoint["state"].items():
        paths.append(("state", name))
        if isinstance(state, dict) and state:
            paths += [("state", name, key) for key in rng.sample(sorted(state), min(2, len(state)))]
    paths += [("rng", key) for key in checkpoint["rng"]]
    return paths


def without(checkpoint: dict, path: tuple[str, ...]) -> dict:
    crafted = {**checkpoint}
    node = crafted
    for key in path[:-1]:
        node[key] = {**node[key]}
        node = node[key]
    del node[path[-1]]
    return crafted


@pytest.fixture(scope="module")
def crafted(run_dir, tmp_path_factory) -> dict[tuple[str, ...], Path]:
    """One checkpoint file per removed entry, written like a checkpoint whose sidecar was lost (CRC-checked)."""
    source = run_dir / "checkpoints" / "epoch0000-step00000008.pt"
    checkpoint = load_checkpoint(source)
    folder = tmp_path_factory.mktemp("crafted")
    files = {}
    for index, path in enumerate(entry_paths(checkpoint, random.Random(SEED))):
        files[path] = folder / f"crafted{index:02d}.pt"
        torch.save(without(checkpoint, path), files[path])
    return files


def assert_loads_or_names(error: BaseException | None, file: Path, path: tuple[str, ...]) -> None:
    if error is None:
        return  # an entry this command does not need
    text = str(error)
    assert isinstance(error, NectarGANError) and "\n" not in text, repr(error)
    assert text.startswith(str(file)), text
    assert f"'{path[-1]}'" in text, text


def test_generator_commands_name_the_file_and_the_missing_entry(crafted):
    needed = 0
    for path, file in crafted.items():
        try:
            load_generator(file)
            error = None
        except NectarGANError as exc:
            error = exc
            needed += 1
        assert_loads_or_names(error, file, path)
        if path in {("state",), ("epoch",), ("config",), ("state", "generator"), ("trainer",)}:
            assert error is not None, path
    assert needed >= 6


def test_resume_names_the_file_and_the_missing_entry(run_dir, crafted, tmp_path):
    copy_run(run_dir, tmp_path)
    failed = 0
    for path, file in crafted.items():
        try:
            Run.resume(tmp_path / "run", checkpoint=file)
            error = None
        except NectarGANError as exc:
            error = exc
            failed += 1
        assert_loads_or_names(error, file, path)
        if path in {("state",), ("rng",), ("epoch",), ("global_step",), ("trainer",), ("rng", "python"),
                    ("rng", "torch"), ("state", "generator")}:
            assert error is not None, path
    assert failed >= 8


def replaced(checkpoint: dict, path: tuple[str, ...], value: object) -> dict:
    crafted = {**checkpoint}
    node = crafted
    for key in path[:-1]:
        node[key] = {**node[key]}
        node = node[key]
    node[path[-1]] = value
    return crafted


def test_resume_names_the_file_and_an_entry_of_the_wrong_type(run_dir, tmp_path):
    """rng.numpy = "x" was 'cannot restore: TypeError: string indices must be integers' (issue 13): every RNG entry
    and its parts, replaced by text, a number or a list, is one line naming the file and the entry's path."""
    copy_run(run_dir, tmp_path)
    checkpoint = load_checkpoint(run_dir / "checkpoints" / "epoch0000-step00000008.pt")
    paths = [("rng",)] + [("rng", key) for key in checkpoint["rng"]] + [
        ("rng", key, part) for key in ("python", "numpy") for part in checkpoint["rng"][key]]
    for index, path in enumerate(paths):
        original = checkpoint
        for key in path:
            original = original[key]
        for value in ("x", 7, [1, 2]):
            if type(value) is type(original) or all(isinstance(v, (int, float)) for v in (value, original)):
                continue  # a number where a number belongs is a valid state
            file = tmp_path / f"wrong{index}-{type(value).__name__}.pt"
            torch.save(replaced(checkpoint, path, value), file)
            with pytest.raises(NectarGANError) as refused:
                Run.resume(tmp_path / "run", checkpoint=file)
            text = str(refused.value)
            named = ".".join(path[:2])  # the generator's own parts are named by the generator (rng.numpy)
            assert "\n" not in text and text.startswith(f"{file}: cannot restore entry '{named}"), text


CRAFTED_COMMANDS = ["predict", "test", "export", "train --resume"]


@pytest.mark.parametrize("command", random.Random(SEED).sample(CRAFTED_COMMANDS, 2))
def test_a_crafted_checkpoint_through_the_console_script_is_one_line(run_dir, crafted, tmp_path, command):
    crafted_through_the_console_script(run_dir, crafted, tmp_path, command)


@pytest.mark.slow
@pytest.mark.parametrize("command", CRAFTED_COMMANDS)
def test_a_crafted_checkpoint_through_the_console_script_series(run_dir, crafted, tmp_path, command):
    crafted_through_the_console_script(run_dir, crafted, tmp_path, command)


def crafted_through_the_console_script(run_dir: Path, crafted, tmp_path: Path, command: str) -> None:
    rng = random.Random(f"{SEED}{command}")
    # an entry the generator needs (torch's BatchNorm loads without num_batches_tracked, older files lack it)
    path, file = rng.choice([(p, f) for p, f in crafted.items()
                             if p[:2] == ("state", "generator") and not p[-1].endswith("num_batches_tracked")])
    image = run_dir.parent.parent.parent / "data" / "test" / "00010.png"
    copy_run(run_dir, tmp_path)
    args = {"predict": ("predict", file, image, "-o", tmp_path / "out"),
            "test": ("test", file, "--out", tmp_path / "out"),
            "export": ("export", file, "--format", "torchscript", "-o", tmp_path / "g.pt"),
            "train --resume": ("train", "--resume", tmp_path / "run", "--checkpoint", file)}[command]
    line = one_error_line(run_nectargan(*args))
    assert line.startswith(f"error: {file}: ") and f"'{path[-1]}'" in line, line


# -- images of different sizes with resizing off -----------------------------------------------------
def mixed_sizes(root: Path, seed: int) -> Path:
    """Aligned pairs whose sizes differ (a seeded draw), in train/ and val/."""
    rng = np.random.default_rng(seed)
    for split, count in (("train", 4), ("val", 2)):
        for i in range(count):
            side = int(rng.choice([32, 48, 64])) if i else 32
            side = 48 if (i == 1 and side == 32) else side  # at least two sizes
            pixels = rng.integers(0, 256, (side, side * 2, 3), dtype=np.uint8)
            (root / split).mkdir(parents=True, exist_ok=True)
            Image.fromarray(pixels).save(root / split / f"{i:03d}.png")
    return root


@pytest.mark.parametrize("workers", [2, pytest.param(0, marks=pytest.mark.slow)])
def test_images_of_different_sizes_with_resizing_off_are_one_line(tmp_path, workers):
    data = mixed_sizes(tmp_path / "data", SEED + workers)
    settings = [f"data.root={data}", "data.load_size=null", "data.crop_size=null", "data.batch_size=2",
                f"data.num_workers={workers}", "loop.epochs=1", "run.device=cpu",
                f"run.output_dir={tmp_path / 'runs'}", "visualizers=[]", *TINY]
    result = run_nectargan("train", "--trainer", "pix2pix", *(a for s in settings for a in ("--set", s)))
    line = one_error_line(result)
    assert line.startswith(f"error: {data / 'train'}/") and "cannot share a batch of 2 with resizing off" in line
    assert line.count(str(data / "train")) == 2, line  # names both files


def test_different_sizes_without_header_checks_are_found_at_the_batch(tmp_path):
    data = mixed_sizes(tmp_path / "data", SEED)
    run = Run.create({"trainer": "pix2pix"}, overrides=[
        f"data.root={data}", "data.load_size=null", "data.crop_size=null", "data.batch_size=4", "data.verify=none",
        "data.num_workers=0", "data.shuffle=false", "loop.epochs=1", "run.device=cpu",
        f"run.output_dir={tmp_path / 'runs'}", "visualizers=[]", *TINY])
    with pytest.raises(NectarGANError, match=r"000\.png .*: images of different sizes cannot share a batch"):
        run.fit()


def test_same_sizes_with_resizing_off_still_train(tmp_path):
    """The check refuses only what cannot work: one size for all, resizing off, batches of 2, trains."""
    rng = np.random.default_rng(0)
    for split, count in (("train", 4), ("val", 2)):
        (tmp_path / "data" / split).mkdir(parents=True)
        for i in range(count):
            pixels = rng.integers(0, 256, (32, 64, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(tmp_path / "data" / split / f"{i}.png")
    run = Run.create({"trainer": "pix2pix"}, overrides=[
        f"data.root={tmp_path / 'data'}", "data.load_size=null", "data.crop_size=null", "data.batch_size=2",
        "data.num_workers=0", "loop.epochs=1", "run.device=cpu", f"run.output_dir={tmp_path / 'runs'}",
        "visualizers=[]", "examples.every_epochs=null", *TINY])
    run.fit()
    assert run.status()["status"] == "finished"
