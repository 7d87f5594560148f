"""Images of any size in and out of a generator that needs multiples of ``2**depth``.

A UNet of depth ``d`` halves the image ``d`` times, so height and width must be
multiples of ``2**d``. :class:`Fit` makes any image acceptable and maps the
output back:

* ``pad`` (default): reflect-pad to the next multiple (centred), then crop the
  output back to the original size. No pixel is resampled; the border the
  model sees is a mirror of the image, not the zeros or the black it never
  trained on. An image smaller than the padding needs is edge-replicated.
* ``crop``: centre-crop to ``size``, or to the largest multiples that fit; the
  output is the crop.
* ``resize``: resize to ``size`` (the training resolution by default), then
  resize the output back to the original size.

All methods take and return ``N x C x H x W`` batches in any value range.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Optional

import numpy as np
import torch
import torch.nn.functional as nnf
from PIL import Image
from torchvision.transforms.v2 import functional as F

from nectargan_core import NectarGANError, atomic_write

from .data.augment import INTERPOLATION

FitMode = Literal["pad", "crop", "resize"]


def round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


@dataclass(frozen=True)
class Fit:
    """How an image becomes a generator input (:meth:`prepare`) and its output goes back (:meth:`restore`).

    ``size`` is ``(height, width)``: the crop or resize target (None for ``pad``,
    and for ``crop`` to mean the largest multiples that fit).
    """

    mode: FitMode
    multiple: int
    size: Optional[tuple[int, int]] = None
    interpolation: str = "bicubic"

    def __post_init__(self) -> None:
        if self.mode == "pad" and self.size is not None:
            raise NectarGANError("--size goes with --crop or --resize; --pad keeps every image's own size")
        if self.mode == "resize" and self.size is None:
            raise NectarGANError("--resize needs --size N (the run records no training size)")
        if self.size is not None and any(side % self.multiple or side <= 0 for side in self.size):
            height, width = self.size
            valid = [max(round_up(side, self.multiple), self.multiple) for side in self.size]
            raise NectarGANError(f"--size {height}x{width}: height and width must be multiples of {self.multiple} "
                                 f"for this generator, e.g. {valid[0]}x{valid[1]}")

    def input_shape(self, height: int, width: int) -> tuple[int, int]:
        """The generator's input size for an image of ``height x width``."""
        if self.mode == "pad":
            return round_up(height, self.multiple), round_up(width, self.multiple)
        if self.mode == "resize":
            return self.size  # type: ignore[return-value]
        crop = self.size or (height // self.multiple * self.multiple, width // self.multiple * self.multiple)
        if crop[0] > height or crop[1] > width or 0 in crop:
            raise NectarGANError(f"a {height}x{width} image is smaller than the crop "
                                 f"{max(crop[0], self.multiple)}x{max(crop[1], self.multiple)}; use --pad")
        return crop

    def prepare(self, images: torch.Tensor) -> torch.Tensor:
        height, width = images.shape[-2:]
        target = self.input_shape(height, width)
        if self.mode == "resize":
            return F.resize(images, list(target), interpolation=INTERPOLATION[self.interpolation], antialias=True)
        if self.mode == "crop":
            return F.center_crop(images, list(target))
        top, left = (target[0] - height) // 2, (target[1] - width) // 2
        pads = (left, target[1] - width - left, top, target[0] - height - top)
        if not any(pads):
            return images
        mode = "reflect" if max(pads[:2]) < width and max(pads[2:]) < height else "replicate"
        return nnf.pad(images, pads, mode=mode)

    def restore(self, outputs: torch.Tensor, height: int, width: int) -> torch.Tensor:
        """The outputs for images that were ``height x width`` before :meth:`prepare`."""
        if self.mode == "resize":
            return F.resize(outputs, [height, width], interpolation=INTERPOLATION[self.interpolation], antialias=True)
        if self.mode == "crop":
            return outputs
        top = (outputs.shape[-2] - height) // 2
        left = (outputs.shape[-1] - width) // 2
        return outputs[..., top:top + height, left:left + width]

    def describe(self) -> str:
        if self.mode == "pad":
            return f"reflect-padded to multiples of {self.multiple}, outputs cropped back"
        if self.mode == "resize":
            return f"resized to {self.size[0]}x{self.size[1]} and back"  # type: ignore[index]
        size = f"{self.size[0]}x{self.size[1]}" if self.size else f"the largest multiples of {self.multiple}"
        return f"centre-cropped to {size}"


def to_uint8(images: torch.Tensor) -> torch.Tensor:
    """Images in [0, 1] to 8-bit pixels (any leading dimensions; one pass for a whole batch)."""
    return images.detach().float().clamp(0, 1).mul(255).round().to(torch.uint8)


#: zlib level of written PNGs. PNG is lossless at every level; on 128-256 px renderings level 1
#: encodes about 3.7x faster than PIL's default 6 for files about 4 % larger (OpenCV also writes 1).
PNG_COMPRESSION = 1


def save_png(path: Path, image: torch.Tensor, compression: int = PNG_COMPRESSION) -> Path:
    """Write a ``C x H x W`` image in [0, 1] (or already ``uint8``) as an 8-bit PNG (L, LA, RGB or RGBA
    by channel count), with zlib level ``compression`` (0-9).

    Written to a temp file and renamed, so an interrupted run leaves no half image.
    """
    channels = image.shape[0]
    if not 1 <= channels <= 4:
        raise NectarGANError(f"{path}: cannot write a {channels}-channel image as PNG (1 to 4 channels)")
    pixels = (image if image.dtype == torch.uint8 else to_uint8(image)).cpu().numpy()
    array = pixels[0] if channels == 1 else np.ascontiguousarray(pixels.transpose(1, 2, 0))
    picture = Image.fromarray(array)  # mode from the shape: L, LA, RGB or RGBA
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, lambda handle: picture.save(handle, format="PNG", compress_level=compression))
    return path
