"""Reading an image file into a float tensor in [0, 1], with a declared channel count.

torchvision's native decoders handle PNG (8 and 16 bit), JPEG and WebP
without a PIL round trip; everything else (TIFF, BMP, CMYK JPEG, ...) goes
through PIL. Either way the result is scaled by its bit depth, so a 16-bit
image keeps its full range instead of being cut to 8 bits.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from torchvision.io import ImageReadMode, decode_image, read_file
from torchvision.transforms.v2 import functional as F

from .errors import DatasetError

NATIVE_SUFFIXES = frozenset({".png", ".jpg", ".jpeg", ".webp"})
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
PNG_PALETTE = 3  # the IHDR colour type, at byte 25 of every PNG

#: PIL modes that are converted before reading pixels, and what they become.
PIL_CONVERSIONS = {"1": "L", "P": "RGB", "PA": "RGBA", "CMYK": "RGB", "YCbCr": "RGB", "LAB": "RGB",
                   "HSV": "RGB", "La": "LA", "RGBa": "RGBA", "RGBX": "RGB", "I;16B": "I", "I;16L": "I"}


def read_image(path: Path) -> torch.Tensor:
    """The image at ``path`` as float32 ``C x H x W`` in [0, 1], with the channels it stores (1-4)."""
    if path.suffix.lower() in NATIVE_SUFFIXES:
        with warnings.catch_warnings():  # torchvision 0.29 announces a move of its decoders to TorchCodec
            warnings.simplefilter("ignore", DeprecationWarning)
            try:
                data = read_file(str(path))
                if not _palette_png(data):
                    return to_unit(decode_image(data, mode=ImageReadMode.UNCHANGED))
            except RuntimeError:
                pass  # a variant torchvision does not decode: PIL below reads it or reports why not
    try:
        with Image.open(path) as image:
            return to_unit(_pil_pixels(image))
    except Exception as exc:  # noqa: BLE001 - PIL's decoders raise many types on corrupt data
        raise DatasetError(f"{path}: cannot read image: {exc}") from None


def _palette_png(data: torch.Tensor) -> bool:
    """A palette PNG, which torchvision would return as palette indices instead of colours."""
    return bytes(data[:8].tolist()) == PNG_SIGNATURE and len(data) > 25 and int(data[25]) == PNG_PALETTE


def _pil_pixels(image: Image.Image) -> torch.Tensor:
    if image.mode == "P" and "transparency" in image.info:
        image = image.convert("RGBA")
    elif image.mode in PIL_CONVERSIONS:
        image = image.convert(PIL_CONVERSIONS[image.mode])
    array = np.asarray(image)
    if array.ndim == 2:
        array = array[:, :, None]
    return torch.from_numpy(array.transpose(2, 0, 1).copy())


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
