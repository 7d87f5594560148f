"""The PatchGAN discriminator of pix2pix: one logit per overlapping input patch.

With the defaults it is the reference ``NLayerDiscriminator`` (``basic``)::

    C(ndf) s2 -> C(2 ndf) s2 -> ... (n_layers stride-2 convs) -> C s1 -> C1 s1

all 4x4 with padding 1, LeakyReLU(0.2) after every conv but the last, a norm
after every conv but the first and the last, no sigmoid (losses take logits).
Widths double per layer up to ``max_width``. With batch norm the normalised
convs have no bias; with any other choice every conv has one.

Patch size (receptive field) and output size at a 256 input, ``ndf=64``:

======== ============== ===============
n_layers receptive field output at 256
======== ============== ===============
1        16             126 x 126
2        34             62 x 62
3        70             30 x 30
4        142            14 x 14
5        286            6 x 6
======== ============== ===============
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.nn.utils.parametrizations import spectral_norm

from .errors import InputSizeError
from .layers import init_weights, norm_layer, validated
from .options import MultiScalePatchGANOptions, PatchGANOptions

#: (kernel, stride, padding) of one conv.
Geometry = tuple[int, int, int]


def patch_geometry(n_layers: int) -> list[Geometry]:
    """The (kernel, stride, padding) of each conv of a PatchGAN with ``n_layers``."""
    return [(4, 2, 1)] * n_layers + [(4, 1, 1)] * 2


def receptive_field(n_layers: int) -> int:
    """Side of the input patch that one output logit sees (70 for ``n_layers=3``)."""
    return _receptive_field(patch_geometry(n_layers))


def output_size(input_size: int, n_layers: int) -> int:
    """Side of the logit map for a square input of side ``input_size`` (30 at 256 for ``n_layers=3``)."""
    return _output_size(input_size, patch_geometry(n_layers), f"patchgan with n_layers={n_layers}")


def _receptive_field(geometry: list[Geometry]) -> int:
    field, jump = 1, 1
    for kernel, stride, _ in geometry:
        field += (kernel - 1) * jump
        jump *= stride
    return field


def _min_input_size(geometry: list[Geometry]) -> int:
    size = 1
    for kernel, stride, padding in reversed(geometry):
        size = (size - 1) * stride + kernel - 2 * padding
    return size


def _output_size(input_size: int, geometry: list[Geometry], what: str) -> int:
    size = input_size
    for kernel, stride, padding in geometry:
        size = (size + 2 * padding - kernel) // stride + 1
    if size < 1:
        raise InputSizeError(
            f"input size {input_size} is too small for {what}: it needs at least {_min_input_size(geometry)}"
        )
    return size


class PatchGAN(nn.Module):
    """A PatchGAN discriminator returning ``(N, 1, h, w)`` logits.

    Call it as ``D(a, b)`` (the images are concatenated on the channel axis,
    condition first, as pix2pix does) or ``D(ab)`` with the concatenation
    already made; with ``conditional=False`` it takes the target alone.
    """

    def __init__(
        self,
        input_channels: int = 3,
        target_channels: int = 3,
        conditional: bool = True,
        n_layers: int = 3,
        ndf: int = 64,
        max_width: int = 512,
        norm: str = "batch",
        negative_slope: float = 0.2,
        init: str = "normal",
        init_gain: float | None = None,
    ) -> None:
        super().__init__()
        if n_layers < 1:
            raise ValueError(f"n_layers must be at least 1, got {n_layers}")
        self.n_layers = n_layers
        self.conditional = conditional
        self.in_channels = input_channels + target_channels if conditional else target_channels
        self.geometry = patch_geometry(n_layers)
        widths = [min(ndf * 2**i, max_width) for i in range(n_layers + 1)]
        bias = norm != "batch"

        layers: list[nn.Module] = [
            nn.Conv2d(self.in_channels, widths[0], 4, 2, 1),
            nn.LeakyReLU(negative_slope),
        ]
        for i in range(1, n_layers + 1):
            stride = 2 if i < n_layers else 1
            layers.append(nn.Conv2d(widths[i - 1], widths[i], 4, stride, 1, bias=bias))
            normalise = norm_layer(norm, widths[i])
            if normalise is not None:
                layers.append(normalise)
            layers.append(nn.LeakyReLU(negative_slope))
        layers.append(nn.Conv2d(widths[n_layers], 1, 4, 1, 1))
        self.model = nn.Sequential(*layers)

        init_weights(self, init, init_gain)
        if norm == "spectral":
            for layer in self.model:
                if isinstance(layer, nn.Conv2d):
                    spectral_norm(layer)

    @property
    def receptive_field(self) -> int:
        """Side of the input patch behind each output logit."""
        return _receptive_field(self.geometry)

    @property
    def min_input_size(self) -> int:
        """The smallest input side that still yields a 1x1 logit map."""
        return _min_input_size(self.geometry)

    def output_size(self, input_size: int) -> int:
        """Side of the logit map for an input of side ``input_size``; InputSizeError if too small."""
        return _output_size(input_size, self.geometry, f"patchgan with n_layers={self.n_layers}")

    def _input(self, images: tuple[torch.Tensor, ...]) -> torch.Tensor:
        x = images[0] if len(images) == 1 else torch.cat(images, dim=1)
        if x.shape[1] != self.in_channels:
            raise ValueError(
                f"patchgan expects {self.in_channels} input channels in total, got {x.shape[1]}; "
                "pass D(a, b) or D(torch.cat([a, b], 1)) for a conditional discriminator"
            )
        self.output_size(min(x.shape[-2], x.shape[-1]))
        return x

    def forward(self, *images: torch.Tensor) -> torch.Tensor:
        """Logits per patch of ``D(a, b)`` (concatenated on channels), ``D(torch.cat([a, b], 1))`` or, unconditional, ``D(b)``."""
        return self.model(self._input(images))

    def features(self, *images: torch.Tensor) -> list[torch.Tensor]:
        """The activation after each LeakyReLU, then the logits: what feature matching compares (pix2pixHD).

        Called as :meth:`forward` is; the last item is ``forward``'s result.
        """
        x = self._input(images)
        out: list[torch.Tensor] = []
        for layer in self.model:
            x = layer(x)
            if isinstance(layer, nn.LeakyReLU):
                out.append(x)
        return out + [x]


class MultiScalePatchGAN(nn.Module):
    """``num_scales`` PatchGANs, each judging the input at half the size of the one before (pix2pixHD).

    Scale 0 sees the full image; the input of scale ``k + 1`` is that of
    scale ``k`` average-pooled (3x3, stride 2, padding 1, padding not
    counted). The discriminators share their options but not their weights.
    Calling it returns one logit map per scale, full size first; the GAN
    objectives of nectargan-losses take that list and add the per-scale
    losses. :meth:`features` returns each scale's intermediate activations.
    """

    def __init__(self, num_scales: int = 3, **options: Any) -> None:
        super().__init__()
        if num_scales < 1:
            raise ValueError(f"num_scales must be at least 1, got {num_scales}")
        self.num_scales = num_scales
        self.scales = nn.ModuleList(PatchGAN(**options) for _ in range(num_scales))
        first = self.scales[0]
        self.conditional, self.n_layers, self.in_channels = first.conditional, first.n_layers, first.in_channels
        self.downsample = nn.AvgPool2d(3, stride=2, padding=1, count_include_pad=False)

    @property
    def receptive_field(self) -> int:
        """Side of the input patch behind each logit of the full-size scale (coarser scales see more)."""
        return self.scales[0].receptive_field

    @property
    def min_input_size(self) -> int:
        """The smallest input side whose coarsest scale still yields a 1x1 logit map."""
        size = self.scales[-1].min_input_size
        for _ in range(self.num_scales - 1):
            size = size * 2 - 1  # the side that the pooling halves (rounding up) to ``size``
        return size

    def output_size(self, input_size: int) -> int:
        """Side of the full-size scale's logit map; InputSizeError if the coarsest scale gets too small an input."""
        if input_size < self.min_input_size:
            raise InputSizeError(f"input size {input_size} is too small for a {self.num_scales}-scale patchgan with "
                                 f"n_layers={self.n_layers}: it needs at least {self.min_input_size}")
        return self.scales[0].output_size(input_size)

    def _inputs(self, images: tuple[torch.Tensor, ...]) -> list[torch.Tensor]:
        x = images[0] if len(images) == 1 else torch.cat(images, dim=1)
        self.output_size(min(x.shape[-2], x.shape[-1]))
        inputs = [x]
        for _ in range(self.num_scales - 1):
            inputs.append(self.downsample(inputs[-1]))
        return inputs

    def forward(self, *images: torch.Tensor) -> list[torch.Tensor]:
        """One logit map per scale, full size first; called as :class:`PatchGAN` is."""
        return [scale(x) for scale, x in zip(self.scales, self._inputs(images))]

    def features(self, *images: torch.Tensor) -> list[list[torch.Tensor]]:
        """Per scale, :meth:`PatchGAN.features` (its activations, then its logits)."""
        return [scale.features(x) for scale, x in zip(self.scales, self._inputs(images))]


def build_patchgan(**options: Any) -> PatchGAN:
    """``patchgan`` and ``patchgan_70``: options as :class:`~nectargan_models.options.PatchGANOptions`."""
    return PatchGAN(**validated(PatchGANOptions, options, "patchgan").model_dump())


def build_multiscale_patchgan(**options: Any) -> MultiScalePatchGAN:
    """``patchgan_multiscale``: options as :class:`~nectargan_models.options.MultiScalePatchGANOptions`."""
    values = validated(MultiScalePatchGANOptions, options, "patchgan_multiscale").model_dump()
    return MultiScalePatchGAN(**values)
