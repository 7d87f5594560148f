"""Every output is complete or absent, re-runnable after a kill, and verified when read back (class 6).

Each command that writes (``data synth``, ``data split``, ``data download``,
``export``) is SIGKILLed at every point of its commit (by a driver that kills
just before the k-th call of a chosen function) and at seeded random moments.
After each kill, ``data check`` must not call a partial dataset ok (the folder
is absent, untouched, or complete), the export and its sidecar must agree, and
running the command again must give the same result as an uninterrupted run.
The default run takes a seeded sample; the slow series takes many more kills.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import struct
import tarfile
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from fault_locations import run_nectargan, snapshot
from kill_points import kill_after, kill_at_call, timed, tiny_pix2pix_run
from local_servers import serve_folder
from nectargan_core import Run
from nectargan_core.checkpoint import load_checkpoint, save_checkpoint, sidecar_path, sha256_of
from nectargan_core.errors import CheckpointError
from nectargan_translate.data_cli import data_group
from nectargan_translate.export import export_generator, quiet_jit
from support import cli_runner

SEED = int(os.environ.get("NECTARGAN_FAULT_SEED", "20251113"))


def check(folder: Path) -> bool:
    """Whether ``nectargan data check`` calls ``folder`` ok."""
    return cli_runner().invoke(data_group, ["check", str(folder)]).exit_code == 0


def data(*args: object) -> None:
    result = cli_runner().invoke(data_group, [str(a) for a in args])
    assert result.exit_code == 0, (result.output, result.exception)


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if ".tmp-" in p.name)


# -- data synth -------------------------------------------------------------------------------------
SYNTH = ("--count", "40", "--size", "32", "--seed", "3")


@pytest.fixture(scope="module")
def synth_reference(tmp_path_factory) -> tuple[dict[str, bytes], float]:
    out = tmp_path_factory.mktemp("synth_reference") / "shapes"
    took = timed(("data", "synth", out, *SYNTH))
    return snapshot(out), took


def assert_synth_complete_or_absent(out: Path, reference: dict[str, bytes]) -> None:
    if out.exists():
        assert snapshot(out) == reference  # complete, never partial
        assert check(out)
        return
    assert not check(out)
    data("synth", out, *SYNTH)  # re-runnable, and cleans up after the killed run
    assert snapshot(out) == reference
    assert leftovers(out.parent) == []


@pytest.mark.parametrize("at", [1, 17, 41])  # PNG 1, 17, and synth.json's folder about to be renamed
def test_synth_killed_at_a_write_leaves_nothing(tmp_path, synth_reference, at):
    reference, _ = synth_reference
    out = tmp_path / "shapes"
    target = "PIL.Image:Image.save" if at < 41 else "nectargan_core.atomic:os.rename"
    assert kill_at_call(("data", "synth", out, *SYNTH), target, 1 if at == 41 else at,
                        inside="nectargan_core.atomic:commit_folder" if at == 41 else "")
    assert not out.exists() and leftovers(tmp_path)  # the killed run's temp folder, nothing else
    assert_synth_complete_or_absent(out, reference)


def synth_random_kills(tmp_path: Path, reference: dict[str, bytes], took: float, seeds: range) -> None:
    for seed in seeds:
        out = tmp_path / f"kill{seed}" / "shapes"
        out.parent.mkdir()
        kill_after(("data", "synth", out, *SYNTH), random.Random(SEED + seed).uniform(0, took * 1.1))
        assert_synth_complete_or_absent(out, reference)


def test_synth_killed_at_random_moments(tmp_path, synth_reference):
    synth_random_kills(tmp_path, *synth_reference, range(2))


@pytest.mark.slow
def test_synth_killed_at_random_moments_series(tmp_path, synth_reference):
    synth_random_kills(tmp_path, *synth_reference, range(2, 14))


# -- data split -------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def flat_folder(tmp_path_factory) -> Path:
    """30 aligned images in one folder (a synthetic set's train/, flattened)."""
    root = tmp_path_factory.mktemp("flat")
    data("synth", root / "set", "--count", "30", "--size", "16", "--val", "0", "--test", "0")
    return root / "set" / "train"


@pytest.fixture(scope="module")
def split_reference(flat_folder, tmp_path_factory) -> dict[str, dict[str, bytes]]:
    references = {}
    for mode in ("move", "copy"):
        folder = tmp_path_factory.mktemp(f"split_{mode}") / "set"
        shutil.copytree(flat_folder, folder)
        data("split", folder, "--val", "0.2", "--test", "0.2", "--seed", "5", *(["--copy"] if mode == "copy" else []))
        references[mode] = snapshot(folder)
    return references


def assert_split_recovers(folder: Path, original: dict[str, bytes], reference: dict[str, bytes], flags: list[str]):
    state = snapshot(folder)
    if check(folder):  # ok only for the untouched folder or the finished split
        assert state in (original, reference)
    if state != reference:
        data("split", folder, *flags)  # finishes the interrupted split (or does it, if it never started)
    assert snapshot(folder) == reference and check(folder)


@pytest.mark.parametrize("mode", ["move", "copy"])
def test_split_killed_at_every_kind_of_point_is_finished_by_running_it_again(tmp_path, flat_folder, split_reference,
                                                                            mode):
    flags = ["--val", "0.2", "--test", "0.2", "--seed", "5", *(["--copy"] if mode == "copy" else [])]
    original = snapshot(flat_folder)
    target = "shutil:move" if mode == "move" else "nectargan_translate.data.prepare:atomic_write"
    for at in (1, 2, 15, 30):  # the plan written but nothing moved; then after 1, 14 and 29 of 30 files
        folder = tmp_path / f"{mode}{at}" / "set"
        shutil.copytree(flat_folder, folder)
        killed = kill_at_call(("data", "split", folder, *flags), target, at)
        assert killed
        assert not check(folder)  # marked unfinished
        other = cli_runner().invoke(data_group, ["split", str(folder), "--val", "0.3"])
        assert "an interrupted split (--val 0.2 --test 0.2 --seed 5" in str(other.exception)
        assert_split_recovers(folder, original, split_reference[mode], flags)


@pytest.mark.slow
def test_split_killed_at_random_moments_series(tmp_path, flat_folder, split_reference):
    original = snapshot(flat_folder)
    flags = ["--val", "0.2", "--test", "0.2", "--seed", "5"]
    took = timed(("data", "split", shutil.copytree(flat_folder, tmp_path / "timing" / "set"), *flags))
    for seed in range(10):
        folder = tmp_path / f"kill{seed}" / "set"
        shutil.copytree(flat_folder, folder)
        kill_after(("data", "split", folder, *flags), random.Random(SEED + seed).uniform(0, took * 1.1))
        assert_split_recovers(folder, original, split_reference["move"], flags)


# -- data download ----------------------------------------------------------------------------------
ARCHIVE_FILES = 30


@pytest.fixture(scope="module")
def served_archive(tmp_path_factory):
    """A real dataset (synthetic pairs, and 4 larger noise pairs in val/) as set.tar.gz on 127.0.0.1."""
    root = tmp_path_factory.mktemp("archive")
    data("synth", root / "set", "--count", str(ARCHIVE_FILES), "--size", "16", "--val", "0", "--test", "0")
    rng = np.random.default_rng(SEED)
    (root / "set" / "test").rmdir()  # empty: --test 0
    for i in range(4):
        Image.fromarray(rng.integers(0, 256, (96, 192, 3), dtype=np.uint8)).save(root / "set" / "val" / f"{i}.png")
    www = tmp_path_factory.mktemp("www")
    with tarfile.open(www / "set.tar.gz", "w:gz") as tar:
        tar.add(root / "set", arcname="set")
    with serve_folder(www) as base:
        expected = tmp_path_factory.mktemp("expected")
        data("download", "set", "--url", f"{base}/set.tar.gz", "--dest", expected)
        assert snapshot(expected / "set") == snapshot(root / "set") and check(expected / "set")
        yield f"{base}/set.tar.gz", snapshot(expected / "set")


def assert_download_complete_or_absent(dest: Path, url: str, expected: dict[str, bytes]) -> None:
    folder = dest / "set"
    if folder.exists():
        assert snapshot(folder) == expected and check(folder)
    else:
        assert not check(folder)
        data("download", "set", "--url", url, "--dest", dest)  # the re-run works, and removes the killed temps
    assert snapshot(folder) == expected and check(folder)
    assert sorted(p.name for p in dest.iterdir()) == ["set"]


@pytest.mark.parametrize("target, at, inside", [
    ("http.client:HTTPResponse.read1", 2, ""),  # while fetching
    ("nectargan_translate.data.download:_write", 1, ""),  # extraction starting
    ("nectargan_translate.data.download:_write", ARCHIVE_FILES // 2, ""),  # half extracted
    ("os:rename", 1, "nectargan_core.atomic:commit_folder"),  # complete, about to be renamed into place
])
def test_download_killed_at_each_stage_leaves_nothing_and_reruns(tmp_path, served_archive, target, at, inside):
    url, expected = served_archive
    dest = tmp_path / "datasets"
    assert kill_at_call(("data", "download", "set", "--url", url, "--dest", dest), target, at, inside)
    assert not (dest / "set").exists()
    assert_download_complete_or_absent(dest, url, expected)


@pytest.mark.slow
def test_download_killed_at_random_moments_series(tmp_path, served_archive):
    url, expected = served_archive
    took = timed(("data", "download", "set", "--url", url, "--dest", tmp_path / "timing"))
    for seed in range(10):
        dest = tmp_path / f"kill{seed}"
        kill_after(("data", "download", "set", "--url", url, "--dest", dest),
                   random.Random(SEED + seed).uniform(0, took * 1.1))
        assert_download_complete_or_absent(dest, url, expected)


# -- export -----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    return tiny_pix2pix_run(tmp_path_factory)


def export_state(path: Path) -> tuple[str, dict | None]:
    """Which weights the export holds (a digest of its tensors), after checking that the file loads and that
    its sidecar, if any, describes it."""
    sidecar = path.with_name(path.name + ".json")
    record = json.loads(sidecar.read_text()) if sidecar.exists() else None
    if record is not None:
        assert (record["size"], record["sha256"]) == (path.stat().st_size, sha256_of(path))
    with quiet_jit():
        state = torch.jit.load(str(path)).state_dict()
    digest = hashlib.sha256(b"".join(state[k].numpy().tobytes() for k in sorted(state))).hexdigest()
    return digest, record


@pytest.fixture(scope="module")
def two_exports(run_dir, tmp_path_factory):
    """Exports of the step-4 and of the step-8 checkpoint (the previous export and the new one), and the time
    the new one takes through the console script."""
    folder = tmp_path_factory.mktemp("exports")
    states = []
    for step in ("epoch0000-step00000004.pt", "epoch0000-step00000008.pt"):
        path = folder / f"{step}.torchscript.pt"
        export_generator(run_dir / "checkpoints" / step, fmt="torchscript", output=path)
        states.append((path, *export_state(path)))
    old, new = states
    assert old[1] != new[1] and old[2]["global_step"] == 4 and new[2]["global_step"] == 8
    return old, new


def previous_export(out: Path, old) -> None:
    """``out`` and its sidecar as the step-4 export left them."""
    out.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(old[0], out)
    out.with_name(out.name + ".json").write_text(json.dumps({**old[2], "file": out.name}))


def export_args(run_dir: Path, out: Path) -> tuple:
    return ("export", run_dir / "checkpoints" / "epoch0000-step00000008.pt", "--format", "torchscript", "-o", out)


def test_export_killed_at_every_point_of_its_commit(tmp_path, run_dir, two_exports, at=None):
    """Killed before removing the old sidecar (1), moving the model (2), moving the sidecar (3), or not (4).

    The default run takes the two kills that leave a model without a sidecar; the slow series all four.
    """
    for at in (2, 3) if at is None else (at,):
        export_killed_at(tmp_path / f"at{at}", run_dir, two_exports, at)


@pytest.mark.slow
def test_export_killed_at_every_point_of_its_commit_series(tmp_path, run_dir, two_exports):
    for at in (1, 2, 3, 4):
        export_killed_at(tmp_path / f"at{at}", run_dir, two_exports, at)


def export_killed_at(folder: Path, run_dir: Path, two_exports, at: int) -> None:
    old, new = two_exports
    out = folder / "g.pt"
    previous_export(out, old)
    killed = kill_at_call(export_args(run_dir, out), "os:replace,os:unlink", at,
                          inside="nectargan_translate.export:commit_files")
    assert killed == (at < 4)
    weights, record = export_state(out)
    expected = {1: (old[1], 4), 2: (old[1], None), 3: (new[1], None), 4: (new[1], 8)}[at]
    assert (weights, record and record["global_step"]) == expected
    export_generator(run_dir / "checkpoints" / "epoch0000-step00000008.pt", fmt="torchscript", output=out)
    assert export_state(out)[0] == new[1] and leftovers(folder) == []  # re-runnable; the killed temp is gone


def export_random_kills(tmp_path: Path, run_dir: Path, two_exports, seeds: range) -> None:
    old, new = two_exports
    took = timed(export_args(run_dir, tmp_path / "timing.pt"))
    for seed in seeds:
        out = tmp_path / f"kill{seed}" / "g.pt"
        previous_export(out, old)
        kill_after(export_args(run_dir, out), random.Random(SEED + seed).uniform(0, took * 1.1))
        weights, record = export_state(out)  # whatever the moment: a loadable export, a sidecar that matches it
        assert weights in (old[1], new[1])


@pytest.mark.slow
def test_export_killed_at_random_moments_series(tmp_path, run_dir, two_exports):
    export_random_kills(tmp_path, run_dir, two_exports, range(8))


# -- checkpoints without a sidecar ------------------------------------------------------------------
def member_ranges(path: Path) -> dict[str, tuple[int, int]]:
    """Where each zip member's bytes lie in the file: name -> (start, size)."""
    ranges = {}
    with zipfile.ZipFile(path) as container, open(path, "rb") as handle:
        for info in container.infolist():
            handle.seek(info.header_offset + 26)
            name_length, extra_length = struct.unpack("<HH", handle.read(4))
            ranges[info.filename] = (info.header_offset + 30 + name_length + extra_length, info.compress_size)
    return ranges


def flip(path: Path, offset: int) -> None:
    with open(path, "r+b") as handle:
        handle.seek(offset)
        byte = handle.read(1)
        handle.seek(offset)
        handle.write(bytes([byte[0] ^ 0x10]))


def test_a_flipped_byte_anywhere_in_a_checkpoint_without_sidecar_is_detected(tmp_path):
    """One flipped byte in each member (the pickle, every tensor, the version records), at a seeded offset."""
    rng = random.Random(SEED)
    good = save_checkpoint({"state": {"net": {"weight": torch.randn(64, 64), "bias": torch.zeros(64)}},
                            "epoch": 1, "global_step": 10}, tmp_path / "good.pt")
    sidecar_path(good).unlink()  # the state a kill between the two renames leaves
    load_checkpoint(good)
    ranges = {name: span for name, span in member_ranges(good).items() if span[1]}
    assert any(name.endswith("data.pkl") for name in ranges) and sum("/data/" in n for n in ranges) == 2
    for name, (start, size) in ranges.items():
        bad = tmp_path / "bad.pt"
        shutil.copy(good, bad)
        flip(bad, start + rng.randrange(size))
        with pytest.raises(CheckpointError, match=r"bad\.pt: (corrupt checkpoint: member '.*' does not match its "
                                                  r"CRC-32|truncated or not a checkpoint file)"):
            load_checkpoint(bad)


def test_resume_skips_a_corrupt_checkpoint_without_sidecar(tmp_path, capsys):
    config = {"trainer": "toy", "visualizers": [], "loop": {"max_steps": 3},
              "run": {"output_dir": str(tmp_path / "runs"), "name": "crc", "device": "cpu", "deterministic": True},
              "checkpoint": {"every_steps": 1, "keep_last": 3}, "toy": {"samples": 16, "batch_size": 4}}
    run = Run.create(config)
    run.fit()
    latest = run.dir / "checkpoints" / "epoch0000-step00000003.pt"
    sidecar_path(latest).unlink()
    start, size = next(span for name, span in member_ranges(latest).items() if "/data/" in name)
    flip(latest, start + size // 2)
    capsys.readouterr()
    resumed = Run.resume(run.dir, overrides=["loop.max_steps=4"])
    assert resumed.trainer.global_step == 2
    assert f"warning: skipping bad checkpoint: {latest}: corrupt checkpoint: member" in capsys.readouterr().err
