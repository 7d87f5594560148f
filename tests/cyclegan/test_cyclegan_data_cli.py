"""``nectargan data synth --unpaired``, ``check`` and ``split`` on the unpaired layout (trainA/ trainB/ ...)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from nectargan_translate.data import DatasetError
from nectargan_translate.data import prepare
from nectargan_translate.data.check import SPLIT_MARKER
from nectargan_translate.data_cli import data_group
from support import cli_runner, run_cli

DOMAIN_FOLDERS = ["testA", "testB", "trainA", "trainB", "valA", "valB"]


def invoke(*args):
    return cli_runner().invoke(data_group, [str(a) for a in args])


def tree(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


def noise(size: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (size, size, 3), dtype=np.uint8)


def piles(root: Path, a: int, b: int) -> Path:
    """Two unpaired piles of noise images: root/A (``a`` images) and root/B (``b``), unrelated names."""
    for i in range(a):
        (root / "A").mkdir(parents=True, exist_ok=True)
        Image.fromarray(noise(8, i)).save(root / "A" / f"a{i:02d}.png")
    for i in range(b):
        (root / "B").mkdir(parents=True, exist_ok=True)
        Image.fromarray(noise(8, 100 + i)).save(root / "B" / f"photo_{i:02d}.jpg", quality=95)
    return root


def test_synth_unpaired_writes_two_styles_of_different_scenes_then_check_reads_them(tmp_path):
    out = tmp_path / "shapes"
    made = run_cli("data", "synth", str(out), "--unpaired", "--count", "10", "--size", "32", "--seed", "4")
    assert made.returncode == 0, made.stderr
    assert made.stdout.strip() == (f"wrote 2 x 10 unpaired 32x32 images to {out} "
                                   "(train 8, val 1, test 1 per domain)")
    assert sorted(p.name for p in out.iterdir()) == ["synth.json", *DOMAIN_FOLDERS]
    a_names = sorted(p.name for p in (out / "trainA").iterdir())
    b_names = sorted(p.name for p in (out / "trainB").iterdir())
    assert len(a_names) == len(b_names) == 8
    assert not set(a_names) & set(b_names)  # different scenes: nothing pairs them
    # A: flat label colours (at most 4 per image); B: shaded, textured renderings (hundreds of colours)
    for a, b in zip(a_names, b_names):
        a_pixels = np.asarray(Image.open(out / "trainA" / a)).reshape(-1, 3)
        b_pixels = np.asarray(Image.open(out / "trainB" / b)).reshape(-1, 3)
        assert len(np.unique(a_pixels, axis=0)) <= 4
        assert len(np.unique(b_pixels, axis=0)) > 100
    checked = run_cli("data", "check", str(out))
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout.strip() == (f"ok: {out}: unpaired layout, trainA 8, trainB 8, valA 1, valB 1, testA 1, "
                                      "testB 1 images; every image decoded")


def test_synth_unpaired_is_deterministic_and_leaves_out_empty_splits(tmp_path):
    for name in ("one", "two"):
        assert invoke("synth", tmp_path / name, "--unpaired", "--count", 6, "--size", 16, "--val", 0).exit_code == 0
    assert tree(tmp_path / "one") == tree(tmp_path / "two")
    assert "valA/" not in " ".join(tree(tmp_path / "one"))
    for name in tree(tmp_path / "one"):
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes(), name
    other = invoke("synth", tmp_path / "three", "--unpaired", "--count", 6, "--size", 16, "--val", 0, "--seed", 1)
    assert other.exit_code == 0
    assert (tmp_path / "three/trainB/00001.png").read_bytes() != (tmp_path / "one/trainB/00001.png").read_bytes()
    again = invoke("synth", tmp_path / "one", "--unpaired")
    assert isinstance(again.exception, DatasetError) and "folder is not empty" in str(again.exception)


def test_check_names_every_problem_of_the_unpaired_layout(tmp_path, make_unpaired):
    root = tmp_path / "data"
    shutil.copytree(make_unpaired(8, 16), root)
    shutil.rmtree(root / "testB")
    broken = sorted((root / "valA").iterdir())[0]
    broken.write_bytes(b"not an image")
    result = run_cli("data", "check", str(root))
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert len(lines) == 2, result.stdout
    assert lines[0].startswith(f"{broken}: cannot read image:")
    assert lines[1] == (f"{root / 'testB'}: folder does not exist; the unpaired layout needs testA/ and testB/ "
                        "side by side (found testA/)")
    assert result.stderr.strip() == f"error: {root}: 2 problem(s) found"
    # a domain folder checks its split; --layout aligned reads the root as pairs and finds none
    domain = invoke("check", root / "trainB")
    assert domain.exit_code == 0, domain.output
    assert domain.output.strip() == f"ok: {root}: unpaired layout, trainA 4, trainB 4 images; every image decoded"
    assert invoke("check", root, "--layout", "aligned").exit_code == 1


def test_split_unpaired_deals_each_pile_into_the_domain_folders(tmp_path):
    copy_root = piles(tmp_path / "copied", 10, 6)
    moved_root = piles(tmp_path / "moved", 10, 6)
    copied = invoke("split", copy_root, "--unpaired", "--val", 0.2, "--test", 0.2, "--seed", 3, "--copy")
    assert copied.exit_code == 0, copied.output
    assert copied.output.strip() == (f"split {copy_root} (unpaired): trainA 6, trainB 4, valA 2, valB 1, testA 2, "
                                     "testB 1 images (copied)")
    moved = run_cli("data", "split", str(moved_root), "--unpaired", "--val", "0.2", "--test", "0.2", "--seed", "3")
    assert moved.returncode == 0, moved.stderr
    assert sorted(p.name for p in moved_root.iterdir()) == DOMAIN_FOLDERS  # the piles are gone
    # the same names and seed give the same assignment, copied or moved; every image lands once
    dealt = tree(moved_root)
    assert dealt == [name for name in tree(copy_root) if not name.startswith(("A/", "B/"))]
    for domain in "AB":
        assert sorted(Path(name).name for name in dealt if Path(name).parent.name.endswith(domain)) == \
            sorted(p.name for p in (copy_root / domain).iterdir())
    assert invoke("check", moved_root).exit_code == 0
    other_seed = piles(tmp_path / "seed4", 10, 6)
    assert invoke("split", other_seed, "--unpaired", "--val", 0.2, "--test", 0.2, "--seed", 4).exit_code == 0
    assert tree(other_seed) != dealt


def test_split_takes_val_from_the_reference_layout_and_keeps_what_exists(tmp_path, make_unpaired):
    root = tmp_path / "h2z"
    shutil.copytree(make_unpaired(12, 16, val=0.0, test=0.25), root)  # trainA/ trainB/ testA/ testB/, no val
    refused = invoke("split", root)  # --test 0.1 would need new testA/ testB/
    assert isinstance(refused.exception, DatasetError)
    assert str(refused.exception) == f"{root}: already has testA/, testB/; pass --test 0 to keep it as it is"
    assert tree(root) == tree(make_unpaired(12, 16, val=0.0, test=0.25)) and not (root / SPLIT_MARKER).exists()
    done = invoke("split", root, "--val", 0.25, "--test", 0)
    assert done.exit_code == 0, done.output
    assert done.output.strip() == (f"split {root} (unpaired): trainA 7, trainB 7, valA 2, valB 2, testA 3, testB 3 "
                                   "images (moved)")
    assert invoke("check", root).exit_code == 0


def test_an_interrupted_unpaired_split_is_refused_then_finished_by_running_it_again(tmp_path, monkeypatch):
    root = piles(tmp_path / "piles", 8, 8)
    reference = piles(tmp_path / "reference", 8, 8)
    assert invoke("split", reference, "--unpaired", "--val", 0.25, "--test", 0).exit_code == 0
    real_transfer, moved = prepare._transfer, []

    def dies_after_five(source, target, copy):
        if len(moved) == 5:
            raise KeyboardInterrupt
        moved.append(source)
        real_transfer(source, target, copy)

    monkeypatch.setattr(prepare, "_transfer", dies_after_five)
    with pytest.raises(KeyboardInterrupt):
        prepare.split_unpaired(root, val=0.25, test=0, seed=0)
    monkeypatch.setattr(prepare, "_transfer", real_transfer)
    assert (root / SPLIT_MARKER).is_file()
    refused = invoke("check", root)
    assert refused.exit_code == 1 and "a 'nectargan data split' of this folder was interrupted" in refused.output
    other = invoke("split", root, "--unpaired", "--val", 0.5)
    assert isinstance(other.exception, DatasetError)
    assert "an interrupted split (--val 0.25 --test 0 --seed 0 --unpaired) is unfinished" in str(other.exception)
    finished = invoke("split", root, "--unpaired", "--val", 0.25, "--test", 0)
    assert finished.exit_code == 0, finished.output
    assert tree(root) == tree(reference)
    assert invoke("check", root).exit_code == 0


def test_split_without_either_starting_point_is_one_line(tmp_path):
    (tmp_path / "A").mkdir()
    result = run_cli("data", "split", str(tmp_path), "--unpaired")
    assert result.returncode != 0
    assert result.stderr.strip() == (f"error: {tmp_path}: an unpaired split starts from A/ and B/ (two piles of "
                                     "images) or from trainA/ and trainB/ (to take val and test images from); "
                                     "found neither")
