"""Reading an image file into a float tensor in [0, 1], with a declared channel count.

The bytes are decoded by :func:`~nectargan_translate.data.pixels.read_pixels`
(Pillow only, PNG checksums verified, EXIF orientation applied, 16-bit
samples kept); the result is scaled by its bit depth, so a 16-bit image keeps
its full range instead of being cut to 8 bits.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torchvision.transforms.v2 import functional as F

from .errors import DatasetError
from .pixels import UnreadableImage, read_pixels


def read_image(path: Path) -> torch.Tensor:
    """The image at ``path`` as float32 ``C x H x W`` in [0, 1], with the channels it stores (1-4).

    A file that cannot be read or decoded raises :class:`DatasetError` naming it (in a DataLoader
    worker too: the main process re-raises it as the same one line).
    """
    try:
        array = read_pixels(path)
    except UnreadableImage as exc:
        raise DatasetError(str(exc)) from None
    # Scale in the stored H x W x C order, then make C x H x W contiguous: one float pass, one copy.
    return to_unit(torch.from_numpy(array)).permute(2, 0, 1).contiguous()


def to_unit(pixels: torch.Tensor) -> torch.Tensor:
    """Integer or float pixels to float32 in [0, 1], scaled by their bit depth.

    PIL's 32-bit integer mode ``I`` carries 16-bit images, so it is scaled like uint16.
    """
    if pixels.dtype == torch.uint8:
        return pixels.to(torch.float32) / 255.0
    if pixels.dtype in (torch.uint16, torch.int32):
        return pixels.to(torch.float32).div_(65535.0).clamp_(0.0, 1.0)
    return pixels.to(torch.float32).clamp_(0.0, 1.0)


def to_channels(image: torch.Tensor, channels: int) -> torch.Tensor:
    """Convert a 1-4 channel image (L, LA, RGB, RGBA) to ``channels`` (1, 3 or 4).

    Colour to grey uses ITU-R 601 luma; alpha is dropped when not wanted and
    set to opaque when added.
    """
    have = image.shape[0]
    if have == channels:
        return image
    colour = image[:1] if have <= 2 else image[:3]
    if channels == 1:
        return colour if colour.shape[0] == 1 else F.rgb_to_grayscale(colour)
    rgb = colour.expand(3, -1, -1) if colour.shape[0] == 1 else colour
    if channels == 3:
        return rgb.contiguous()
    alpha = image[-1:] if have in (2, 4) else torch.ones_like(image[:1])
    return torch.cat([rgb, alpha])
