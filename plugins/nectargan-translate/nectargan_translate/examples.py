"""Example grids: one row per image, input | output | target; and which images they show."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import torch
from torchvision.utils import make_grid, save_image

from nectargan_core import atomic_write


def as_rgb(images: torch.Tensor) -> torch.Tensor:
    """[-1, 1] images with 1, 3 or 4 channels -> [0, 1] RGB, so rows of mixed channels line up."""
    images = ((images.detach().float().cpu() + 1) / 2).clamp(0, 1)
    if images.shape[1] == 1:
        return images.expand(-1, 3, -1, -1)
    return images[:, :3]


def example_grid(inputs: torch.Tensor, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """A [3, H, W] grid whose rows are (input, output, target) triples."""
    triples = torch.stack([as_rgb(inputs), as_rgb(outputs), as_rgb(targets)], dim=1).flatten(0, 1)
    return make_grid(triples, nrow=3, padding=2, pad_value=1.0)


def save_grid(path: Path, inputs: torch.Tensor, outputs: torch.Tensor, targets: torch.Tensor) -> Path:
    """Write the grid as PNG via a temp file, so a reader never sees half an image."""
    path.parent.mkdir(parents=True, exist_ok=True)
    grid = example_grid(inputs, outputs, targets)
    # The shared atomic write: a failed write (full disk, ulimit -f) names the grid and leaves no temp file.
    atomic_write(path, lambda handle: save_image(grid, handle, format="png"))
    return path


def train_view(trainer: Any, builtin: str) -> Any:
    """The train images without augmentation, for examples drawn from the train split.

    For the plugin's built-in dataset ``builtin`` (``paired``, ``unpaired``):
    a new one with the val preprocessing over the train folder(s). Another
    dataset's train set is returned as it is.
    """
    data = trainer.config.data
    if data.name != builtin:
        return trainer.train_set
    options = {**data.options, "val": {**(data.options.get("val") or {}), "folder": "train"}}
    return trainer.registry.get("dataset", builtin).load()(split="val", seed=trainer.config.run.seed, **options)


def spread_indices(total: int, count: int, seed: int) -> list[int]:
    """``count`` of ``total`` indices, spread over the whole range: one drawn from each of ``count`` equal stretches.

    Datasets are sorted by name, and neighbouring names often come from one
    source (crops of one photo); the first N would all show it. The draw
    depends only on ``seed``, ``total`` and ``count``, so the same images come
    back every epoch and after a resume.
    """
    if count >= total:
        return list(range(total))
    draw = random.Random(f"nectargan examples {seed}")
    bounds = [round(i * total / count) for i in range(count + 1)]
    return [draw.randrange(bounds[i], bounds[i + 1]) for i in range(count)]
