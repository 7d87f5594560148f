"""Every bad input stops the dataset before training with one line that names the file."""

from __future__ import annotations

import os

import pytest

from nectargan_core.errors import ConfigError, NectarGANError
from nectargan_translate.data import DatasetError, PairedDataset
from data_helpers import aligned_dataset, folders_dataset, noise, save, save_aligned

PLAIN = {"load_size": None, "crop_size": None, "augment": [], "num_workers": 0}


def error_of(options, split="train", kind=DatasetError) -> str:
    with pytest.raises(kind) as info:
        PairedDataset(options, split)
    message = str(info.value)
    assert "\n" not in message and isinstance(info.value, NectarGANError)
    return message


def test_root_not_set_or_missing(tmp_path):
    assert "data.root is not set" in error_of({})
    missing = tmp_path / "nowhere"
    assert error_of({"root": str(missing)}) == f"{missing}: dataset folder does not exist (data.root)"


def test_missing_split_folder_lists_what_exists(tmp_path):
    aligned_dataset(tmp_path, {"train": 1, "val": 1})
    message = error_of({"root": str(tmp_path), **PLAIN}, "test")
    assert message == f"{tmp_path / 'test'}: split folder does not exist (found: train, val)"


def test_empty_split(tmp_path):
    (tmp_path / "train").mkdir()
    (tmp_path / "train" / "readme.txt").write_text("no images here")
    assert error_of({"root": str(tmp_path)}).startswith(f"{tmp_path / 'train'}: no images (looked for .bmp")


def test_unreadable_image_found_from_its_header(tmp_path):
    aligned_dataset(tmp_path, {"train": 2})
    bad = tmp_path / "train" / "001.png"
    bad.write_bytes(b"this is not a png")
    assert error_of({"root": str(tmp_path)}).startswith(f"{bad}: cannot read image:")


def test_truncated_image_found_by_full_verification(tmp_path):
    aligned_dataset(tmp_path, {"train": 2}, size=64)
    bad = tmp_path / "train" / "000.png"
    bad.write_bytes(bad.read_bytes()[:-400])
    PairedDataset({"root": str(tmp_path), **PLAIN})  # the header alone is intact
    assert error_of({"root": str(tmp_path), "verify": "full", **PLAIN}).startswith(f"{bad}: cannot read image:")


def test_odd_width_of_aligned_file(tmp_path):
    bad = save(tmp_path / "train" / "odd.png", noise(8, width=17))
    assert error_of({"root": str(tmp_path), **PLAIN}).startswith(
        f"{bad}: width 17 is odd, so its A and B halves differ in size")


@pytest.mark.parametrize("kind, made, what", [
    ("folder", lambda path: path.mkdir(), "a folder; move it out of"),
    ("fifo", lambda path: os.mkfifo(path), "a FIFO; move it out of"),
    ("device", lambda path: path.symlink_to("/dev/zero"), "a device; move it out of"),
    ("dangling", lambda path: path.symlink_to(path.parent / "gone.png"), "a symbolic link to a missing file; fix"),
    ("loop", lambda path: path.symlink_to(path), "a symbolic link that loops; fix"),
])
@pytest.mark.parametrize("layout", ["aligned", "folders", "unpaired"])
def test_an_entry_named_like_an_image_that_is_no_file_is_named_not_skipped(tmp_path, kind, made, what, layout):
    """A picture the user meant to train on must not go missing without a word (it was silently skipped)."""
    if layout == "unpaired":
        from nectargan_translate.data.domains import inspect_domains

        for domain in "AB":
            save(tmp_path / f"train{domain}" / "000.png", noise(8))
        odd = tmp_path / "trainB" / "zz.png"
        made(odd)
        problems = inspect_domains(tmp_path, "train").problems
    else:
        (aligned_dataset if layout == "aligned" else folders_dataset)(tmp_path, {"train": 2})
        odd = tmp_path / "train" / ("B" if layout == "folders" else "") / "zz.png"
        made(odd)
        problems = [error_of({"root": str(tmp_path), **PLAIN})]
    assert problems[0].startswith(f"{odd}: not an image file but {what}"), problems


def test_unmatched_names_list_up_to_five(tmp_path):
    folders_dataset(tmp_path, {"train": 2})
    for i in range(7):
        save(tmp_path / "train" / "A" / f"extra{i}.png", noise(32))
    save(tmp_path / "train" / "B" / "lonely.png", noise(32))
    message = error_of({"root": str(tmp_path), **PLAIN})
    assert message.startswith(f"{tmp_path / 'train' / 'A'}: 7 file(s) have no match of the same name in "
                              f"{tmp_path / 'train' / 'B'}: extra0.png, extra1.png, extra2.png, extra3.png, "
                              "extra4.png (+2 more)")
    assert message.endswith("(+1 more problem(s); list them with: nectargan data check " f"{tmp_path})")


def test_duplicate_names_in_a_folder(tmp_path):
    folders_dataset(tmp_path, {"train": 2})
    save(tmp_path / "train" / "A" / "001.jpg", noise(32))
    assert error_of({"root": str(tmp_path), **PLAIN}).startswith(
        f"{tmp_path / 'train' / 'A' / '001.png'}: same name as 001.jpg")


def test_mismatched_sizes_in_folders_layout(tmp_path):
    folders_dataset(tmp_path, {"train": 2})
    save(tmp_path / "train" / "B" / "001.jpg", noise(24))
    assert error_of({"root": str(tmp_path), **PLAIN}).startswith(
        f"{tmp_path / 'train' / 'B' / '001.jpg'}: size 24x24 differs from {tmp_path / 'train' / 'A' / '001.png'} "
        "(32x32)")


def test_folders_layout_without_b(tmp_path):
    save(tmp_path / "train" / "A" / "x.png", noise(8))
    message = error_of({"root": str(tmp_path), "layout": "folders", **PLAIN})
    assert message.startswith(f"{tmp_path / 'train' / 'B'}: folder does not exist")


def test_crop_larger_than_load_size_is_a_config_error(tmp_path):
    message = error_of({"root": str(tmp_path), "load_size": 128, "crop_size": 256}, kind=ConfigError)
    assert message == "data.crop_size: 256 is larger than load_size 128; lower crop_size or raise load_size"


def test_crop_larger_than_an_image_that_is_not_resized(tmp_path):
    save_aligned(tmp_path / "train" / "small.png", noise(20), noise(20))
    message = error_of({"root": str(tmp_path), "load_size": None, "crop_size": 32})
    assert message.startswith(f"{tmp_path / 'train' / 'small.png'}: each half is 20x20, smaller than crop_size 32")
    PairedDataset({"root": str(tmp_path), "load_size": 40, "crop_size": 32})  # resized first: fine


def test_bad_option_values_are_one_line_config_errors(tmp_path):
    message = error_of({"root": str(tmp_path), "in_channels": 2, "augment": ["spin"]}, kind=ConfigError)
    assert message.startswith("data.in_channels: ") and "; data.augment.0: " in message
