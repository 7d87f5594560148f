"""From photographs to a dataset: ``data tile``, ``data derive`` and ``data split --group`` (issue 24)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from nectargan_translate.data.derive import Derivation, canny, derive_pairs
from nectargan_translate.data.errors import DatasetError
from nectargan_translate.data.prepare import split_folder, split_unpaired
from nectargan_translate.data.tiles import grid_offsets, source_of, tile_photos
from support import run_cli


def photo(path: Path, width: int, height: int, seed: int = 0, flat_left: int = 0) -> np.ndarray:
    """A detailed RGB photograph (noise over gradients) saved losslessly; its left ``flat_left`` columns flat."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width]
    pixels = np.stack([x * 255 // max(width - 1, 1), y * 255 // max(height - 1, 1), (x + y) % 256], -1)
    pixels = np.clip(pixels + rng.integers(-30, 30, pixels.shape), 0, 255).astype(np.uint8)
    pixels[height // 4:height // 2, width // 4:width // 2] = 250  # an object: edges to find
    pixels[:, :flat_left] = 90
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(pixels).save(path)
    return pixels


def pixels_of(path: Path) -> np.ndarray:
    with Image.open(path) as image:
        return np.asarray(image)


def digests(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*.png"))}


# -- data tile ---------------------------------------------------------------------------------------------
def test_grid_offsets_cover_every_pixel_with_the_last_tile_flush_with_the_edge():
    assert grid_offsets(300, 128, 128) == [0, 128, 172]
    assert grid_offsets(256, 128, 128) == [0, 128]
    assert grid_offsets(200, 128, 64) == [0, 64, 72]
    assert grid_offsets(127, 128, 64) == []
    for length, size, stride in [(300, 128, 128), (1000, 256, 200), (257, 256, 1)]:
        covered = np.zeros(length, bool)
        for offset in grid_offsets(length, size, stride):
            covered[offset:offset + size] = True
        assert covered.all()


def test_a_grid_of_tiles_is_exactly_the_photo_s_pixels_named_by_photo_and_place(tmp_path):
    pixels = photo(tmp_path / "photos" / "street.png", 300, 200)
    report = tile_photos(tmp_path / "photos", tmp_path / "tiles", size=128, min_detail=0)
    names = sorted(p.name for p in (tmp_path / "tiles").iterdir())
    assert names == sorted(f"street__x{x}y{y}.png" for x in (0, 128, 172) for y in (0, 72))
    assert report.tiles == {"all": 6} and report.photos == {"all": 1} and report.flat == 0
    for name in names:
        x, y = (int(v) for v in name[len("street__x"):-len(".png")].split("y"))
        np.testing.assert_array_equal(pixels_of(tmp_path / "tiles" / name), pixels[y:y + 128, x:x + 128])
        assert source_of(Path(name).stem) == "street"


def test_overlapping_tiles_with_a_smaller_stride(tmp_path):
    photo(tmp_path / "photos" / "a.png", 256, 128)
    tile_photos(tmp_path / "photos", tmp_path / "tiles", size=128, stride=64, min_detail=0)
    assert sorted(p.name for p in (tmp_path / "tiles").iterdir()) == [f"a__x{x}y0.png" for x in (0, 128, 64)]


def test_near_empty_tiles_and_small_photos_are_left_out_and_said(tmp_path):
    photo(tmp_path / "photos" / "wall.png", 256, 64, flat_left=128)  # its left tile is one flat grey
    Image.new("RGB", (40, 40), "red").save(tmp_path / "photos" / "thumb.png")
    done = run_cli("data", "tile", str(tmp_path / "photos"), str(tmp_path / "tiles"), "--size", "64",
                   "--stride", "64")
    assert done.returncode == 0, done.stderr
    assert done.stdout == (f"wrote 2 tiles of 64x64 from 2 photograph(s) to {tmp_path / 'tiles'} (all 2), "
                           "2 near-empty tile(s) left out (--min-detail 2)\n")
    assert done.stderr == f"note: {tmp_path / 'photos' / 'thumb.png'}: smaller than 64x64; left out\n"
    assert sorted(p.name for p in (tmp_path / "tiles").iterdir()) == ["wall__x128y0.png", "wall__x192y0.png"]


def test_nothing_to_write_is_one_line_and_leaves_no_folder(tmp_path):
    Image.new("RGB", (300, 300), "grey").save(tmp_path / "sky.png")
    (tmp_path / "photos").mkdir()
    (tmp_path / "sky.png").rename(tmp_path / "photos" / "sky.png")
    done = run_cli("data", "tile", str(tmp_path / "photos"), str(tmp_path / "tiles"), "--size", "128")
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (f"error: {tmp_path / 'photos'}: no tiles written: every tile was near-empty (luminance "
                           "deviation below --min-detail 2.0)\n")
    assert not (tmp_path / "tiles").exists() and [p.name for p in tmp_path.iterdir()] == ["photos"]


def test_an_unreadable_photo_is_named_and_nothing_is_written(tmp_path):
    photo(tmp_path / "photos" / "a.png", 128, 128)
    (tmp_path / "photos" / "b.jpg").write_bytes(b"\xff\xd8\xff\xe0 not really a jpeg")
    done = run_cli("data", "tile", str(tmp_path / "photos"), str(tmp_path / "tiles"), "--size", "64")
    assert done.returncode == 1 and done.stderr.startswith(f"error: {tmp_path / 'photos' / 'b.jpg'}: cannot read")
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["photos"]  # no tiles/, no temp folder


def test_two_photos_whose_names_differ_only_in_the_extension_are_refused(tmp_path):
    photo(tmp_path / "photos" / "a.png", 64, 64)
    photo(tmp_path / "photos" / "a.jpg", 64, 64)
    with pytest.raises(DatasetError, match=r"a.png: has the name of a.jpg but for the extension"):
        tile_photos(tmp_path / "photos", tmp_path / "tiles", size=32)


def test_random_crops_are_deterministic_by_seed_and_name(tmp_path):
    photo(tmp_path / "photos" / "a.png", 400, 300)
    photo(tmp_path / "photos" / "b.png", 400, 300, seed=1)
    runs = {}
    for label, seed in (("first", 3), ("again", 3), ("other", 4)):
        tile_photos(tmp_path / "photos", tmp_path / label, size=64, crops=5, seed=seed)
        runs[label] = digests(tmp_path / label)
    assert runs["first"] == runs["again"] and runs["first"] != runs["other"]
    names = sorted(runs["first"])
    assert 8 <= len(names) <= 10 and {source_of(Path(n).stem) for n in names} == {"a", "b"}
    with pytest.raises(DatasetError, match="give --stride .* or --crops .*, not both"):
        tile_photos(tmp_path / "photos", tmp_path / "x", size=64, crops=5, stride=32)


def test_photos_are_tiled_upright_and_split_folders_are_kept(tmp_path):
    pixels = photo(tmp_path / "src.png", 128, 64)
    with Image.open(tmp_path / "src.png") as image:  # stored turned, with the EXIF tag saying how to show it
        turned = image.transpose(Image.Transpose.ROTATE_90)
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90 degrees clockwise to show
    (tmp_path / "photos" / "train").mkdir(parents=True)
    turned.save(tmp_path / "photos" / "train" / "phone.png", exif=exif)
    photo(tmp_path / "photos" / "test" / "other.png", 64, 64)
    report = tile_photos(tmp_path / "photos", tmp_path / "tiles", size=64, min_detail=0)
    assert report.tiles == {"train": 2, "test": 1}
    assert sorted(p.relative_to(tmp_path / "tiles").as_posix() for p in (tmp_path / "tiles").rglob("*.png")) == [
        "test/other__x0y0.png", "train/phone__x0y0.png", "train/phone__x64y0.png"]
    np.testing.assert_array_equal(pixels_of(tmp_path / "tiles" / "train" / "phone__x64y0.png"), pixels[:, 64:])


def test_an_output_folder_with_files_is_refused(tmp_path):
    photo(tmp_path / "photos" / "a.png", 64, 64)
    (tmp_path / "tiles").mkdir()
    (tmp_path / "tiles" / "keep.txt").write_text("mine")
    with pytest.raises(DatasetError, match="tiles: folder is not empty; choose a new output folder"):
        tile_photos(tmp_path / "photos", tmp_path / "tiles", size=32)
    assert (tmp_path / "tiles" / "keep.txt").read_text() == "mine"


# -- data derive -------------------------------------------------------------------------------------------
def test_canny_finds_a_square_s_outline_and_nothing_in_flat_areas():
    grey = np.zeros((64, 64), np.float32)
    grey[16:48, 16:48] = 200
    edges = canny(grey, 1.0, 40, 100)
    rows, cols = np.nonzero(edges)
    assert len(rows) > 100  # the four sides
    on_border = (np.minimum.reduce([abs(rows - 16), abs(rows - 47), abs(cols - 16), abs(cols - 47)]) <= 1)
    assert on_border.all()
    assert not edges[24:40, 24:40].any() and not edges[:8].any()
    assert not canny(grey, 1.0, 2000, 2000).any()  # thresholds above every gradient: no edges
    assert (canny(grey, 1.0, 5, 100).sum() >= edges.sum())  # a lower weak threshold keeps at least as much


@pytest.mark.parametrize("method", ["edges", "grey", "blur", "downscale", "jpeg", "mask"])
def test_each_derivation_writes_aligned_pairs_with_the_photo_as_b(tmp_path, method):
    pixels = photo(tmp_path / "photos" / "a.png", 96, 64)
    report = derive_pairs(tmp_path / "photos", tmp_path / "pairs", Derivation(method))
    assert report.pairs == {"all": 1}
    pair = pixels_of(tmp_path / "pairs" / "a.png")
    assert pair.shape == (64, 192, 3)
    np.testing.assert_array_equal(pair[:, 96:], pixels)  # B is the photograph, untouched
    a = pair[:, :96].astype(int)
    assert not np.array_equal(a, pixels)
    if method == "grey":
        expected = np.asarray(Image.fromarray(pixels).convert("L"), dtype=int)
        assert (a == expected[:, :, None]).all()
    elif method == "edges":
        assert set(np.unique(a)) <= {0, 255} and (a == 0).any()
    elif method in ("blur", "downscale"):
        assert abs(a.mean() - pixels.mean()) < 3 and a.std() < pixels.std()  # the same picture, less detail
    elif method == "mask":
        holes = (a != pixels).any(-1)
        assert (a[holes] == 128).all() and 0.01 < holes.mean() < 0.5


def test_derived_pairs_are_deterministic_and_the_holes_follow_the_seed(tmp_path):
    for index in range(3):
        photo(tmp_path / "photos" / f"p{index}.png", 64, 64, seed=index)
    derive_pairs(tmp_path / "photos", tmp_path / "one", Derivation("mask", seed=1))
    derive_pairs(tmp_path / "photos", tmp_path / "two", Derivation("mask", seed=1))
    derive_pairs(tmp_path / "photos", tmp_path / "three", Derivation("mask", seed=2))
    assert digests(tmp_path / "one") == digests(tmp_path / "two") != digests(tmp_path / "three")


def test_derive_through_the_command_line(tmp_path):
    photo(tmp_path / "photos" / "train" / "a.png", 64, 64)
    photo(tmp_path / "photos" / "val" / "b.png", 64, 64)
    done = run_cli("data", "derive", str(tmp_path / "photos"), str(tmp_path / "pairs"), "--edges", "--low", "20",
                   "--high", "60")
    assert done.returncode == 0, done.stderr
    assert done.stdout == (f"wrote 2 aligned pairs to {tmp_path / 'pairs'} (train 1, val 1); A: edges (Canny, "
                           f"sigma 1.4, thresholds 20/60), B: the photograph; check them with: nectargan data check "
                           f"{tmp_path / 'pairs'}\n")
    checked = run_cli("data", "check", str(tmp_path / "pairs"))
    assert checked.returncode == 0 and checked.stdout.startswith(f"ok: {tmp_path / 'pairs'}: aligned layout")
    missing = run_cli("data", "derive", str(tmp_path / "photos"), str(tmp_path / "other"))
    assert missing.returncode == 2 and missing.stderr.startswith("error: choose what A is: one of --edges")
    assert not (tmp_path / "other").exists()
    backwards = run_cli("data", "derive", str(tmp_path / "photos"), str(tmp_path / "other"), "--edges", "--low",
                        "90", "--high", "10")
    assert (backwards.returncode, backwards.stderr) == (1, "error: --low 90.0 and --high 10.0: need 0 <= low <= "
                                                           "high\n")


# -- data split --group ------------------------------------------------------------------------------------
def tiled_pairs(folder: Path, photos: int, tiles_each: int) -> None:
    """``photos`` photographs' worth of aligned tile pairs, named as ``data tile`` names them."""
    folder.mkdir(parents=True)
    for index in range(photos):
        for t in range(tiles_each):
            Image.new("RGB", (16, 8), (index, t, 0)).save(folder / f"photo{index}__x{8 * t}y0.png")


def split_of_each_tile(folder: Path) -> dict[str, str]:
    return {p.name: p.parent.name for p in folder.rglob("*.png")}


def test_tiles_of_one_photograph_stay_in_one_split_by_default(tmp_path):
    tiled_pairs(tmp_path / "data", photos=10, tiles_each=4)
    done = run_cli("data", "split", str(tmp_path / "data"), "--val", "0.2", "--test", "0.2", "--seed", "1")
    assert done.returncode == 0, done.stderr
    assert done.stdout == (f"split 40 images of {tmp_path / 'data'}: train 24, val 8, test 8 (moved); the tiles of "
                           "each photograph kept together: photographs train 6, val 2, test 2\n")
    where: dict[str, set[str]] = {}
    for name, split in split_of_each_tile(tmp_path / "data").items():
        where.setdefault(source_of(Path(name).stem), set()).add(split)
    assert all(len(splits) == 1 for splits in where.values()) and len(where) == 10


def test_no_group_scatters_tiles_as_before(tmp_path):
    tiled_pairs(tmp_path / "data", photos=10, tiles_each=4)
    counts, groups = split_folder(tmp_path / "data", val=0.2, test=0.2, seed=1, group=False)
    assert groups is None and counts == {"train": 24, "val": 8, "test": 8}
    where: dict[str, set[str]] = {}
    for name, split in split_of_each_tile(tmp_path / "data").items():
        where.setdefault(source_of(Path(name).stem), set()).add(split)
    assert any(len(splits) > 1 for splits in where.values())


def test_an_image_that_is_no_tile_is_a_photograph_of_its_own_and_group_needs_tiles(tmp_path):
    tiled_pairs(tmp_path / "data", photos=4, tiles_each=3)
    Image.new("RGB", (16, 8)).save(tmp_path / "data" / "holiday.png")  # a stray file does not turn grouping off
    counts, groups = split_folder(tmp_path / "data", val=0.25, test=0, seed=0)
    assert groups is not None and sum(groups.values()) == 5 and sum(counts.values()) == 13
    where: dict[str, set[str]] = {}
    for name, split in split_of_each_tile(tmp_path / "data").items():
        where.setdefault(source_of(Path(name).stem) or name, set()).add(split)
    assert all(len(splits) == 1 for splits in where.values())
    (tmp_path / "plain").mkdir()
    for index in range(4):
        Image.new("RGB", (16, 8)).save(tmp_path / "plain" / f"img{index}.png")
    with pytest.raises(DatasetError, match=r"--group keeps the tiles of one photograph together, but no name is a "
                                           r"tile's"):
        split_folder(tmp_path / "plain", val=0.25, test=0, seed=0, group=True)
    tiled_pairs(tmp_path / "few", photos=2, tiles_each=3)
    with pytest.raises(DatasetError, match="the tiles come from 2 photograph\\(s\\), too few to leave one for train"):
        split_folder(tmp_path / "few", val=0.3, test=0.3, seed=0)
    assert sorted(p.name for p in (tmp_path / "few").iterdir())[0] == "photo0__x0y0.png"  # nothing moved
    assert not (tmp_path / "few" / ".nectargan-split.json").exists()


def test_tiles_of_tiles_and_odd_names_keep_their_first_photograph():
    assert source_of("street__x0y0__x256y128") == "street"
    assert source_of("new\nline__x0y64") == "new\nline"
    assert source_of("a__b__x1y2") == "a__b" and source_of("plain") is None and source_of("__x1y2") is None


def test_sixteen_bit_and_float_photos_are_scaled_to_8_bits_with_a_note(tmp_path):
    ramp16 = (np.linspace(0, 65535, 64 * 64).reshape(64, 64)).astype(np.uint16)
    (tmp_path / "photos").mkdir()
    Image.fromarray(ramp16).save(tmp_path / "photos" / "g16.png")
    done = run_cli("data", "derive", str(tmp_path / "photos"), str(tmp_path / "pairs"), "--grey")
    assert done.returncode == 0, done.stderr
    assert done.stderr == (f"note: 1 photograph(s) have more than 8 bits per sample (e.g. "
                           f"{tmp_path / 'photos' / 'g16.png'}); their outputs are 8-bit (integers scaled from their "
                           "full range, floating point read as 0..1)\n")
    b = pixels_of(tmp_path / "pairs" / "g16.png")[:, 64:]
    np.testing.assert_allclose(b.astype(int), np.round(ramp16 / 257).astype(int), atol=1)
    tiled = tile_photos(tmp_path / "photos", tmp_path / "tiles", size=32)
    assert tiled.tiles == {"all": 4} and tiled.flat == 0 and len(tiled.reduced) == 1  # detail read at 8 bits
    floats = np.linspace(0, 1, 64 * 64, dtype=np.float32).reshape(64, 64)
    (tmp_path / "f").mkdir()
    Image.fromarray(floats).save(tmp_path / "f" / "float.tiff")
    Image.fromarray(floats * 1.5 - 0.25).save(tmp_path / "f" / "wide.tiff")  # -0.25..1.25: clipped, as predict
    derive_pairs(tmp_path / "f", tmp_path / "fpairs", Derivation("grey"))
    b = pixels_of(tmp_path / "fpairs" / "float.png")[:, 64:]
    np.testing.assert_allclose(b.astype(int), np.round(floats * 255).astype(int), atol=1)
    wide = pixels_of(tmp_path / "fpairs" / "wide.png")[:, 64:]
    np.testing.assert_allclose(wide.astype(int), np.round(np.clip(floats * 1.5 - 0.25, 0, 1) * 255).astype(int),
                               atol=1)


@pytest.mark.parametrize("orientation", range(1, 9))
def test_an_oriented_tiff_is_read_upright_once(tmp_path, orientation):
    from nectargan_translate.data.pixels import read_pixels

    y, x = np.mgrid[0:24, 0:40]
    stored = np.stack([x * 6, y * 10, np.zeros_like(x)], -1).astype(np.uint8)
    shown = {1: stored, 2: stored[:, ::-1], 3: stored[::-1, ::-1], 4: stored[::-1], 5: stored.swapaxes(0, 1),
             6: np.rot90(stored, -1), 7: stored.swapaxes(0, 1)[::-1, ::-1], 8: np.rot90(stored, 1)}[orientation]
    (tmp_path / "photos").mkdir()
    Image.fromarray(stored).save(tmp_path / "photos" / "scan.tiff", tiffinfo={0x0112: orientation})
    np.testing.assert_array_equal(read_pixels(tmp_path / "photos" / "scan.tiff"), shown)  # as training reads it
    tile_photos(tmp_path / "photos", tmp_path / "tiles", size=24, min_detail=0)
    np.testing.assert_array_equal(pixels_of(tmp_path / "tiles" / "scan__x0y0.png"), shown[:24, :24])


def test_a_stride_beyond_the_tile_and_an_empty_or_dot_output_are_handled(tmp_path, monkeypatch):
    photo(tmp_path / "photos" / "a.png", 128, 64)
    with pytest.raises(DatasetError, match=r"--stride 65: more than --size 64 leaves pixels between the tiles"):
        tile_photos(tmp_path / "photos", tmp_path / "tiles", size=64, stride=65)
    (tmp_path / "empty").mkdir()
    here = run_cli("data", "tile", str(tmp_path / "photos"), ".", "--size", "64", cwd=tmp_path / "empty")
    assert (here.returncode, here.stderr) == (1, f"error: {tmp_path / 'empty'}: is the current folder; give a new "
                                                 "folder's name (the output appears whole, by a rename, when it is "
                                                 "complete)\n")
    done = run_cli("data", "tile", str(tmp_path / "photos"), "./tiles", "--size", "64", cwd=tmp_path / "empty")
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in (tmp_path / "empty" / "tiles").iterdir()) == ["a__x0y0.png", "a__x64y0.png"]
    blank = run_cli("data", "split", "", cwd=tmp_path / "empty")
    assert blank.returncode == 2 and "is empty; give a folder" in blank.stderr
    assert sorted(p.name for p in (tmp_path / "empty").iterdir()) == ["tiles"]


def test_derive_takes_one_method_and_only_its_options(tmp_path):
    photo(tmp_path / "photos" / "a.png", 32, 32)
    for args, message in ((["--edges", "--grey"], "error: choose what A is: one of --edges, --grey, --blur, "
                                                   "--downscale, --jpeg, --mask (got --edges, --grey)"),
                          (["--grey", "--sigma", "3"], "error: --sigma goes with --edges or --blur, not --grey"),
                          (["--grey", "--factor", "3"], "error: --factor goes with --downscale, not --grey"),
                          (["--blur", "--sigma", "0"], "error: --sigma 0: a blur below 0.1 pixel leaves the photo as "
                                                       "it is; use at least 0.1"),
                          (["--blur", "--sigma", "1e-9"], "error: --sigma 1e-09: a blur below 0.1 pixel")):
        done = run_cli("data", "derive", str(tmp_path / "photos"), str(tmp_path / "pairs"), *args)
        assert done.returncode in (1, 2) and done.stderr.startswith(message), (args, done.stderr)
        assert not (tmp_path / "pairs").exists()


def test_sigterm_leaves_no_partial_output(tmp_path):
    import signal
    import subprocess
    import sys
    import time

    for index in range(6):
        photo(tmp_path / "photos" / f"p{index}.png", 600, 400, seed=index)
    command = [str(Path(sys.executable).with_name("nectargan")), "data", "tile", str(tmp_path / "photos"),
               str(tmp_path / "tiles"), "--size", "16", "--min-detail", "0"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while time.time() < deadline and not any(p.name.startswith(".tiles.tmp") for p in tmp_path.iterdir()):
        time.sleep(0.05)
    time.sleep(0.3)
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 1 and err == f"error: {tmp_path / 'tiles'}: stopped by SIGTERM; nothing was written\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["photos"]


def test_an_interrupted_grouped_split_is_finished_by_the_same_command(tmp_path):
    from nectargan_translate.data.prepare import _plan_split

    tiled_pairs(tmp_path / "data", photos=6, tiles_each=2)
    assignment, paired, groups = _plan_split(tmp_path / "data", val=0.2, test=0.2, seed=0, group=None)
    marker = tmp_path / "data" / ".nectargan-split.json"
    marker.write_text(json.dumps({"options": {"val": 0.2, "test": 0.2, "seed": 0, "copy": False},
                                  "paired": paired, "assignment": assignment, "groups": groups}))
    first = assignment["val"][0][0]
    (tmp_path / "data" / "val").mkdir()
    (tmp_path / "data" / first).rename(tmp_path / "data" / "val" / first)  # one file moved before the stop
    refused = run_cli("data", "split", str(tmp_path / "data"), "--val", "0.3")
    assert refused.returncode == 1 and "an interrupted split (--val 0.2 --test 0.2 --seed 0) is unfinished" \
        in refused.stderr
    done = run_cli("data", "split", str(tmp_path / "data"), "--val", "0.2", "--test", "0.2")
    assert done.returncode == 0, done.stderr
    assert done.stdout.endswith(f"photographs {', '.join(f'{s} {n}' for s, n in groups.items())}\n")
    assert not marker.exists()


def test_data_check_names_an_interrupted_split_once_not_per_split(tmp_path):
    made = run_cli("data", "synth", str(tmp_path / "data"), "--count", "12", "--size", "16")
    assert made.returncode == 0, made.stderr
    (tmp_path / "data" / ".nectargan-split.json").write_text("{}")  # train/, val/ and test/ all under it
    checked = run_cli("data", "check", str(tmp_path / "data"))
    assert (checked.returncode, checked.stderr) == (1, f"error: {tmp_path / 'data'}: 1 problem(s) found\n")
    assert checked.stdout == (f"{tmp_path / 'data'}: a 'nectargan data split' of this folder was interrupted "
                              "(.nectargan-split.json is there); run the same split again to finish it\n")


def test_unpaired_piles_of_tiles_are_grouped_per_domain(tmp_path):
    tiled_pairs(tmp_path / "data" / "A", photos=5, tiles_each=3)
    tiled_pairs(tmp_path / "data" / "B", photos=5, tiles_each=2)
    split_unpaired(tmp_path / "data", val=0.2, test=0, seed=0)
    for domain in ("A", "B"):
        where: dict[str, set[str]] = {}
        for split in ("train", "val"):
            for path in (tmp_path / "data" / f"{split}{domain}").iterdir():
                where.setdefault(source_of(path.stem), set()).add(split)
        assert len(where) == 5 and all(len(s) == 1 for s in where.values())
        assert any("val" in s for s in where.values())


def test_the_photographs_walk_on_the_data_page_prints_what_the_page_shows(tmp_path):
    """docs/plugins/translate-data.md, "From photographs to a dataset": each command, run as written, prints the
    lines the page shows under it."""
    import re

    page = (Path(__file__).resolve().parents[2] / "docs" / "plugins" / "translate-data.md").read_text()
    block = re.search(r"<!-- walk: photos -->\n```\n(.*?)```", page, re.S).group(1)
    steps = re.findall(r"^\$ nectargan (.+)\n((?:(?!\$ ).*\n)*)", block, re.M)
    assert len(steps) == 5
    for command, shown in steps:
        done = run_cli(*command.split(), cwd=tmp_path)
        assert (done.returncode, done.stdout) == (0, shown), (command, done.stderr)
