"""The per-pair transform: sizing, augmentations and normalisation, as torchvision v2 transforms.

A v2 transform called with two ``tv_tensors.Image`` draws its random
parameters once and applies them to both, so every geometric step (resize,
crop, flips, rotations, affine, elastic) moves A and B together and the pair
stays aligned. Photometric steps run on A alone: B is the target and must
stay what the generator should produce.

All randomness comes from torch's global generator. The dataset seeds it per
sample from (seed, epoch, index) inside ``torch.random.fork_rng``, so a sample's
augmentation does not depend on the worker count, the visiting order or a resume.
"""

from __future__ import annotations

import warnings
from typing import Any, Callable, Optional

import numpy as np
import torch
from PIL import Image
from torchvision import tv_tensors
from torchvision.transforms import v2
from torchvision.transforms.v2 import functional as F

from .options import (Affine, Augmentation, Blur, ColorJitter, Elastic, Gamma, GaussianNoise, Grayscale, HFlip,
                      Jpeg, PairedDataOptions, Rot90, Split, VFlip)

INTERPOLATION = {"bicubic": v2.InterpolationMode.BICUBIC, "bilinear": v2.InterpolationMode.BILINEAR,
                 "nearest": v2.InterpolationMode.NEAREST}
PIL_RESAMPLE = {"bicubic": Image.Resampling.BICUBIC, "bilinear": Image.Resampling.BILINEAR,
                "nearest": Image.Resampling.NEAREST}


class RandomRot90(v2.Transform):
    """Rotate by a random multiple of 90 degrees; exact (no resampling)."""

    def make_params(self, flat_inputs: list[Any]) -> dict[str, Any]:
        height, width = v2.query_size(flat_inputs)
        return {"k": int(torch.randint(1, 4, ())) if height == width else 2}

    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        return tv_tensors.wrap(torch.rot90(inpt, params["k"], dims=(-2, -1)), like=inpt)


class RandomGamma(v2.Transform):
    """``x ** gamma`` with gamma drawn uniformly from ``[low, high]``."""

    def __init__(self, low: float, high: float) -> None:
        super().__init__()
        self.low, self.high = low, high

    def make_params(self, flat_inputs: list[Any]) -> dict[str, Any]:
        return {"gamma": self.low + (self.high - self.low) * float(torch.rand(()))}

    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        return F.adjust_gamma(inpt, params["gamma"])


class RandomJPEG(v2.Transform):
    """JPEG round trip of a float image at a quality drawn from ``[low, high]``.

    ``v2.JPEG`` takes only uint8 images; the pipeline works in float.
    """

    def __init__(self, low: int, high: int) -> None:
        super().__init__()
        self.low, self.high = low, high

    def make_params(self, flat_inputs: list[Any]) -> dict[str, Any]:
        return {"quality": int(torch.randint(self.low, self.high + 1, ()))}

    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        with warnings.catch_warnings():  # torchvision 0.29 announces a move of its codecs to TorchCodec
            warnings.simplefilter("ignore", DeprecationWarning)
            encoded = F.jpeg(F.to_dtype(inpt, torch.uint8, scale=True), params["quality"])
        return F.to_dtype(encoded, torch.float32, scale=True)


class PILResize(v2.Transform):
    """Resize through 8 bits with PIL, as the reference does: the result is PIL's uint8 resize, exactly.

    Each [0, 1] image is rounded to uint8, resized by ``PIL.Image.resize``
    (RGB and L images as they are, other channel counts one channel at a time,
    so an alpha channel is not premultiplied) and scaled back to [0, 1]. The
    float pipeline (:class:`v2.Resize`) keeps fractional values instead.
    """

    def __init__(self, size: tuple[int, int], interpolation: str) -> None:
        super().__init__()
        self.size = size  # (height, width)
        self.resample = PIL_RESAMPLE[interpolation]

    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        return tv_tensors.wrap(pil_resize(inpt.as_subclass(torch.Tensor), self.size, self.resample), like=inpt)


def pil_resize(image: torch.Tensor, size: tuple[int, int], resample: int) -> torch.Tensor:
    """``C x H x W`` in [0, 1] resized to ``size`` (height, width) by PIL on its uint8 pixels."""
    height, width = size
    pixels = image.clamp(0.0, 1.0).mul(255.0).round().to(torch.uint8).permute(1, 2, 0).numpy()
    if pixels.shape[2] in (1, 3):  # an L or RGB image (uint8 H x W or H x W x 3)
        source = Image.fromarray(pixels[:, :, 0] if pixels.shape[2] == 1 else pixels)
        resized = np.asarray(source.resize((width, height), resample)).reshape(height, width, -1)
    else:
        resized = np.stack([np.asarray(Image.fromarray(pixels[:, :, c]).resize((width, height), resample))
                            for c in range(pixels.shape[2])], axis=2)
    return torch.from_numpy(resized.copy()).permute(2, 0, 1).to(torch.float32) / 255.0


def resize(options: PairedDataOptions, side: int) -> v2.Transform:
    """The resize step to a ``side`` square: in float32, or through uint8 with PIL (``resize_rounding: uint8``)."""
    if options.resize_rounding == "uint8":
        return PILResize((side, side), options.interpolation)
    return v2.Resize((side, side), interpolation=INTERPOLATION[options.interpolation], antialias=True)


def geometric(spec: Augmentation, warp: v2.InterpolationMode) -> v2.Transform:
    """The paired transform of a geometric augmentation."""
    if isinstance(spec, HFlip):
        return v2.RandomHorizontalFlip(p=spec.p)
    if isinstance(spec, VFlip):
        return v2.RandomVerticalFlip(p=spec.p)
    if isinstance(spec, Rot90):
        return v2.RandomApply([RandomRot90()], p=spec.p)
    if isinstance(spec, Affine):
        return v2.RandomApply([v2.RandomAffine(spec.degrees, translate=(spec.translate, spec.translate),
                                               scale=spec.scale, shear=spec.shear, interpolation=warp)], p=spec.p)
    if isinstance(spec, Elastic):
        return v2.RandomApply([v2.ElasticTransform(spec.alpha, spec.sigma, interpolation=warp)], p=spec.p)
    raise TypeError(f"{spec.name} is not a geometric augmentation")


def photometric(spec: Augmentation, channels: int) -> Optional[v2.Transform]:
    """The A-only transform of a photometric augmentation (None when it cannot change the image)."""
    if isinstance(spec, ColorJitter):
        step: v2.Transform = v2.ColorJitter(spec.brightness, spec.contrast, spec.saturation, spec.hue)
    elif isinstance(spec, GaussianNoise):
        step = v2.GaussianNoise(sigma=spec.sigma, clip=True)
    elif isinstance(spec, Blur):
        step = v2.GaussianBlur(spec.kernel_size, sigma=spec.sigma)
    elif isinstance(spec, Gamma):
        step = RandomGamma(*spec.gamma)
    elif isinstance(spec, Grayscale):
        if channels == 1:
            return None
        step = v2.Grayscale(num_output_channels=3)
    elif isinstance(spec, Jpeg):
        step = RandomJPEG(*spec.quality)
    else:
        raise TypeError(f"{spec.name} is not a photometric augmentation")
    return v2.RandomApply([step], p=spec.p)


class PairTransform:
    """Sizes, augments and normalises one (A, B) pair of [0, 1] images to [-1, 1].

    ``geometric`` runs on A and B with shared parameters, ``photometric`` on A only
    (on its colour channels: an alpha channel is left untouched).
    """

    def __init__(self, geometric: v2.Transform, photometric: Optional[v2.Transform] = None) -> None:
        self.geometric = geometric
        self.photometric = photometric

    def __call__(self, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        a, b = self.geometric(tv_tensors.Image(a), tv_tensors.Image(b))
        # bicubic resampling overshoots [0, 1]; gamma would turn negative values into NaN
        a, b = a.as_subclass(torch.Tensor).clamp(0.0, 1.0), b.as_subclass(torch.Tensor).clamp(0.0, 1.0)
        if self.photometric is not None:
            a = _on_colour(self.photometric, a)
        return normalise(a), normalise(b)

    def single(self, image: torch.Tensor) -> torch.Tensor:
        """Sizes, augments and normalises one image on its own, as the unpaired (CycleGAN) data does:
        every step applies, with draws of its own (there is no partner to move with, nor a target to keep clean)."""
        image = self.geometric(tv_tensors.Image(image)).as_subclass(torch.Tensor).clamp(0.0, 1.0)
        if self.photometric is not None:
            image = _on_colour(self.photometric, image)
        return normalise(image)


def normalise(image: torch.Tensor) -> torch.Tensor:
    """[0, 1] to [-1, 1]: mean 0.5, std 0.5 per channel, like the reference."""
    return image.mul(2.0).sub(1.0)


def _on_colour(step: Callable[[Any], Any], image: torch.Tensor) -> torch.Tensor:
    colour, alpha = (image[:3], image[3:]) if image.shape[0] == 4 else (image, image[:0])
    return torch.cat([step(tv_tensors.Image(colour)).as_subclass(torch.Tensor), alpha])


def build_transform(options: PairedDataOptions, split: Split, channels: Optional[int] = None) -> PairTransform:
    """The transform of ``split``: random crop and ``options.augment`` for train; fixed sizing otherwise.

    ``channels``: those of the images the photometric steps see (default: ``options.in_channels``).
    """
    load, crop = options.load_size, options.crop_size
    steps: list[v2.Transform] = []
    if split == "train":
        if load is not None:
            steps.append(resize(options, load))
        if crop is not None:
            steps.append(v2.RandomCrop(crop))
        warp = v2.InterpolationMode.NEAREST if options.interpolation == "nearest" else v2.InterpolationMode.BILINEAR
        steps += [geometric(spec, warp) for spec in options.augment if spec.paired]
        colour = [photometric(spec, channels or options.in_channels) for spec in options.augment if not spec.paired]
        colour = [step for step in colour if step is not None]
        return PairTransform(_compose(steps), _compose(colour) if colour else None)
    preprocess = getattr(options, split).preprocess
    if preprocess == "center_crop":
        if load is not None:
            steps.append(resize(options, load))
        if crop is not None:
            steps.append(v2.CenterCrop(crop))
    elif preprocess == "resize":
        side = crop if crop is not None else load
        if side is not None:
            steps.append(resize(options, side))
    return PairTransform(_compose(steps))


def _compose(steps: list[v2.Transform]) -> v2.Transform:
    return v2.Compose(steps) if steps else v2.Identity()
