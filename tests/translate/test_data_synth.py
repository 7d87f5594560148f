"""The synthetic dataset: byte-identical for a seed, the documented layout, and learnable structure."""

from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image

from nectargan_translate.data import DatasetError, PairedDataset
from nectargan_translate.data.synth import LABEL_COLOURS, render_pair, write_synthetic


def files(root):
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_same_seed_same_bytes_other_seed_other_images(tmp_path):
    for name, seed in [("one", 3), ("two", 3), ("three", 4)]:
        write_synthetic(tmp_path / name, count=12, size=32, seed=seed, val=0.25, test=0.25)
    one, two, three = files(tmp_path / "one"), files(tmp_path / "two"), files(tmp_path / "three")
    assert one == two
    assert one.keys() == three.keys() and all(one[k] != three[k] for k in one if k.endswith(".png"))


def test_an_image_does_not_depend_on_the_count(tmp_path):
    write_synthetic(tmp_path / "small", count=3, size=32, seed=0, val=0.0, test=0.0)
    write_synthetic(tmp_path / "large", count=9, size=32, seed=0, val=0.0, test=0.0)
    small, large = files(tmp_path / "small"), files(tmp_path / "large")
    assert all(small[k] == large[k] for k in small if k.endswith(".png"))


def test_layout_and_metadata(tmp_path):
    counts = write_synthetic(tmp_path, count=20, size=48, seed=1, val=0.1, test=0.2)
    assert counts == {"train": 14, "val": 2, "test": 4}
    for split, n in counts.items():
        names = sorted(p.name for p in (tmp_path / split).iterdir())
        assert len(names) == n
    assert sorted(p.name for p in (tmp_path / "val").iterdir()) == ["00014.png", "00015.png"]
    with Image.open(tmp_path / "train" / "00000.png") as image:
        assert image.size == (96, 48) and image.mode == "RGB"
    meta = json.loads((tmp_path / "synth.json").read_text())
    assert meta["seed"] == 1 and meta["size"] == 48 and meta["splits"] == counts
    for split in counts:
        dataset = PairedDataset({"root": str(tmp_path), "load_size": None, "crop_size": None, "verify": "full",
                                 "num_workers": 0}, split)
        assert len(dataset) == counts[split] and dataset[0]["A"].shape == (3, 48, 48)


def test_a_is_a_flat_label_map_and_b_its_rendering():
    a, b = zip(*(render_pair(0, i, 64) for i in range(20)))
    palette = {tuple(c) for c in LABEL_COLOURS}
    for label, rendering in zip(a, b):
        assert {tuple(c) for c in label.reshape(-1, 3)} <= palette
        assert len(np.unique(rendering.reshape(-1, 3), axis=0)) > 200  # shaded and textured, not flat
        assert not np.array_equal(label, rendering)
    classes = {tuple(c) for label in a for c in label.reshape(-1, 3)}
    assert classes == palette  # every class appears
    # shading: the lit side of the scene is brighter than the shadowed floor
    assert np.mean([r[:8].mean() for r in b]) > np.mean([r[-8:].mean() for r in b])


def test_refuses_a_non_empty_folder_and_a_split_without_training_images(tmp_path):
    (tmp_path / "keep.txt").write_text("x")
    with pytest.raises(DatasetError, match="folder is not empty"):
        write_synthetic(tmp_path, count=4, size=16, seed=0, val=0.1, test=0.1)
    with pytest.raises(DatasetError, match="leaves no training images"):
        write_synthetic(tmp_path / "new", count=2, size=16, seed=0, val=0.5, test=0.5)
