"""The UNet generator of pix2pix, and its residual and resize-conv variants.

Level ``i`` of a depth-``d`` UNet halves the resolution on the way down and
doubles it on the way up; its width is ``min(ngf * 2**i, max_width)``. With the
defaults this is the reference ``UnetGenerator`` layer for layer (the same
parameters, norms, biases, dropout and init), written as two flat lists
instead of nested blocks:

* down ``i``: ``act -> conv 4x4 s2 -> norm``; level 0 has no activation and no
  norm, the innermost level no norm.
* up ``i``: ``act -> upsample conv -> norm [-> dropout]`` on ``cat(skip_i, x)``
  (the innermost sees only the bottleneck); level 0 has no norm, maps to
  ``out_channels`` and is followed by Tanh.

With batch norm no conv has a bias except the final one (the reference's rule,
needed for its exact parameter count); with instance norm or none every conv
has one (the reference drops them for none, leaving those layers without any
offset; we do not).

The reference's in-place LeakyReLU makes its skips carry activated features;
ours carry the raw ones. With the default ReLU decoder the outputs are the
same, since ReLU(LeakyReLU(x)) = ReLU(x).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from .errors import InputSizeError
from .layers import activation, init_weights, norm_layer, validated
from .options import UNet128Options, UNet256Options, UNetOptions, reference_dropout_layers


class Residual(nn.Module):
    """``body(x) + shortcut(x)``: a layer plus a resampled projection of its input."""

    def __init__(self, body: nn.Module, shortcut: nn.Module) -> None:
        super().__init__()
        self.body = body
        self.shortcut = shortcut

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x) + self.shortcut(x)


class UNet(nn.Module):
    """A UNet generator mapping ``(N, in_channels, H, W)`` to ``(N, out_channels, H, W)`` in [-1, 1].

    ``H`` and ``W`` must be multiples of ``2**depth`` (:attr:`size_multiple`).
    ``block="residual"`` adds to every layer a shortcut (average-pool or
    nearest-upsample, then a 1x1 conv when the width changes); the final Tanh
    comes after the last sum, so outputs stay in [-1, 1].
    """

    def __init__(
        self,
        in_channels: int = 3,
        out_channels: int = 3,
        depth: int = 8,
        ngf: int = 64,
        max_width: int = 512,
        norm: str = "batch",
        block: str = "unet",
        upsample: str = "transposed",
        resize_mode: str = "bilinear",
        down_activation: str = "leaky_relu",
        up_activation: str = "relu",
        negative_slope: float = 0.2,
        dropout_layers: int | None = None,
        dropout: float = 0.5,
        init: str = "normal",
        init_gain: float | None = None,
    ) -> None:
        super().__init__()
        if depth < 1:
            raise ValueError(f"depth must be at least 1, got {depth}")
        if norm not in {"batch", "instance", "none"}:
            raise ValueError(f"unknown norm '{norm}'; choose batch, instance or none")
        if block not in {"unet", "residual"}:
            raise ValueError(f"unknown block '{block}'; choose unet or residual")
        if upsample not in {"transposed", "resize_conv"}:
            raise ValueError(f"unknown upsample '{upsample}'; choose transposed or resize_conv")
        if dropout_layers is None:
            dropout_layers = reference_dropout_layers(depth)
        if not 0 <= dropout_layers <= max(depth - 2, 0):
            raise ValueError(
                f"dropout_layers must be between 0 and depth - 2 = {max(depth - 2, 0)}, got {dropout_layers}"
            )

        self.depth = depth
        self.size_multiple = 2**depth
        widths = [min(ngf * 2**i, max_width) for i in range(depth)]
        bias = norm != "batch"
        residual = block == "residual"
        innermost = depth - 1
        first_dropout = innermost - dropout_layers

        self.down = nn.ModuleList()
        for i in range(depth):
            in_c = in_channels if i == 0 else widths[i - 1]
            body = _sequence(
                activation(down_activation, negative_slope) if i > 0 else None,
                nn.Conv2d(in_c, widths[i], 4, 2, 1, bias=bias),
                norm_layer(norm, widths[i]) if 0 < i < innermost else None,
            )
            self.down.append(Residual(body, _down_shortcut(in_c, widths[i])) if residual else body)

        self.up = nn.ModuleList()
        for i in range(depth):
            in_c = widths[i] if i == innermost else 2 * widths[i]
            out_c = out_channels if i == 0 else widths[i - 1]
            body = _sequence(
                activation(up_activation, negative_slope),
                _upsampling_conv(in_c, out_c, upsample, resize_mode, bias=bias or i == 0),
                norm_layer(norm, out_c) if i > 0 else None,
                nn.Dropout(dropout) if first_dropout <= i < innermost and dropout > 0 else None,
            )
            self.up.append(Residual(body, _up_shortcut(in_c, out_c)) if residual else body)
        self.out = nn.Tanh()
        init_weights(self, init, init_gain)

    def check_input_size(self, height: int, width: int) -> None:
        """Raise :class:`InputSizeError`, naming the nearest valid sizes, unless both are multiples."""
        check_multiple(height, width, self.depth)

    def output_size(self, input_size: int) -> int:
        """The output side for a square input: the same, if it is a valid size."""
        self.check_input_size(input_size, input_size)
        return input_size

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` (N, in_channels, H, W) to (N, out_channels, H, W) in [-1, 1]; a size that is not a multiple of ``size_multiple`` raises InputSizeError."""
        self.check_input_size(x.shape[-2], x.shape[-1])
        skips = []
        for down in self.down:
            x = down(x)
            skips.append(x)
        for i in reversed(range(self.depth)):
            if i < self.depth - 1:
                x = torch.cat([skips[i], x], dim=1)
            x = self.up[i](x)
        return self.out(x)


def check_multiple(height: int, width: int, depth: int) -> None:
    """Raise :class:`InputSizeError` unless ``height`` and ``width`` are multiples of ``2**depth``.

    The message lists the nearest valid sizes below and above (a size of 0 is
    not offered), e.g. ``input 250x250 is not a multiple of 2**8=256;
    nearest valid sizes: 256``.
    """
    multiple = 2**depth
    if height % multiple == 0 and width % multiple == 0 and height > 0 and width > 0:
        return
    heights, widths = _neighbours(height, multiple), _neighbours(width, multiple)
    if height == width:
        sizes = [str(h) for h in heights]
    else:
        sizes = [f"{h}x{w}" for h in heights for w in widths]
    raise InputSizeError(
        f"input {height}x{width} is not a multiple of 2**{depth}={multiple}; "
        f"nearest valid sizes: {', '.join(sizes)}"
    )


def _neighbours(size: int, multiple: int) -> list[int]:
    if size % multiple == 0 and size > 0:
        return [size]
    below = size // multiple * multiple
    return [s for s in (below, below + multiple) if s > 0]


def _sequence(*layers: nn.Module | None) -> nn.Sequential:
    return nn.Sequential(*(layer for layer in layers if layer is not None))


def _upsampling_conv(in_c: int, out_c: int, upsample: str, resize_mode: str, bias: bool) -> nn.Module:
    if upsample == "transposed":
        return nn.ConvTranspose2d(in_c, out_c, 4, 2, 1, bias=bias)
    align = False if resize_mode == "bilinear" else None
    return nn.Sequential(
        nn.Upsample(scale_factor=2, mode=resize_mode, align_corners=align),
        nn.Conv2d(in_c, out_c, 3, 1, 1, bias=bias),
    )


def _down_shortcut(in_c: int, out_c: int) -> nn.Module:
    layers: list[nn.Module] = [nn.AvgPool2d(2)]
    if in_c != out_c:
        layers.append(nn.Conv2d(in_c, out_c, 1, bias=False))
    return nn.Sequential(*layers)


def _up_shortcut(in_c: int, out_c: int) -> nn.Module:
    layers: list[nn.Module] = [nn.Upsample(scale_factor=2, mode="nearest")]
    if in_c != out_c:
        layers.append(nn.Conv2d(in_c, out_c, 1, bias=False))
    return nn.Sequential(*layers)


def build_unet(**options: Any) -> UNet:
    """The generic ``unet``: options as :class:`~nectargan_models.options.UNetOptions`."""
    return UNet(**validated(UNetOptions, options, "unet").model_dump())


def build_unet_256(**options: Any) -> UNet:
    """The reference ``unet_256``: options as :class:`~nectargan_models.options.UNet256Options`."""
    return UNet(**validated(UNet256Options, options, "unet_256").model_dump())


def build_unet_128(**options: Any) -> UNet:
    """The reference ``unet_128``: options as :class:`~nectargan_models.options.UNet128Options`."""
    return UNet(**validated(UNet128Options, options, "unet_128").model_dump())
