"""Races on one target (issue 25, class 6): commands that write a complete-or-absent folder, started twice into one
new folder at once. The winner's folder is whole; the loser says so in one line (exit 1) and leaves nothing of its
own: no traceback from the final rename, no temp folder, the winner's files untouched."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from nectargan_core import commit_folder
from nectargan_core.errors import FolderTakenError

LOST = "another process wrote it while this one worked; nothing of this run was kept there: use that one, or " \
       "choose a new folder"
REFUSED = "folder is not empty; choose a new"  # the loser started after the winner had finished (then what it makes)


def test_a_commit_into_a_folder_another_process_filled_is_one_error(tmp_path):
    for taken in ("folder", "file"):
        built, target = tmp_path / f"built-{taken}", tmp_path / f"target-{taken}"
        built.mkdir()
        (built / "mine.png").write_bytes(b"mine")
        if taken == "folder":
            target.mkdir()
            (target / "theirs.png").write_bytes(b"theirs")
        else:
            target.write_bytes(b"theirs")
        with pytest.raises(FolderTakenError) as lost:
            commit_folder(built, target)
        assert str(lost.value) == f"{target}: {LOST}"
        assert (built / "mine.png").read_bytes() == b"mine"  # the caller's staging removes it
        assert (target / "theirs.png" if taken == "folder" else target).read_bytes() == b"theirs"


def test_a_symbolic_link_at_the_target_is_named_not_taken_for_a_race(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "link").symlink_to("empty")
    built = tmp_path / "built"
    built.mkdir()
    with pytest.raises(FolderTakenError) as refused:
        commit_folder(built, tmp_path / "link")
    assert str(refused.value) == (f"{tmp_path / 'link'}: is a symbolic link; the output appears by a rename, so give "
                                  "the folder it points to, or a new name")
    assert (tmp_path / "link").is_symlink() and not any((tmp_path / "empty").iterdir())


def nectargan(*args: str) -> subprocess.Popen:
    exe = Path(sys.executable).with_name("nectargan")
    env = {k: v for k, v in os.environ.items() if not k.startswith("NECTARGAN_")}
    return subprocess.Popen([str(exe), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def race(command: list[str], target: Path, rounds: int) -> list[str]:
    """``command`` twice at once into ``target`` (removed between rounds); the losers' stderr lines."""
    import shutil

    losers = []
    for _ in range(rounds):
        shutil.rmtree(target, ignore_errors=True)
        first, second = nectargan(*command), nectargan(*command)
        results = [(p.wait(timeout=240), *p.communicate()) for p in (first, second)]
        codes = sorted(code for code, _, _ in results)
        assert codes in ([0, 0], [0, 1]), results  # two 0s: the second found the first's folder empty? never both
        for code, _, err in results:
            assert "Traceback" not in err, err
            if code:
                (line,) = err.strip().splitlines()
                assert line == f"error: {target}: {LOST}" or line.startswith(f"error: {target}: {REFUSED}"), line
                losers.append(line)
        assert not [p for p in target.parent.iterdir() if ".tmp-" in p.name]  # no staging folder left
    return losers


def test_two_data_synth_into_one_new_folder(tmp_path):
    target = tmp_path / "shapes"
    losers = race(["data", "synth", str(target), "--count", "60", "--size", "32"], target, rounds=3)
    assert len(losers) == 3
    assert len(list(target.rglob("*.png"))) == 60 and (target / "synth.json").is_file()


def test_two_data_pair_into_one_new_folder(tmp_path):
    rng = np.random.default_rng(0)
    for side in ("A", "B"):
        (tmp_path / side / "train").mkdir(parents=True)
        for i in range(40):
            Image.fromarray(rng.integers(0, 256, (48, 48, 3), dtype=np.uint8)).save(tmp_path / side / "train" / f"{i}.png")
    target = tmp_path / "paired"
    losers = race(["data", "pair", str(tmp_path / "A"), str(tmp_path / "B"), str(target)], target, rounds=2)
    assert len(losers) == 2 and len(list((target / "train").glob("*.png"))) == 40


def test_a_killed_run_s_staging_folder_goes_even_when_the_rerun_is_refused(tmp_path):
    """A racer killed while the other won left ``.shapes.tmp-PID``; the re-run, refused because ``shapes`` is not
    empty, left it there for good (only a later command into another folder of that parent removed it)."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # a pid whose process is gone
    stale = tmp_path / f".shapes.tmp-{dead.pid}"
    (stale / "train").mkdir(parents=True)
    (stale / "train" / "00000.png").write_bytes(b"half")
    (tmp_path / "shapes").mkdir()
    (tmp_path / "shapes" / "keep.txt").write_text("theirs")
    refused = nectargan("data", "synth", str(tmp_path / "shapes"), "--count", "4", "--size", "16")
    _, err = refused.communicate(timeout=120)
    assert refused.returncode == 1 and err.strip() == (f"error: {tmp_path / 'shapes'}: folder is not empty; choose "
                                                       "a new folder for the synthetic dataset"), err
    assert not stale.exists() and (tmp_path / "shapes" / "keep.txt").read_text() == "theirs"


def test_three_data_split_of_one_folder_make_one_split(tmp_path):
    """Three splits of one folder at once: the one that finished second said the split marker or a file was
    "removed or moved while the command ran; run it again" (and running it again said it was split already).
    All follow the one recorded plan, so the others find their work done, or say the first finished (a loser
    that found the plan gone told the user to undo the split)."""
    rng = np.random.default_rng(1)
    folder = tmp_path / "photos"
    for round_ in range(6):
        import shutil

        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir()
        for i in range(60):
            Image.fromarray(rng.integers(0, 256, (24, 48, 3), dtype=np.uint8)).save(folder / f"{i:03d}.png")
        racers = [nectargan("data", "split", str(folder), "--val", "0.2", "--test", "0.2") for _ in range(3)]
        results = [(p.wait(timeout=120), p.communicate()[1]) for p in racers]
        for code, err in results:
            assert "Traceback" not in err and "run it again" not in err, results
            assert code == 0 or err.strip().endswith(("it looks split already", "of it finished first; it is split")), \
                results
        names = sorted(p.name for p in folder.rglob("*.png"))
        assert names == [f"{i:03d}.png" for i in range(60)], round_  # each image once, in one split
        assert not (folder / ".nectargan-split.json").exists() and not list(folder.glob("*.png"))
