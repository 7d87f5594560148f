"""PairedDataset on real files: layouts, decoding, channels, direction and sample format."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from nectargan_translate.data import PairedDataset
from data_helpers import aligned_dataset, folders_dataset, noise, save, save_aligned, save_png16_rgb

PLAIN = {"load_size": None, "crop_size": None, "augment": [], "num_workers": 0}


def unit(t: torch.Tensor) -> torch.Tensor:
    """A dataset tensor back in [0, 1]."""
    return (t + 1) / 2


def expected(pixels: np.ndarray, depth: int = 255) -> torch.Tensor:
    array = pixels[..., None] if pixels.ndim == 2 else pixels
    return torch.from_numpy(array.astype(np.float64) / depth).permute(2, 0, 1).float()


def test_aligned_layout_splits_each_file_at_half_width(tmp_path):
    a, b = noise(16, seed=1), noise(16, seed=2)
    save_aligned(tmp_path / "train" / "b.png", a, b)
    save_aligned(tmp_path / "train" / "a.png", b, a)
    save(tmp_path / "train" / ".hidden.png", noise(8))
    (tmp_path / "train" / "notes.txt").write_text("not an image")
    Image.fromarray(noise(8)).save(tmp_path / "train" / "anim.gif")
    ds = PairedDataset({"root": str(tmp_path), **PLAIN})
    assert ds.layout == "aligned" and [p.name for p in ds.pairs] == ["a", "b"]
    item = ds[1]
    assert set(item) == {"A", "B", "path", "index"}
    assert item["path"] == str(tmp_path / "train" / "b.png") and item["index"] == 1
    assert item["A"].dtype == torch.float32 and item["A"].shape == (3, 16, 16)
    assert torch.allclose(unit(item["A"]), expected(a), atol=1e-6)
    assert torch.allclose(unit(item["B"]), expected(b), atol=1e-6)
    assert item["A"].min() >= -1 and item["A"].max() <= 1


def test_direction_btoa_swaps_input_and_target(tmp_path):
    a, b = noise(16, seed=1), noise(16, seed=2)
    save_aligned(tmp_path / "train" / "x.png", a, b)
    item = PairedDataset({"root": str(tmp_path), "direction": "BtoA", **PLAIN})[0]
    assert torch.allclose(unit(item["A"]), expected(b), atol=1e-6)
    assert torch.allclose(unit(item["B"]), expected(a), atol=1e-6)


def test_folders_layout_matches_by_name_across_extensions(tmp_path):
    root = folders_dataset(tmp_path, {"train": 3})
    for layout in ("auto", "folders"):
        ds = PairedDataset({"root": str(root), "layout": layout, **PLAIN})
        assert ds.layout == "folders" and len(ds) == 3
    item = ds[2]
    assert item["path"] == str(root / "train" / "A" / "002.png")
    assert torch.allclose(unit(item["A"]), expected(noise(32, seed=2)), atol=1e-6)
    jpeg = np.asarray(Image.open(root / "train" / "B" / "002.jpg"))
    assert torch.allclose(unit(item["B"]), expected(jpeg), atol=1e-6)


@pytest.mark.parametrize("suffix", [".png", ".jpg", ".webp", ".bmp", ".tif", ".tiff", ".jpeg"])
def test_every_listed_format_decodes(tmp_path, suffix):
    pixels = np.full((8, 16, 3), (200, 100, 50), dtype=np.uint8)
    save(tmp_path / "train" / f"x{suffix}", pixels)
    item = PairedDataset({"root": str(tmp_path), **PLAIN})[0]
    lossy = suffix in {".jpg", ".jpeg", ".webp"}
    assert torch.allclose(unit(item["A"]), expected(pixels[:, :8]), atol=0.03 if lossy else 1e-6)


def test_16bit_png_and_tiff_keep_their_full_range(tmp_path):
    gray = (np.arange(16 * 32, dtype=np.uint16).reshape(16, 32) * 127 + 3)
    save(tmp_path / "train" / "g.png", gray)
    save(tmp_path / "train" / "g.tif", gray)
    rgb = np.random.default_rng(0).integers(0, 65536, (16, 32, 3)).astype(np.uint16)
    save_png16_rgb(tmp_path / "train" / "rgb16.png", rgb)
    ds = PairedDataset({"root": str(tmp_path), "in_channels": 1, "out_channels": 3, **PLAIN})
    by_name = {Path(ds[i]["path"]).name: ds[i] for i in range(len(ds))}
    for name in ("g.png", "g.tif"):
        a = unit(by_name[name]["A"]).double()
        assert a.shape == (1, 16, 16)
        assert torch.allclose(a, expected(gray[:, :16], 65535).double(), atol=1e-6), name
        assert len(torch.unique(a)) == 256  # an 8-bit cut would merge neighbouring values
    b = unit(by_name["rgb16.png"]["B"]).double()
    assert torch.allclose(b, expected(rgb[:, 16:], 65535).double(), atol=1e-6)


def test_channels_follow_the_declared_counts(tmp_path):
    gray, rgba = noise(8, channels=1, seed=1), noise(8, channels=4, seed=2)
    save_aligned(tmp_path / "train" / "gray.png", gray, gray)
    save_aligned(tmp_path / "train" / "rgba.png", rgba, rgba)
    items = {Path(it["path"]).stem: it for it in PairedDataset(
        {"root": str(tmp_path), "in_channels": 3, "out_channels": 4, **PLAIN})}
    g = unit(items["gray"]["A"])
    assert g.shape == (3, 8, 8) and torch.equal(g[0], g[1]) and torch.equal(g[1], g[2])
    g4 = unit(items["gray"]["B"])
    assert g4.shape == (4, 8, 8) and torch.all(g4[3] == 1)
    assert torch.allclose(unit(items["rgba"]["A"]), expected(rgba[..., :3]), atol=1e-6)  # alpha dropped
    assert torch.allclose(unit(items["rgba"]["B"]), expected(rgba), atol=1e-6)  # alpha kept
    luma = PairedDataset({"root": str(tmp_path), "in_channels": 1, **PLAIN})[1]["A"]
    r, g_, b = expected(rgba[..., :3])
    assert luma.shape == (1, 8, 8)
    assert torch.allclose(unit(luma)[0], 0.2989 * r + 0.587 * g_ + 0.114 * b, atol=1e-3)


def test_palette_png_is_read_as_colour(tmp_path):
    image = Image.fromarray(noise(8, seed=3)).convert("P", palette=Image.Palette.ADAPTIVE, colors=16)
    (tmp_path / "train").mkdir()
    image.save(tmp_path / "train" / "p.png")
    item = PairedDataset({"root": str(tmp_path), **PLAIN})[0]
    rgb = np.asarray(image.convert("RGB"))
    assert torch.allclose(unit(item["A"]), expected(rgb[:, :4]), atol=1e-6)


def test_resize_and_crop_sizes(tmp_path):
    aligned_dataset(tmp_path, {"train": 2, "val": 2, "test": 2}, size=20)
    base = {"root": str(tmp_path), "load_size": 24, "crop_size": 16, "augment": [], "num_workers": 0}
    assert PairedDataset(base)[0]["A"].shape == (3, 16, 16)
    for preprocess, side in [("center_crop", 16), ("resize", 16), ("none", 20)]:
        ds = PairedDataset({**base, "val": {"folder": "val", "preprocess": preprocess}}, "val")
        assert ds[0]["A"].shape == (3, side, side) and ds[0]["B"].shape == (3, side, side), preprocess
    no_crop = PairedDataset({**base, "crop_size": None})
    assert no_crop[0]["A"].shape == (3, 24, 24)


def test_max_images_and_eval_folders(tmp_path):
    aligned_dataset(tmp_path, {"train": 5, "val": 4, "other": 2})
    opts = {"root": str(tmp_path), "max_images": 3, **PLAIN,
            "val": {"folder": "val", "max_images": 2}, "test": {"folder": "other"}}
    assert len(PairedDataset(opts)) == 3
    assert len(PairedDataset(opts, "val")) == 2
    test = PairedDataset(opts, "test")
    assert len(test) == 2 and test.path == tmp_path / "other"
    with pytest.raises(ValueError, match="split must be one of"):
        PairedDataset(opts, "bogus")  # type: ignore[arg-type]


def test_negative_index_names_the_real_position(tmp_path):
    aligned_dataset(tmp_path, {"train": 3})
    ds = PairedDataset({"root": str(tmp_path), **PLAIN})
    assert ds[-1]["index"] == 2
    with pytest.raises(IndexError):
        ds[3]
