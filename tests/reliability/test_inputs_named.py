"""Inputs left out without a word (issue 25, class 8): an entry named like an image that is a FIFO, a device, a
folder, or a link that loops or leads nowhere is named by ``predict`` in one line, in a folder it lists and when
given directly (it said "not found" of an entry that exists), before any image is translated."""

from __future__ import annotations

import os

import numpy as np
import pytest
from PIL import Image

from kill_points import tiny_pix2pix_run
from support import run_cli

ODD = {
    "fifo": (lambda path: os.mkfifo(path), "not an image file but a FIFO"),
    "device": (lambda path: path.symlink_to("/dev/null"), "not an image file but a device"),
    "loop": (lambda path: path.symlink_to(path.name), "not an image file but a symbolic link that loops"),
    "dangling": (lambda path: path.symlink_to("gone.png"), "not an image file but a symbolic link to a missing file"),
    "folder": (lambda path: path.mkdir(), "not an image file but a folder"),
}


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    return tiny_pix2pix_run(tmp_path_factory)


@pytest.mark.parametrize("kind", sorted(ODD))
def test_predict_names_an_odd_entry_in_a_folder_and_given_directly(run_dir, tmp_path, kind):
    photos = tmp_path / "photos"
    photos.mkdir()
    Image.fromarray(np.zeros((32, 32, 3), np.uint8)).save(photos / "a.png")
    make, what = ODD[kind]
    odd = photos / "b.png"
    make(odd)
    listed = run_cli("predict", str(run_dir), str(photos), "-o", str(tmp_path / "out"), timeout=120)
    assert listed.returncode == 1
    assert listed.stderr == f"error: {odd}: {what}; " + (
        "fix the link or remove it" if kind in ("loop", "dangling") else f"move it out of {photos} or rename it") + "\n"
    assert not (tmp_path / "out").exists()  # nothing translated before the check
    if kind == "folder":
        return  # a folder given directly is listed as a folder
    given = run_cli("predict", str(run_dir), str(odd), "-o", str(tmp_path / "out"), timeout=120)
    assert given.returncode == 1
    assert given.stderr == f"error: {odd}: {what}; " + (
        "fix the link or remove it" if kind in ("loop", "dangling") else "give an image file") + "\n"
    assert "not found" not in given.stderr


def test_a_folder_with_several_odd_entries_says_how_many_more(run_dir, tmp_path):
    photos = tmp_path / "photos"
    photos.mkdir()
    for name in ("x.png", "y.jpg", "z.png"):
        os.mkfifo(photos / name)
    done = run_cli("predict", str(run_dir), str(photos), "-o", str(tmp_path / "out"), timeout=120)
    assert done.returncode == 1
    assert done.stderr == (f"error: {photos / 'x.png'}: not an image file but a FIFO; move it out of {photos} or "
                           "rename it (and 2 more such entries)\n")


def test_a_name_with_a_newline_stays_on_one_line(run_dir, tmp_path):
    photos = tmp_path / "photos"
    photos.mkdir()
    os.mkfifo(photos / "q\nz.png")
    done = run_cli("predict", str(run_dir), str(photos), "-o", str(tmp_path / "out"), timeout=120)
    assert done.returncode == 1
    assert done.stderr == (f"error: {photos}/q\\nz.png: not an image file but a FIFO; move it out of {photos} or "
                           "rename it\n")


@pytest.mark.parametrize("marker", ["fifo", "device"])
def test_data_check_takes_a_split_marker_of_any_kind_for_an_unfinished_split(tmp_path, marker):
    made = run_cli("data", "synth", str(tmp_path / "sp"), "--count", "8", "--size", "16")
    assert made.returncode == 0, made.stderr
    ODD[marker][0](tmp_path / "sp" / ".nectargan-split.json")
    done = run_cli("data", "check", str(tmp_path / "sp"))
    assert done.returncode == 1 and "a 'nectargan data split' of this folder was interrupted" in done.stdout
