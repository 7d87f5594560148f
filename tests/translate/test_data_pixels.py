"""Reading pixels (data/pixels.py): EXIF orientation, 16-bit colour at full depth, PNG checksums."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageOps

from nectargan_translate.data import PairedDataset
from nectargan_translate.data.check import inspect_split
from nectargan_translate.data.pixels import UnreadableImage, oriented_size, read_pixels
from nectargan_translate.data.prepare import pair_folders
from nectargan_translate.data_cli import data_group
from support import cli_runner

ORIENTATION = 0x0112


def picture(height: int = 6, width: int = 10) -> np.ndarray:
    """No two pixels alike, so any wrong turn or mirror shows."""
    values = np.arange(height * width * 3, dtype=np.uint8).reshape(height, width, 3)
    return values * 3 % 251


def save_with_orientation(path: Path, pixels: np.ndarray, orientation: int) -> Path:
    exif = Image.Exif()
    exif[ORIENTATION] = orientation
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(pixels).save(path, exif=exif.tobytes())
    return path


def stored_sideways(upright: np.ndarray) -> np.ndarray:
    """What a phone stores for an upright picture when it tags orientation 6 (turn 90 degrees clockwise to view)."""
    return np.ascontiguousarray(np.rot90(upright, 1))


@pytest.mark.parametrize("orientation", range(1, 9))
def test_every_exif_orientation_is_applied_as_pillow_does(tmp_path: Path, orientation: int) -> None:
    path = save_with_orientation(tmp_path / "x.png", picture(), orientation)
    with Image.open(path) as image:
        expected = np.asarray(ImageOps.exif_transpose(image))
    assert np.array_equal(read_pixels(path), expected)
    width, height, found = oriented_size(path)
    assert (width, height, found) == (expected.shape[1], expected.shape[0], orientation)


def test_a_sideways_photo_pairs_with_its_upright_partner(tmp_path: Path) -> None:
    upright = picture(8, 16)
    for split in ("train", "val"):
        save_with_orientation(tmp_path / split / "A" / "p.png", stored_sideways(upright), 6)  # stored 8 wide, 16 high
        (tmp_path / split / "B").mkdir()
        Image.fromarray(upright).save(tmp_path / split / "B" / "p.png")  # 16 wide, 8 high
    report = inspect_split(tmp_path / "train", verify="full")
    assert report.problems == []  # no "size differs": the sizes compared are the upright ones
    assert report.oriented == [(tmp_path / "train" / "A" / "p.png", 6)]
    dataset = PairedDataset({"root": str(tmp_path), "load_size": 8, "crop_size": 8}, "val")
    a, b = dataset.load(dataset.pairs[0])
    assert a.shape == b.shape == (3, 8, 16)
    assert np.array_equal(a.numpy(), b.numpy())  # A reads as the same upright picture as B

    checked = cli_runner().invoke(data_group, ["check", str(tmp_path)])
    assert checked.exit_code == 0, checked.output
    assert (f"note: 2 image(s) are stored turned, with an EXIF orientation; they are read upright, as image viewers "
            f"show them (e.g. {tmp_path / 'train' / 'A' / 'p.png'}: rotated 90 degrees clockwise)") in checked.stderr


def test_data_pair_writes_the_upright_picture(tmp_path: Path) -> None:
    upright = picture(8, 16)
    save_with_orientation(tmp_path / "A" / "p.png", stored_sideways(upright), 6)
    (tmp_path / "B").mkdir()
    Image.fromarray(upright).save(tmp_path / "B" / "p.png")
    pair_folders(tmp_path / "A", tmp_path / "B", tmp_path / "out")
    joined = np.asarray(Image.open(tmp_path / "out" / "p.png"))
    assert np.array_equal(joined[:, :16], upright) and np.array_equal(joined[:, 16:], upright)


def png16(pixels: np.ndarray, colour_type: int) -> bytes:
    """A 16-bit PNG (Pillow cannot write colour ones) with Paeth-labelled rows, so unfiltering is exercised."""
    height, width, channels = pixels.shape
    stride = width * channels * 2
    raw = pixels.astype(">u2").tobytes()
    rows, previous = [], bytes(stride)
    for y in range(height):
        line = raw[y * stride:(y + 1) * stride]
        bpp = channels * 2
        out = bytearray(stride)
        for i in range(stride):
            left = line[i - bpp] if i >= bpp else 0
            up, corner = previous[i], previous[i - bpp] if i >= bpp else 0
            p = left + up - corner
            pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
            out[i] = (line[i] - (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) % 256
        rows.append(b"\x04" + bytes(out))
        previous = line

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 16, colour_type, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"".join(rows)))
            + chunk(b"IEND", b""))


@pytest.mark.parametrize("colour_type, channels", [(2, 3), (6, 4), (4, 2)], ids=["RGB", "RGBA", "grey+alpha"])
def test_16_bit_colour_pngs_keep_every_bit(tmp_path: Path, colour_type: int, channels: int) -> None:
    pixels = np.random.default_rng(colour_type).integers(0, 65536, (5, 7, channels)).astype(np.uint16)
    path = tmp_path / "deep.png"
    path.write_bytes(png16(pixels, colour_type))
    decoded = read_pixels(path)
    assert decoded.dtype == np.uint16 and np.array_equal(decoded, pixels)


def test_png_damage_is_refused_with_the_chunk_and_offset(tmp_path: Path) -> None:
    path = tmp_path / "x.png"
    Image.fromarray(picture()).save(path)
    good = path.read_bytes()
    damaged = bytearray(good)
    damaged[45] ^= 0x01  # inside the IDAT chunk that starts at byte 33
    path.write_bytes(bytes(damaged))
    with pytest.raises(UnreadableImage) as caught:
        read_pixels(path)
    assert str(caught.value) == (f"{path}: cannot read image: damaged PNG (the IDAT chunk at byte 33 fails its "
                                 "checksum); the file is corrupt: copy or export it again")
    path.write_bytes(good[:-20])
    with pytest.raises(UnreadableImage, match="truncated PNG"):
        read_pixels(path)
    path.write_bytes(good)
    assert np.array_equal(read_pixels(path), picture())


def test_a_truncated_jpeg_says_what_to_do(tmp_path: Path) -> None:
    path = tmp_path / "cut.jpg"
    rng = np.random.default_rng(0)
    Image.fromarray(rng.integers(0, 256, (64, 64, 3), dtype=np.uint8)).save(path, quality=95)
    path.write_bytes(path.read_bytes()[:1500])
    with pytest.raises(UnreadableImage) as caught:
        read_pixels(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: cannot read image: image file is truncated")
    assert message.endswith("the file is incomplete: copy or export it again") and "\n" not in message


def test_an_unreadable_image_is_named_with_what_to_do_wherever_it_was_given(tmp_path, monkeypatch):
    """An image this user may not read: inside a folder it was "[Errno 13] Permission denied: '<path>'", given
    directly click refused it as a usage error (exit 2). One rule now: the command names it, saying what to do."""
    from pathlib import Path

    from nectargan_translate.commands.options import GivenPath
    from nectargan_translate.data.pixels import UnreadableImage, read_pixels

    assert GivenPath(exists=True).readable is False  # click does not judge it first
    image = tmp_path / "locked.png"
    image.write_bytes(b"\x89PNG")

    def denied(self):
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "read_bytes", denied)
    with pytest.raises(UnreadableImage) as refused:
        read_pixels(image)
    assert str(refused.value) == (f"{image}: cannot read image: permission denied; let this user read it "
                                  "(chmod a+r), or run as a user who may")


def test_a_sub_folder_that_cannot_be_listed_is_named_by_a_recursive_predict(tmp_path, monkeypatch):
    """``predict -r`` left out a sub-folder this user may not list, without a word (rglob skips it)."""
    import os

    from nectargan_translate.data.errors import DatasetError
    from nectargan_translate.files import find_inputs

    (tmp_path / "in" / "inner").mkdir(parents=True)
    (tmp_path / "in" / "a.png").write_bytes(b"x")
    (tmp_path / "in" / "inner" / "b.png").write_bytes(b"x")
    real = os.scandir

    def scandir(path="."):
        if str(path).endswith("inner"):
            raise PermissionError(13, "Permission denied", str(path))
        return real(path)

    monkeypatch.setattr(os, "scandir", scandir)
    with pytest.raises(DatasetError) as refused:
        find_inputs([tmp_path / "in"], recursive=True)
    assert str(refused.value) == (f"{tmp_path / 'in' / 'inner'}: cannot be listed (Permission denied); let this user "
                                  "read it (chmod a+rx), or leave it out of the inputs")
