"""Example grids: one row per image, input | output | target, the columns (and rows) labelled in the picture;
and which images they show."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any, Sequence

import torch
from torchvision.utils import make_grid, save_image

from nectargan_core import atomic_write


#: Height of the strip above a grid that names its columns, in pixels (whatever the font).
LABEL_HEIGHT = 14
#: make_grid's padding between and around the images.
PADDING = 2


def as_rgb(images: torch.Tensor) -> torch.Tensor:
    """[-1, 1] images with 1, 3 or 4 channels -> [0, 1] RGB, so rows of mixed channels line up."""
    images = ((images.detach().float().cpu() + 1) / 2).clamp(0, 1)
    if images.shape[1] == 1:
        return images.expand(-1, 3, -1, -1)
    return images[:, :3]


def example_grid(inputs: torch.Tensor, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """A [3, H, W] grid whose rows are (input, output, target) triples."""
    triples = torch.stack([as_rgb(inputs), as_rgb(outputs), as_rgb(targets)], dim=1).flatten(0, 1)
    return make_grid(triples, nrow=3, padding=PADDING, pad_value=1.0)


def fitted(draw: Any, text: str, width: int) -> str:
    """``text``, shortened with ``..`` until it fits ``width`` pixels (the default font is about 6 px a letter)."""
    if draw.textlength(text) <= width:
        return text
    while len(text) > 1 and draw.textlength(text + "..") > width:
        text = text[:-1]
    return text + ".." if draw.textlength(text + "..") <= width else ""


def labelled(grid: torch.Tensor, tile: tuple[int, int], columns: Sequence[str], rows: Sequence[str] = ()) -> Any:
    """The grid (``[3, H, W]`` in [0, 1]) as a PIL image with ``columns`` written above its columns and ``rows``
    (one per row, e.g. ``A to B``) written left of its rows, in black on white, so a grid copied out of the run
    still says what it shows."""
    from PIL import Image, ImageDraw, ImageFont

    picture = Image.fromarray(grid.mul(255).round().byte().permute(1, 2, 0).numpy())
    font = ImageFont.load_default()
    measure = ImageDraw.Draw(Image.new("RGB", (1, 1)))
    height, width = tile
    left = (max(int(measure.textlength(label, font=font)) for label in rows) + 2 * PADDING) if rows else 0
    canvas = Image.new("RGB", (picture.width + left, picture.height + LABEL_HEIGHT), "white")
    canvas.paste(picture, (left, LABEL_HEIGHT))
    draw = ImageDraw.Draw(canvas)
    draw.font = font
    for index, label in enumerate(columns):
        text = fitted(draw, str(label), width)
        x = left + PADDING + index * (width + PADDING) + (width - draw.textlength(text)) / 2
        draw.text((round(x), 1), text, fill="black")
    for index, label in enumerate(rows):
        y = LABEL_HEIGHT + PADDING + index * (height + PADDING) + max(height - 11, 0) // 2
        draw.text((PADDING, y), str(label), fill="black")
    return canvas


def save_grid(path: Path, inputs: torch.Tensor, outputs: torch.Tensor, targets: torch.Tensor, *,
              columns: Sequence[str] = (), rows: Sequence[str] = ()) -> Path:
    """Write the grid as PNG via a temp file, so a reader never sees half an image.

    ``columns`` (e.g. ``("input", "output", "target")``) are written above the three columns, and ``rows`` (one
    label per row) left of the rows; without them the PNG is the bare grid.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    grid = example_grid(inputs, outputs, targets)
    if rows and len(rows) != inputs.shape[0]:
        raise ValueError(f"save_grid: {len(rows)} row labels for {inputs.shape[0]} rows")
    if columns or rows:
        picture = labelled(grid, tuple(inputs.shape[-2:]), columns, rows)
        # The shared atomic write: a failed write (full disk, ulimit -f) names the grid and leaves no temp file.
        atomic_write(path, lambda handle: picture.save(handle, format="png"))
    else:
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
