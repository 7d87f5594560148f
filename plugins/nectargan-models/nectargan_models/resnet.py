"""The ResNet generator of CycleGAN (Johnson et al.'s style-transfer network), and a resize-conv variant.

With the defaults (``resnet_9blocks``) it is the reference ``ResnetGenerator``
layer for layer, with the same parameters, norms, biases and init::

    reflect-pad 3, conv 7x7 (ngf), norm, ReLU
    depth x  [conv 3x3 s2 (width doubles), norm, ReLU]
    n_blocks x residual block: x + [pad 1, conv 3x3, norm, ReLU, (dropout), pad 1, conv 3x3, norm](x)
    depth x  [conv-transpose 3x3 s2 (output padding 1, width halves), norm, ReLU]
    reflect-pad 3, conv 7x7 (out_channels), Tanh

As in the reference, the convs have a bias only when the norm is not batch
norm (and the last conv always has one). Unlike the reference, ``norm: none``
keeps the biases, so layers without a norm still have an offset.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from .errors import InputSizeError
from .layers import init_weights, norm_layer, validated
from .options import ResNet6Options, ResNet9Options, ResNetOptions
from .unet import check_multiple

#: Padding modules of the residual blocks' 3x3 convs (``zero`` pads inside the conv instead).
PADDING = {"reflect": nn.ReflectionPad2d, "replicate": nn.ReplicationPad2d}


class ResidualBlock(nn.Module):
    """``x + body(x)`` at constant width: two padded 3x3 convs with a norm after each, ReLU between."""

    def __init__(self, width: int, norm: str = "instance", padding: str = "reflect", dropout: float = 0.0,
                 bias: bool = True) -> None:
        super().__init__()
        conv_padding = 1 if padding == "zero" else 0

        def padded_conv() -> list[nn.Module | None]:
            pad = PADDING[padding](1) if padding != "zero" else None
            return [pad, nn.Conv2d(width, width, 3, padding=conv_padding, bias=bias), norm_layer(norm, width)]

        self.body = _sequence(
            *padded_conv(), nn.ReLU(), nn.Dropout(dropout) if dropout > 0 else None, *padded_conv(),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.body(x)


class ResNetGenerator(nn.Module):
    """A ResNet generator mapping ``(N, in_channels, H, W)`` to ``(N, out_channels, H, W)`` in [-1, 1].

    ``H`` and ``W`` must be multiples of ``2**depth`` (:attr:`size_multiple`, 4
    for the reference): other sizes would come back at another size.
    """

    def __init__(
        self,
        in_channels: int = 3,
        out_channels: int = 3,
        ngf: int = 64,
        depth: int = 2,
        n_blocks: int = 9,
        norm: str = "instance",
        padding: str = "reflect",
        dropout: float = 0.0,
        upsample: str = "transposed",
        resize_mode: str = "bilinear",
        init: str = "normal",
        init_gain: float | None = None,
    ) -> None:
        super().__init__()
        if depth < 0 or n_blocks < 0:
            raise ValueError(f"depth and n_blocks must not be negative, got {depth} and {n_blocks}")
        if norm not in {"batch", "instance", "none"}:
            raise ValueError(f"unknown norm '{norm}'; choose batch, instance or none")
        if padding not in {"reflect", "replicate", "zero"}:
            raise ValueError(f"unknown padding '{padding}'; choose reflect, replicate or zero")
        if upsample not in {"transposed", "resize_conv"}:
            raise ValueError(f"unknown upsample '{upsample}'; choose transposed or resize_conv")
        self.depth = depth
        self.size_multiple = 2**depth
        # reflection padding needs more pixels than it adds: 3 at the input, 1 at the bottleneck
        self.min_input_size = max(4, self.size_multiple * (2 if padding == "reflect" else 1))
        bias = norm != "batch"
        widths = [ngf * 2**i for i in range(depth + 1)]

        self.stem = _sequence(nn.ReflectionPad2d(3), nn.Conv2d(in_channels, ngf, 7, bias=bias),
                              norm_layer(norm, ngf), nn.ReLU())
        self.down = nn.ModuleList(
            _sequence(nn.Conv2d(widths[i], widths[i + 1], 3, 2, 1, bias=bias), norm_layer(norm, widths[i + 1]),
                      nn.ReLU())
            for i in range(depth)
        )
        self.blocks = nn.Sequential(*(ResidualBlock(widths[-1], norm, padding, dropout, bias)
                                      for _ in range(n_blocks)))
        self.up = nn.ModuleList(
            _sequence(_upsampling_conv(widths[i], widths[i - 1], upsample, resize_mode, bias),
                      norm_layer(norm, widths[i - 1]), nn.ReLU())
            for i in range(depth, 0, -1)
        )
        self.head = nn.Sequential(nn.ReflectionPad2d(3), nn.Conv2d(ngf, out_channels, 7), nn.Tanh())
        init_weights(self, init, init_gain)

    def check_input_size(self, height: int, width: int) -> None:
        """Raise :class:`~nectargan_models.errors.InputSizeError` unless both are multiples of 2**depth
        and at least :attr:`min_input_size`."""
        check_multiple(height, width, self.depth)
        if min(height, width) < self.min_input_size:
            raise InputSizeError(f"input {height}x{width} is too small for this resnet generator: height and width "
                                 f"must be at least {self.min_input_size} (reflection padding needs more pixels "
                                 "than it adds)")

    def output_size(self, input_size: int) -> int:
        """The output side for a square input: the same, if it is a valid size."""
        self.check_input_size(input_size, input_size)
        return input_size

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` (N, in_channels, H, W) to (N, out_channels, H, W) in [-1, 1]; a size that is not a multiple of ``size_multiple`` raises InputSizeError."""
        self.check_input_size(x.shape[-2], x.shape[-1])
        x = self.stem(x)
        for down in self.down:
            x = down(x)
        x = self.blocks(x)
        for up in self.up:
            x = up(x)
        return self.head(x)


def _sequence(*layers: nn.Module | None) -> nn.Sequential:
    return nn.Sequential(*(layer for layer in layers if layer is not None))


def _upsampling_conv(in_c: int, out_c: int, upsample: str, resize_mode: str, bias: bool) -> nn.Module:
    if upsample == "transposed":
        return nn.ConvTranspose2d(in_c, out_c, 3, 2, 1, output_padding=1, bias=bias)
    align = False if resize_mode == "bilinear" else None
    return nn.Sequential(
        nn.Upsample(scale_factor=2, mode=resize_mode, align_corners=align),
        nn.Conv2d(in_c, out_c, 3, 1, 1, bias=bias),
    )


def build_resnet(**options: Any) -> ResNetGenerator:
    """The generic ``resnet``: options as :class:`~nectargan_models.options.ResNetOptions`."""
    return ResNetGenerator(**validated(ResNetOptions, options, "resnet").model_dump())


def build_resnet_9blocks(**options: Any) -> ResNetGenerator:
    """The reference ``resnet_9blocks``: options as :class:`~nectargan_models.options.ResNet9Options`."""
    return ResNetGenerator(**validated(ResNet9Options, options, "resnet_9blocks").model_dump())


def build_resnet_6blocks(**options: Any) -> ResNetGenerator:
    """The reference ``resnet_6blocks``: options as :class:`~nectargan_models.options.ResNet6Options`."""
    return ResNetGenerator(**validated(ResNet6Options, options, "resnet_6blocks").model_dump())
