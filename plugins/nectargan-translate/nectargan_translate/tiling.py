"""Full-size inference: a generator run on overlapping tiles of an image, blended without seams.

A generator trained on 256-pixel crops has learnt the world at that scale:
run on a whole 4000x3000 photograph it sees a scene at a scale it never saw
and needs memory for every pixel at once; squashed to 256 pixels the
photograph loses everything the model could add. Tiling runs it where it was
trained: tiles of the training size with an overlap, a few at a time (the
generator's memory bounded by the tile and the batch; the image and its
output are held whole), each output weighted by a smooth window
that falls to zero over the overlap towards its neighbours, and the weighted
outputs summed and divided by the summed weights. Where two tiles overlap by
exactly the overlap, the two windows add up to one (sin^2 + cos^2), so a
generator that gives two tiles slightly different results (instance
normalisation, its receptive field at a tile's edge) crosses from one to the
other gradually instead of at a visible seam. At the image's own borders the
window stays at one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import torch

from nectargan_core import ConfigError


def tile_offsets(length: int, tile: int, overlap: int) -> list[int]:
    """Where tiles of ``tile`` pixels start along ``length`` (stride ``tile - overlap``), the last flush with the end;
    ``[0]`` when one tile covers it."""
    if length <= tile:
        return [0]
    stride = tile - overlap
    offsets = list(range(0, length - tile + 1, stride))
    if offsets[-1] != length - tile:
        offsets.append(length - tile)
    return offsets


def ramp(tile: int, overlap: int, fall_start: bool, fall_end: bool) -> torch.Tensor:
    """One side of the blending window: 1 inside, ``sin^2`` rising over ``overlap`` pixels at a start that borders
    another tile, and the mirror at such an end."""
    weights = torch.ones(tile)
    if overlap > 0:
        rise = torch.sin(math.pi / 2 * (torch.arange(overlap) + 0.5) / overlap) ** 2
        if fall_start:
            weights[:overlap] = rise
        if fall_end:
            weights[tile - overlap:] = rise.flip(0)
    return weights


@dataclass(frozen=True)
class Tiling:
    """How an image is cut for the generator: tiles of ``tile`` pixels overlapping by ``overlap``."""

    tile: int
    overlap: int
    multiple: int = 1

    def __post_init__(self) -> None:
        if self.tile % self.multiple:
            lower = max(self.tile // self.multiple * self.multiple, self.multiple)
            raise ConfigError(f"--tile {self.tile}: must be a multiple of {self.multiple} for this generator, "
                                 f"e.g. {lower} or {lower + self.multiple}")
        if not 0 <= self.overlap <= self.tile // 2:
            raise ConfigError(f"--overlap {self.overlap}: must be from 0 to half the tile ({self.tile // 2})")

    def describe(self) -> str:
        """The tiling in words (the summary line and ``predict.json``)."""
        if not self.overlap:
            return f"tiles of {self.tile}x{self.tile} side by side (no overlap: not blended)"
        return f"tiles of {self.tile}x{self.tile} overlapping by {self.overlap} px, blended"

    def count(self, height: int, width: int) -> int:
        """Tiles an image of ``height x width`` takes."""
        return len(tile_offsets(height, self.tile, self.overlap)) * len(tile_offsets(width, self.tile, self.overlap))

    def run(self, model: Callable[[torch.Tensor], torch.Tensor], image: torch.Tensor, *, batch_size: int = 1,
            device: torch.device | str = "cpu") -> torch.Tensor:
        """``model`` over ``image`` (``1 x C x H x W``, any size) in blended tiles; the output (``1 x C' x H x W``,
        float32, on the CPU). An image smaller than a tile is reflect-padded to one (the pad is cropped away)."""
        _, _, height, width = image.shape
        padded = _pad_to(image, self.tile)
        full_h, full_w = padded.shape[-2:]
        rows = tile_offsets(full_h, self.tile, self.overlap)
        cols = tile_offsets(full_w, self.tile, self.overlap)
        places = [(top, left) for top in rows for left in cols]
        total: torch.Tensor | None = None
        weight_sum = torch.zeros(1, 1, full_h, full_w)
        for start in range(0, len(places), batch_size):
            chunk = places[start:start + batch_size]
            batch = torch.cat([padded[..., t:t + self.tile, l:l + self.tile] for t, l in chunk]).to(device)
            outputs = model(batch).float().cpu()
            if total is None:
                total = torch.zeros(1, outputs.shape[1], full_h, full_w)
            for output, (top, left) in zip(outputs, chunk):
                window = (ramp(self.tile, self.overlap, top > 0, top + self.tile < full_h)[:, None]
                          * ramp(self.tile, self.overlap, left > 0, left + self.tile < full_w)[None, :])
                total[0, :, top:top + self.tile, left:left + self.tile] += output * window
                weight_sum[0, 0, top:top + self.tile, left:left + self.tile] += window
        assert total is not None
        blended = total / weight_sum
        top, left = (full_h - height) // 2, (full_w - width) // 2
        return blended[..., top:top + height, left:left + width]


def tiling_for(tile: int | str, overlap: int | None, training_size: int | None, multiple: int) -> Tiling:
    """The tiling of ``--tile N|auto`` (auto: the training size) and ``--overlap`` (default: a quarter of the tile)."""
    side = training_size if tile == "auto" else int(tile)
    if side is None:
        raise ConfigError("--tile auto: this checkpoint records no training size; give --tile N")
    return Tiling(side, side // 4 if overlap is None else overlap, multiple)


def run_sized(model: Callable[[torch.Tensor], torch.Tensor], images: torch.Tensor, sizing: Any, *,
              device: torch.device | str, tiles_per_pass: int = 1) -> torch.Tensor:
    """``model`` (on ``device``) over a batch of images (``N x C x H x W``, anywhere) at their own size: in
    blended tiles (a :class:`Tiling`, image by image: only tiles go to the device) or whole (a ``Fit``: padded to
    the generator's multiple, then cropped back); the outputs on ``device``."""
    if isinstance(sizing, Tiling):
        return torch.cat([sizing.run(model, image[None], batch_size=tiles_per_pass, device=device)
                          for image in images]).to(device)
    height, width = images.shape[-2:]
    return sizing.restore(model(sizing.prepare(images.to(device))), height, width)


def _pad_to(image: torch.Tensor, side: int) -> torch.Tensor:
    """``image`` reflect-padded (centred) so that neither side is below ``side`` (edge-replicated when too small
    to reflect)."""
    import torch.nn.functional as nnf

    height, width = image.shape[-2:]
    grow_h, grow_w = max(side - height, 0), max(side - width, 0)
    if not grow_h and not grow_w:
        return image
    pads = (grow_w // 2, grow_w - grow_w // 2, grow_h // 2, grow_h - grow_h // 2)
    mode = "reflect" if max(pads[:2]) < width and max(pads[2:]) < height else "replicate"
    return nnf.pad(image, pads, mode=mode)
