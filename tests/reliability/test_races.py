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
REFUSED = "folder is not empty; choose a new output folder"  # the loser started after the winner had finished


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
                assert line in (f"error: {target}: {LOST}", f"error: {target}: {REFUSED}"), line
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
