"""Full-size inference in blended tiles (issue 24): ``predict --tile`` covers any image size with tiles of the
training size, a few at a time, and blends their overlaps so that tile-to-tile differences leave no seam."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from PIL import Image

from nectargan_core import NectarGANError
from nectargan_translate.tiling import Tiling, ramp, tile_offsets
from support import run_cli


def test_offsets_cover_the_length_with_the_last_tile_flush():
    assert tile_offsets(100, 32, 8) == [0, 24, 48, 68]
    assert tile_offsets(32, 32, 8) == [0] and tile_offsets(10, 32, 8) == [0]
    for length, tile, overlap in [(1000, 256, 64), (257, 256, 0), (90, 32, 16)]:
        covered = np.zeros(length, bool)
        for offset in tile_offsets(length, tile, overlap):
            covered[offset:offset + tile] = True
        assert covered.all()


def test_overlapping_windows_add_up_to_one():
    left, right = ramp(32, 8, False, True), ramp(32, 8, True, False)
    torch.testing.assert_close(left[24:] + right[:8], torch.ones(8))
    assert (ramp(32, 8, False, False) == 1).all() and (ramp(32, 0, True, True) == 1).all()


@pytest.mark.parametrize("shape", [(1, 3, 70, 130), (1, 1, 20, 50), (1, 3, 32, 32)])
def test_a_per_pixel_model_comes_back_exactly_whatever_the_size(shape):
    image = torch.rand(shape) * 2 - 1
    for overlap in (0, 5, 16):
        out = Tiling(32, overlap).run(lambda x: x * 0.5, image, batch_size=3)
        torch.testing.assert_close(out, image * 0.5)


def test_tiles_go_through_the_model_a_batch_at_a_time_at_the_tile_size():
    shapes = []

    def model(batch):
        shapes.append(tuple(batch.shape))
        return batch

    Tiling(32, 8).run(model, torch.zeros(1, 3, 100, 200), batch_size=4)
    assert all(shape[1:] == (3, 32, 32) and shape[0] <= 4 for shape in shapes)
    assert sum(shape[0] for shape in shapes) == Tiling(32, 8).count(100, 200) == 4 * 8


def test_blending_spreads_a_tile_to_tile_difference_over_the_overlap():
    """A model whose tiles disagree (each gives its tile's mean, as instance normalisation may) shows a jump at every
    seam without overlap; blended, the largest step between neighbouring pixels is a fraction of it."""
    ramp_image = torch.linspace(-1, 1, 160).repeat(1, 1, 32, 1)  # brighter to the right

    def tile_means(batch):
        return batch.mean(dim=(1, 2, 3), keepdim=True).expand_as(batch)

    hard = Tiling(32, 0).run(tile_means, ramp_image)
    soft = Tiling(32, 16).run(tile_means, ramp_image)
    hard_step = (hard[..., 1:] - hard[..., :-1]).abs().max()
    soft_step = (soft[..., 1:] - soft[..., :-1]).abs().max()
    assert hard_step > 0.3 and soft_step < hard_step / 5


def test_settings_that_cannot_work_are_one_line():
    with pytest.raises(NectarGANError, match=r"--tile 30: must be a multiple of 16 for this generator, e.g. 16 or 32"):
        Tiling(30, 4, multiple=16)
    with pytest.raises(NectarGANError, match=r"--overlap 20: must be from 0 to half the tile \(16\)"):
        Tiling(32, 20)


def big_photo(path, height=90, width=150):
    pixels = (np.random.default_rng(1).random((height, width, 3)) * 255).astype(np.uint8)
    Image.fromarray(pixels).save(path)
    return path


def test_predict_in_tiles_writes_full_size_outputs_and_records_how(trained_run, tmp_path):
    photo = big_photo(tmp_path / "big.png")
    done = run_cli("predict", str(trained_run.path), str(photo), "-o", str(tmp_path / "out"), "--tile", "auto",
                   "--overlap", "8", "--batch-size", "4")
    assert done.returncode == 0, done.stderr
    assert "tiles of 32x32 overlapping by 8 px, blended" in done.stdout and done.stderr == ""
    with Image.open(tmp_path / "out" / "big.png") as out:
        assert out.size == (150, 90)
    record = json.loads((tmp_path / "out" / "predict.json").read_text())
    assert record["fit"] == "tiles of 32x32 overlapping by 8 px, blended"
    scaled = run_cli("predict", str(trained_run.path), str(photo), "-o", str(tmp_path / "half"), "--tile", "32",
                     "--scale", "0.5")
    assert scaled.returncode == 0, scaled.stderr
    with Image.open(tmp_path / "half" / "big.png") as out:
        assert out.size == (75, 45)
    assert "scaled by 0.5, tiles of 32x32 overlapping by 8 px" in scaled.stdout


def test_a_large_image_run_whole_gets_a_note_naming_the_tile_option(trained_run, tmp_path):
    photo = big_photo(tmp_path / "big.png")
    done = run_cli("predict", str(trained_run.path), str(photo), "-o", str(tmp_path / "out"))
    assert done.returncode == 0
    assert done.stderr == ("note: 1 image(s) are larger than the training size 32x32 and ran whole, at a scale the "
                           "model did not train at and with memory for every pixel; --tile 32 runs them in tiles of "
                           "the training size (add --scale to shrink them first)\n")


@pytest.mark.parametrize("args, message", [
    (["--tile", "30"], "error: --tile 30: must be a multiple of 16 for this generator, e.g. 16 or 32"),
    (["--overlap", "4"], "error: --overlap goes with --tile"),
    (["--tile", "32", "--resize"], "error: --tile runs images at their own size in tiles: it does not go with "
                                   "--resize"),
    (["--tile", "32", "--pad"], "error: --tile runs images at their own size in tiles: it does not go with --pad"),
    (["--tile", "32", "--size", "64"], "error: --tile runs images at their own size: it does not go with --crop, "
                                       "--resize or --size"),
    (["--tile", "0"], "is not a tile side; use a number of pixels from 1 to"),
    (["--tile", "32", "-o", ""], "is empty; give a path ('.' for the current folder)"),
])
def test_tile_mistakes_are_one_line_and_write_nothing(trained_run, tmp_path, args, message):
    photo = big_photo(tmp_path / "big.png")
    done = run_cli("predict", str(trained_run.path), str(photo), "-o", str(tmp_path / "out"), *args)
    assert done.returncode == 2 and message in done.stderr and done.stderr.count("\n") == 1  # a usage mistake
    assert not (tmp_path / "out").exists()


def hopper(tmp_path):
    """A real photograph (matplotlib's sample of Grace Hopper, a dependency of the core) cropped to an odd size."""
    import matplotlib.cbook

    path = matplotlib.cbook.get_sample_data("grace_hopper.jpg", asfileobj=False)
    with Image.open(path) as photo:
        photo.convert("RGB").crop((0, 0, 397, 509)).save(tmp_path / "hopper.png")
    return tmp_path / "hopper.png"


def seam_ratios(output: np.ndarray, tile: int, overlap: int) -> list[float]:
    """Mean difference between neighbouring pixels where tiles start or end, over the same inside tiles: per axis
    (columns, then rows). 1: a border looks like the rest of the image; a seam shows as a ratio well above 1."""
    ratios = []
    for axis in (1, 0):
        steps = np.abs(np.diff(output.astype(float), axis=axis)).mean(axis=(1 - axis, 2))
        length = output.shape[axis]
        borders = {b - 1 for start in tile_offsets(length, tile, overlap) for b in (start, start + tile)
                   if 0 < b < length}
        inside = [i for i in range(len(steps)) if i not in borders]
        ratios.append(float(steps[sorted(borders)].mean() / steps[inside].mean()))
    return ratios


def test_a_real_photograph_at_an_odd_size_comes_out_whole_without_seams(trained_run, tmp_path):
    photo = hopper(tmp_path)
    done = run_cli("predict", str(trained_run.path), str(photo), "-o", str(tmp_path / "out"), "--tile", "32",
                   "--overlap", "8", "--batch-size", "8")
    assert done.returncode == 0, done.stderr
    with Image.open(tmp_path / "out" / "hopper.png") as out:
        assert out.size == (397, 509)
        pixels = np.asarray(out)
    assert max(seam_ratios(pixels, 32, 8)) < 1.15  # tile borders change no more than the picture inside tiles


def test_blending_removes_the_seams_of_a_model_that_normalises_each_tile(tmp_path):
    """Instance normalisation (CycleGAN's generators) gives every tile its own statistics: butted tiles show
    seams; blended ones bring the borders near the inside of the tiles."""
    with Image.open(hopper(tmp_path)) as photo:
        image = torch.from_numpy(np.asarray(photo, dtype=np.float32) / 127.5 - 1).permute(2, 0, 1)[None]

    def instance_norm(batch):
        mean, std = batch.mean(dim=(2, 3), keepdim=True), batch.std(dim=(2, 3), keepdim=True) + 1e-3
        return torch.tanh((batch - mean) / std)

    def as_pixels(output):
        return ((output[0].permute(1, 2, 0).numpy() + 1) * 127.5).round()

    butted = seam_ratios(as_pixels(Tiling(64, 0).run(instance_norm, image, batch_size=4)), 64, 0)
    blended = seam_ratios(as_pixels(Tiling(64, 16).run(instance_norm, image, batch_size=4)), 64, 16)
    assert min(butted) > 1.8 and max(blended) < 1.3


def test_test_in_tiles_scores_full_size_photos_as_predict_translates_them(trained_run, tmp_path):
    """``nectargan test --tile``: a split kept at full size (the run reads test with preprocess: none) runs in the
    same blended tiles as predict --tile: the same output pixels, scored at the photos' own size."""
    root = tmp_path / "data"
    (root / "test").mkdir(parents=True)
    rng = np.random.default_rng(3)
    for name in ("wide.png", "tall.png"):
        pixels = rng.integers(0, 256, (70, 150, 3) if name == "wide.png" else (110, 60, 3), dtype=np.uint8)
        Image.fromarray(np.concatenate([pixels, pixels[:, ::-1]], axis=1)).save(root / "test" / name)  # A | B
    done = run_cli("test", str(trained_run.path), "--data-root", str(root), "--out", str(tmp_path / "tested"),
                   "--tile", "auto", "--overlap", "8")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("test: 2 images, ")
    assert ", eval mode, in tiles of 32x32 overlapping by 8 px, blended: " in done.stdout
    results = json.loads((tmp_path / "tested" / "metrics.json").read_text())
    assert results["tiling"] == "tiles of 32x32 overlapping by 8 px, blended"
    for row in results["per_image"]:
        with Image.open(tmp_path / "tested" / "inputs" / row["image"]) as shown:
            a_side = shown.copy()
        a_side.save(tmp_path / f"a-{row['image']}")
        predicted = run_cli("predict", str(trained_run.path), str(tmp_path / f"a-{row['image']}"), "-o",
                            str(tmp_path / f"pred-{row['image']}"), "--tile", "auto", "--overlap", "8")
        assert predicted.returncode == 0, predicted.stderr
        with Image.open(tmp_path / "tested" / "images" / row["image"]) as tested, \
                Image.open(tmp_path / f"pred-{row['image']}" / f"a-{row['image']}") as by_predict:
            assert tested.size == a_side.size == by_predict.size
            assert np.abs(np.asarray(tested, dtype=int) - np.asarray(by_predict, dtype=int)).max() <= 1
    whole = run_cli("test", str(trained_run.path), "--data-root", str(root), "--out", str(tmp_path / "whole"))
    assert whole.returncode == 0, whole.stderr
    assert json.loads((tmp_path / "whole" / "metrics.json").read_text())["tiling"] is None
    small = run_cli("test", str(trained_run.path), "--split", "val", "--out", str(tmp_path / "small"), "--tile", "32")
    assert small.returncode == 0, small.stderr
    assert small.stderr == ("note: no val image is larger than the 32-pixel tile (the largest side is 32 px), so each "
                            "ran as one tile; --tile matters for a split the run reads at full size "
                            "(data.test.preprocess: none)\n")
    refused = run_cli("test", str(trained_run.path), "--overlap", "8")
    assert (refused.returncode, refused.stderr) == (2, "error: --overlap goes with --tile\n")
