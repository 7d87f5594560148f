"""The PixelGAN discriminator: a PatchGAN whose patch is one pixel (1x1 convs only).

With the defaults it is the reference ``PixelDiscriminator`` (``--netD pixel``)::

    C(ndf) 1x1 -> LeakyReLU -> C(2 ndf) 1x1 -> norm -> LeakyReLU -> C(1) 1x1

It judges colour statistics only, never structure; the logit map has the
input's size. As in the reference, the first conv always has a bias and the
other two have one only without batch norm.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from .errors import InputSizeError
from .layers import init_weights, norm_layer, validated
from .options import PixelGANOptions


class PixelGAN(nn.Module):
    """One logit per pixel of ``cat(A, B)`` (or of B alone when not ``conditional``)."""

    def __init__(
        self,
        input_channels: int = 3,
        target_channels: int = 3,
        conditional: bool = True,
        ndf: int = 64,
        norm: str = "batch",
        negative_slope: float = 0.2,
        init: str = "normal",
        init_gain: float | None = None,
    ) -> None:
        super().__init__()
        if norm not in {"batch", "instance", "none"}:
            raise ValueError(f"unknown norm '{norm}'; choose batch, instance or none")
        self.conditional = conditional
        self.in_channels = input_channels + target_channels if conditional else target_channels
        bias = norm != "batch"
        layers = [
            nn.Conv2d(self.in_channels, ndf, 1),
            nn.LeakyReLU(negative_slope),
            nn.Conv2d(ndf, 2 * ndf, 1, bias=bias),
            norm_layer(norm, 2 * ndf),
            nn.LeakyReLU(negative_slope),
            nn.Conv2d(2 * ndf, 1, 1, bias=bias),
        ]
        self.net = nn.Sequential(*(layer for layer in layers if layer is not None))
        init_weights(self, init, init_gain)

    #: Side of the input patch behind each logit.
    receptive_field = 1

    def output_size(self, input_size: int) -> int:
        """The logit map has the input's size (any size of at least 1)."""
        if input_size < 1:
            raise InputSizeError(f"input size {input_size} is too small for pixelgan: it needs at least 1")
        return input_size

    def forward(self, *images: torch.Tensor) -> torch.Tensor:
        """One logit per pixel of ``D(a, b)``, ``D(torch.cat([a, b], 1))`` or, unconditional, ``D(b)``."""
        x = images[0] if len(images) == 1 else torch.cat(images, dim=1)
        if x.shape[1] != self.in_channels:
            raise ValueError(
                f"pixelgan expects {self.in_channels} input channels in total, got {x.shape[1]}; "
                "pass D(a, b) or D(torch.cat([a, b], 1)) for a conditional discriminator"
            )
        return self.net(x)


def build_pixelgan(**options: Any) -> PixelGAN:
    """``pixelgan``: options as :class:`~nectargan_models.options.PixelGANOptions`."""
    return PixelGAN(**validated(PixelGANOptions, options, "pixelgan").model_dump())
