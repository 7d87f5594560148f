"""Example grids: one row per image, input | output | target."""

from __future__ import annotations

from pathlib import Path

import torch
from torchvision.utils import make_grid, save_image


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
    tmp = path.with_name(f".{path.name}.tmp.png")
    save_image(example_grid(inputs, outputs, targets), tmp)
    tmp.replace(path)
    return path
