"""``nectargan data``: synth, pair, split and check, in-process and through the real console script."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from nectargan_translate.data import DatasetError, PairedDataset
from nectargan_translate.data_cli import data_group
from data_helpers import aligned_dataset, folders_dataset, noise, run_data_cli as run, save
from support import cli_runner


def invoke(*args):
    return cli_runner().invoke(data_group, [str(a) for a in args])


def tree(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


def test_synth_then_check_through_the_console_script(tmp_path):
    out = tmp_path / "shapes"
    made = run("synth", out, "--count", 10, "--size", 32, "--seed", 5)
    assert made.returncode == 0, made.stderr
    assert made.stdout.strip() == f"wrote 10 aligned 32x32 pairs to {out} (train 8, val 1, test 1)"
    checked = run("check", out)
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout.strip() == f"ok: {out}: aligned layout, train 8, val 1, test 1 pairs; every image decoded"


def test_check_reports_every_problem_and_exits_1(tmp_path):
    root = aligned_dataset(tmp_path / "ds", {"train": 3, "val": 2}, size=32)
    truncated = root / "train" / "000.png"
    truncated.write_bytes(truncated.read_bytes()[:-300])
    odd = save(root / "train" / "odd.png", noise(8, width=9))
    (root / "val" / "001.png").write_bytes(b"junk")
    result = run("check", root)
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert len(lines) == 3
    assert lines[0].startswith(f"{truncated}: cannot read image:")
    assert lines[1].startswith(f"{odd}: width 9 is odd")
    assert lines[2].startswith(f"{root / 'val' / '001.png'}: cannot read image:")
    assert result.stderr.strip() == f"error: {root}: 3 problem(s) found"
    quick = invoke("check", root, "--quick")
    assert isinstance(quick.exception, DatasetError)
    assert len(quick.output.splitlines()) == 2  # headers alone do not reveal the truncation


def test_check_a_single_folders_split(tmp_path):
    root = folders_dataset(tmp_path, {"train": 2})
    result = invoke("check", root / "train", "--layout", "folders")
    assert result.exit_code == 0, result.output
    assert result.output.strip() == f"ok: {root / 'train'}: folders layout, train 2 pairs; every image decoded"
    assert isinstance(invoke("check", tmp_path / "missing").exception, DatasetError)


def test_pair_joins_matched_folders_split_by_split(tmp_path):
    for split, n in [("train", 3), ("test", 1)]:
        for i in range(n):
            save(tmp_path / "A" / split / f"{i}.png", noise(16, seed=i))
            save(tmp_path / "B" / split / f"{i}.jpg", noise(16, seed=i + 50))
    result = invoke("pair", tmp_path / "A", tmp_path / "B", tmp_path / "out")
    assert result.exit_code == 0, result.output
    assert result.output.strip() == f"wrote 4 aligned pairs to {tmp_path / 'out'} (train 3, test 1)"
    assert tree(tmp_path / "out") == ["test/0.png", "train/0.png", "train/1.png", "train/2.png"]
    joined = np.asarray(Image.open(tmp_path / "out" / "train" / "1.png"))
    assert joined.shape == (16, 32, 3)
    assert np.array_equal(joined[:, :16], noise(16, seed=1))
    assert np.array_equal(joined[:, 16:], np.asarray(Image.open(tmp_path / "B" / "train" / "1.jpg")))


def test_pair_resizes_and_mixes_modes(tmp_path):
    save(tmp_path / "A" / "x.png", noise(20, channels=1))
    save(tmp_path / "B" / "x.png", noise(12, channels=4))
    result = invoke("pair", tmp_path / "A", tmp_path / "B", tmp_path / "out")
    assert isinstance(result.exception, DatasetError)
    assert str(result.exception).startswith(f"{tmp_path / 'B' / 'x.png'}: size 12x12 differs from")
    assert not (tmp_path / "out").exists()
    assert invoke("pair", tmp_path / "A", tmp_path / "B", tmp_path / "out", "--size", 16).exit_code == 0
    with Image.open(tmp_path / "out" / "x.png") as image:
        assert image.size == (32, 16) and image.mode == "RGBA"


def test_pair_refuses_unmatched_names(tmp_path):
    save(tmp_path / "A" / "x.png", noise(8))
    save(tmp_path / "B" / "y.png", noise(8))
    result = invoke("pair", tmp_path / "A", tmp_path / "B", tmp_path / "out")
    assert str(result.exception) == (f"{tmp_path / 'A'}: 1 file(s) have no match of the same name in "
                                     f"{tmp_path / 'B'}: x.png (+1 more problem(s))")


def test_split_is_deterministic_and_complete(tmp_path):
    for name in ("one", "two", "three"):
        for i in range(20):
            save(tmp_path / name / f"{i:02d}.png", noise(4, seed=i))
    assert invoke("split", tmp_path / "one", "--val", 0.2, "--test", 0.1, "--seed", 3).exit_code == 0
    result = invoke("split", tmp_path / "two", "--val", 0.2, "--test", 0.1, "--seed", 3, "--copy")
    assert result.output.strip() == f"split 20 images of {tmp_path / 'two'}: train 14, val 4, test 2 (copied)"
    invoke("split", tmp_path / "three", "--val", 0.2, "--test", 0.1, "--seed", 4)
    one, two, three = tree(tmp_path / "one"), tree(tmp_path / "two"), tree(tmp_path / "three")
    assert len(one) == 20 and [p for p in two if "/" in p] == one  # copies leave the originals
    assert one != three
    assert sorted(p.split("/")[1] for p in one) == [f"{i:02d}.png" for i in range(20)]
    again = invoke("split", tmp_path / "one")
    assert "already has train/, val/, test/" in str(again.exception)


def test_split_keeps_a_and_b_of_a_pair_together(tmp_path):
    folders_dataset(tmp_path, {"flat": 10}, size=8)
    root = tmp_path / "flat"
    assert invoke("split", root, "--val", 0.2, "--test", 0.2).exit_code == 0
    assert not (root / "A").exists()
    for split in ("train", "val", "test"):
        a = sorted(p.stem for p in (root / split / "A").iterdir())
        assert a == sorted(p.stem for p in (root / split / "B").iterdir()) and a
    assert len(PairedDataset({"root": str(root), "load_size": None, "crop_size": None}, "val")) == 2


@pytest.mark.parametrize("args,message", [
    (["synth", "OUT", "--val", "1.5"], "Invalid value for '--val'"),
    (["download", "facades", "--sha256", "abc"], "Invalid value for --sha256: must be 64 hexadecimal digits"),
])
def test_bad_arguments_are_usage_errors(tmp_path, args, message):
    result = invoke(*[str(tmp_path / a) if a == "OUT" else a for a in args])
    assert result.exit_code == 2 and message in result.output


def test_pair_names_an_unreadable_image(tmp_path):
    save(tmp_path / "A" / "x.png", noise(8))
    (tmp_path / "B").mkdir()
    (tmp_path / "B" / "x.png").write_bytes(b"junk")
    result = invoke("pair", tmp_path / "A", tmp_path / "B", tmp_path / "out")
    assert str(result.exception).startswith(f"{tmp_path / 'B' / 'x.png'}: cannot read image:")
    assert not (tmp_path / "out").exists()
