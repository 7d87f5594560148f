"""Example grids say what they show in the picture itself (issue 24): the columns named above them, and for
CycleGAN each row's direction left of it; the images below are the bare grid, untouched."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from nectargan_translate.examples import LABEL_HEIGHT, example_grid, save_grid


def pixels(path):
    with Image.open(path) as image:
        return np.asarray(image.convert("RGB")).astype(int)


def images(rows, size, seed):
    return torch.rand(rows, 3, size, size, generator=torch.Generator().manual_seed(seed)) * 2 - 1


@pytest.mark.parametrize("size", [16, 32, 64])
def test_columns_are_named_above_the_grid_and_the_grid_is_unchanged(tmp_path, size):
    a, b, c = images(2, size, 1), images(2, size, 2), images(2, size, 3)
    labelled = pixels(save_grid(tmp_path / "l.png", a, b, c, columns=("input", "output", "target")))
    bare = pixels(save_grid(tmp_path / "b.png", a, b, c))
    assert labelled.shape == (bare.shape[0] + LABEL_HEIGHT, bare.shape[1], 3)
    assert np.array_equal(labelled[LABEL_HEIGHT:], bare)
    expected = (example_grid(a, b, c).mul(255).round().permute(1, 2, 0).numpy()).astype(int)
    assert np.abs(bare - expected).max() <= 1
    strip = labelled[:LABEL_HEIGHT]
    for column in range(3):  # text (dark pixels) over every column, inside its width
        left = 2 + column * (size + 2)
        assert (strip[:, left:left + size] < 128).any(), column
    gaps = [2 + column * (size + 2) - 2 for column in range(3)] + [labelled.shape[1] - 2]
    assert all((strip[:, gap:gap + 2] == 255).all() for gap in gaps)  # nothing spills into the padding


def test_cyclegan_rows_name_their_direction(tmp_path):
    a = images(4, 32, 4)
    path = save_grid(tmp_path / "c.png", a, a, a, columns=("real", "translated", "reconstructed"),
                     rows=["A to B"] * 2 + ["B to A"] * 2)
    labelled, bare = pixels(path), pixels(save_grid(tmp_path / "b.png", a, a, a))
    left = labelled.shape[1] - bare.shape[1]
    assert 20 < left < 60  # a strip as wide as the longest row label
    assert np.array_equal(labelled[LABEL_HEIGHT:, left:], bare)
    label_strip = labelled[LABEL_HEIGHT:, :left]
    for row in range(4):
        top = 2 + row * 34
        assert (label_strip[top:top + 32] < 128).any(), row
    first, third = label_strip[2:34], label_strip[2 + 2 * 34:2 + 2 * 34 + 32]
    assert not np.array_equal(first, third)  # "A to B" and "B to A" are drawn differently
    assert np.array_equal(label_strip[2:34], label_strip[2 + 34:2 + 34 + 32])
    with pytest.raises(ValueError, match="save_grid: 3 row labels for 4 rows"):
        save_grid(tmp_path / "x.png", a, a, a, rows=["A to B"] * 3)
    assert not (tmp_path / "x.png").exists()
