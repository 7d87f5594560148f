"""Options of every model this plugin registers.

Torch-free on purpose: the plugin module imports these at registration time,
and config validation, ``nectargan config`` and ``nectargan models show`` use
them without building a network. Each registered name has its own options
model; presets differ from the generic model only in their defaults.
"""

from __future__ import annotations

from typing import Annotated, Literal, Optional

from pydantic import Field, ValidationInfo, field_validator

from nectargan_core import MAX_IMAGE_SIDE, Section, at_most

#: Widest layer (and most image channels): one 4096-to-4096 4x4 convolution alone holds
#: 268M parameters (1 GiB in fp32); wider layers exhaust memory before training starts.
MAX_WIDTH = 4096
WIDTH_WHY = "one 4096-to-4096 4x4 convolution already holds 268M parameters (1 GiB)"
#: Most stride-2 levels: 2**13 is the largest image side NectarGAN handles, so a deeper network
#: has no input it could take.
MAX_LEVELS = MAX_IMAGE_SIDE.bit_length() - 1
LEVELS_WHY = f"each level halves the image, and images are at most {MAX_IMAGE_SIDE} = 2**{MAX_LEVELS} pixels"
Width = Annotated[int, at_most(MAX_WIDTH, WIDTH_WHY)]
Levels = Annotated[int, at_most(MAX_LEVELS, LEVELS_WHY)]
#: Most residual blocks: each adds two 3x3 convolutions (1.2M parameters at the reference's width of 256),
#: so 256 blocks already hold 300M parameters; deeper stacks exhaust memory before training starts.
MAX_BLOCKS = 256
Blocks = Annotated[int, at_most(MAX_BLOCKS, "each residual block adds two 3x3 convolutions (1.2M parameters "
                                            "at width 256): 256 blocks hold 300M")]

Activation = Literal["leaky_relu", "relu", "gelu", "silu"]
InitScheme = Literal["normal", "xavier", "kaiming", "orthogonal"]

#: Initialisation options, shared by every network of this plugin.
Init = Annotated[InitScheme, Field(description="Weight initialisation scheme")]
InitGain = Annotated[Optional[float], Field(
    gt=0, description="normal: std; xavier, orthogonal: gain; kaiming: factor on the He std "
                      "(null: 0.02 for normal, 1 otherwise)")]

DEPTH_HELP = "Number of downsamplings; inputs must be multiples of 2**depth"
RESNET_DEPTH_HELP = ("Stride-2 downsamplings before the residual blocks (the reference: 2); "
                     "inputs must be multiples of 2**depth")
N_BLOCKS_HELP = "Residual blocks at the bottleneck"
DROPOUT_LAYERS_HELP = "Decoder layers with dropout, counted outwards from the one after the innermost"


def reference_dropout_layers(depth: int) -> int:
    """How many decoder layers the reference gives dropout: its 512-to-512 middle blocks."""
    return max(depth - 5, 0)


class UNetOptions(Section):
    """A UNet generator: ``depth`` stride-2 downsamplings, mirrored decoder, concatenated skips."""

    in_channels: Width = Field(3, ge=1, description="Channels of the input image (A)")
    out_channels: Width = Field(3, ge=1, description="Channels of the generated image (B)")
    depth: Levels = Field(8, ge=1, description=DEPTH_HELP)
    ngf: Width = Field(64, ge=1, description="Width of the outermost encoder layer; doubles per level")
    max_width: Width = Field(512, ge=1, validate_default=True, description="Cap on the width of any layer")
    norm: Literal["batch", "instance", "none"] = Field("batch", description="Normalisation after each conv")
    block: Literal["unet", "residual"] = Field(
        "unet", description="unet: the reference layers; residual: each layer adds a resampled 1x1 shortcut"
    )
    upsample: Literal["transposed", "resize_conv"] = Field(
        "transposed", description="transposed: ConvTranspose2d 4x4 s2; resize_conv: Upsample + 3x3 conv"
    )
    resize_mode: Literal["bilinear", "nearest"] = Field(
        "bilinear", description="Interpolation of resize_conv upsampling"
    )
    down_activation: Activation = Field("leaky_relu", description="Activation before each encoder conv")
    up_activation: Activation = Field("relu", description="Activation before each decoder conv")
    negative_slope: float = Field(0.2, ge=0, description="Slope of leaky_relu for x < 0")
    dropout_layers: Optional[int] = Field(
        None, ge=0, validate_default=True,
        description=f"{DROPOUT_LAYERS_HELP} (null: as the reference, max(depth - 5, 0))",
    )
    dropout: float = Field(0.5, ge=0, lt=1, description="Dropout probability of those layers")
    init: Init = "normal"
    init_gain: InitGain = None

    @field_validator("max_width")
    @classmethod
    def _width(cls, value: int, info: ValidationInfo) -> int:
        ngf = info.data.get("ngf")
        if ngf is not None and value < ngf:
            raise ValueError(f"must be at least ngf ({ngf})")
        return value

    @field_validator("dropout_layers")
    @classmethod
    def _dropout_layers(cls, value: Optional[int], info: ValidationInfo) -> Optional[int]:
        depth = info.data.get("depth")
        if value is not None and depth is not None and value > max(depth - 2, 0):
            raise ValueError(
                f"{value} is too many for depth {depth}: only the {max(depth - 2, 0)} decoder layers "
                "between the innermost and the outermost can have dropout"
            )
        return value


class UNet256Options(UNetOptions):
    """The reference ``unet_256``: 8 downsamplings (256 -> 1x1), dropout in 3 decoder layers."""

    depth: Levels = Field(8, ge=1, description=DEPTH_HELP)
    dropout_layers: Optional[int] = Field(3, ge=0, validate_default=True, description=DROPOUT_LAYERS_HELP)


class UNet128Options(UNetOptions):
    """The reference ``unet_128``: 7 downsamplings (128 -> 1x1), dropout in 2 decoder layers."""

    depth: Levels = Field(7, ge=1, description=DEPTH_HELP)
    dropout_layers: Optional[int] = Field(2, ge=0, validate_default=True, description=DROPOUT_LAYERS_HELP)


class PatchGANOptions(Section):
    """A PatchGAN discriminator: one real/fake logit per overlapping patch."""

    input_channels: Width = Field(3, ge=1, description="Channels of the input image A (the condition)")
    target_channels: Width = Field(3, ge=1, description="Channels of the real or generated image B")
    conditional: bool = Field(True, description="Judge cat(A, B) (pix2pix) instead of B alone")
    n_layers: Levels = Field(3, ge=1, description="Stride-2 convs; 3 gives the 70x70 patch")
    ndf: Width = Field(64, ge=1, description="Width of the first conv; doubles per layer")
    max_width: Width = Field(512, ge=1, validate_default=True, description="Cap on the width of any layer")
    norm: Literal["batch", "instance", "none", "spectral"] = Field(
        "batch", description="batch, instance or none after each inner conv; spectral: spectral norm on every conv"
    )
    negative_slope: float = Field(0.2, ge=0, description="Slope of the LeakyReLU activations")
    init: Init = "normal"
    init_gain: InitGain = None

    @field_validator("max_width")
    @classmethod
    def _width(cls, value: int, info: ValidationInfo) -> int:
        ndf = info.data.get("ndf")
        if ndf is not None and value < ndf:
            raise ValueError(f"must be at least ndf ({ndf})")
        return value


class MultiScalePatchGANOptions(PatchGANOptions):
    """PatchGANs at several scales of the input (pix2pixHD's multi-scale discriminator)."""

    num_scales: int = Field(3, ge=1, le=6, description="How many PatchGANs: each judges the input at half the "
                                                       "size of the one before (pix2pixHD: 3)")


class ResNetOptions(Section):
    """A ResNet generator: downsampling convs, residual blocks at the bottleneck, upsampling back."""

    in_channels: Width = Field(3, ge=1, description="Channels of the input image (A)")
    out_channels: Width = Field(3, ge=1, description="Channels of the generated image (B)")
    ngf: Width = Field(64, ge=1, description="Width of the first conv; doubles per downsampling")
    depth: Levels = Field(2, ge=0, description=RESNET_DEPTH_HELP)
    n_blocks: Blocks = Field(9, ge=0, description=N_BLOCKS_HELP)
    norm: Literal["batch", "instance", "none"] = Field(
        "instance", description="Normalisation after each conv but the last (instance: affine-free, as the reference)"
    )
    padding: Literal["reflect", "replicate", "zero"] = Field(
        "reflect", description="Padding of the 3x3 convs inside the residual blocks"
    )
    dropout: float = Field(
        0.0, ge=0, lt=1, description="Dropout probability inside each residual block (0: none; the reference's "
                                     "use_dropout is 0.5)"
    )
    upsample: Literal["transposed", "resize_conv"] = Field(
        "transposed", description="transposed: ConvTranspose2d 3x3 s2; resize_conv: Upsample + 3x3 conv"
    )
    resize_mode: Literal["bilinear", "nearest"] = Field(
        "bilinear", description="Interpolation of resize_conv upsampling"
    )
    init: Init = "normal"
    init_gain: InitGain = None


class ResNet9Options(ResNetOptions):
    """The reference ``resnet_9blocks`` (CycleGAN's default generator, for 256x256 images)."""

    n_blocks: Blocks = Field(9, ge=0, description=N_BLOCKS_HELP)


class ResNet6Options(ResNetOptions):
    """The reference ``resnet_6blocks`` (CycleGAN's generator for 128x128 images)."""

    n_blocks: Blocks = Field(6, ge=0, description=N_BLOCKS_HELP)


class PixelGANOptions(Section):
    """A PixelGAN discriminator: 1x1 convs, one real/fake logit per pixel."""

    input_channels: Width = Field(3, ge=1, description="Channels of the input image A (the condition)")
    target_channels: Width = Field(3, ge=1, description="Channels of the real or generated image B")
    conditional: bool = Field(True, description="Judge cat(A, B) (pix2pix) instead of B alone")
    ndf: Width = Field(64, ge=1, description="Width of the first conv; the second has 2 * ndf")
    norm: Literal["batch", "instance", "none"] = Field("batch", description="Normalisation after the second conv")
    negative_slope: float = Field(0.2, ge=0, description="Slope of the LeakyReLU activations")
    init: Init = "normal"
    init_gain: InitGain = None
