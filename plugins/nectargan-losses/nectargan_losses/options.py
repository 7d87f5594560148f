"""Options models of every loss, GAN objective and schedule (no torch here).

The plugin module imports this file to register options; keeping torch out
keeps ``nectargan --help`` and ``nectargan plugins list`` fast.
"""

from __future__ import annotations

from typing import Annotated, Literal, Optional

from pydantic import Field, ValidationInfo, field_validator

from nectargan_core import MAX_IMAGE_SIDE, ComponentChoice, Section, at_most, choice_of

ScheduleChoice = choice_of("schedule")
"""A registered schedule picked by name, with its options (``{name: cosine, ...}``).

The type of every ``schedule`` field: loss weight schedules, LR schedules, a warm-up's ``then``.
"""

#: ReLU outputs of VGG19's feature extractor, in network order (block_index).
VGG19_LAYERS: tuple[str, ...] = tuple(
    f"relu{block}_{i}" for block, convs in enumerate((2, 2, 4, 4, 4), start=1) for i in range(1, convs + 1)
)
VGG_DEFAULT_LAYERS = ["relu1_2", "relu2_2", "relu3_3"]
VGG_WEIGHTS_HELP = (
    "loss 'vgg' needs VGG19 weights from a local file (nothing is downloaded at run time): "
    "on a machine with internet run python -c \"import torch, torchvision; "
    "torch.save(torchvision.models.vgg19(weights='IMAGENET1K_V1').state_dict(), 'vgg19.pth')\" "
    "and set the term's options.weights to that file, e.g. --set loss.terms.vgg.options.weights=vgg19.pth"
)

Unit = Literal["epoch", "step"]


# -- losses -------------------------------------------------------------------
class SmoothL1Options(Section):
    beta: float = Field(1.0, gt=0, description="Error size where the loss turns from quadratic to linear")


class CharbonnierOptions(Section):
    eps: float = Field(1e-3, gt=0, description="Smoothing term: mean(sqrt(diff^2 + eps^2))")


class SobelOptions(Section):
    mode: Literal["magnitude", "gradients"] = Field(
        "magnitude", description="Compare gradient magnitudes, or the x and y gradients themselves"
    )
    eps: float = Field(1e-6, ge=0, description="Added under the square root of the magnitude (finite gradients at 0)")


class SSIMOptions(Section):
    kernel_size: Annotated[int, at_most(MAX_IMAGE_SIDE, "the window cannot be larger than the largest image")] = Field(
        11, ge=3, description="Window size (odd); used when gaussian is false")
    sigma: float = Field(1.5, gt=0, description="Gaussian window standard deviation")
    gaussian: bool = Field(True, description="Gaussian window (true) or uniform window (false)")

    @field_validator("kernel_size")
    @classmethod
    def _odd(cls, value: int) -> int:
        if value % 2 == 0:
            raise ValueError("must be odd")
        return value


class VGGOptions(Section):
    weights: Optional[str] = Field(
        None, validate_default=True, description="Local file with VGG19 weights (torchvision state_dict)"
    )
    layers: list[str] = Field(
        default_factory=lambda: list(VGG_DEFAULT_LAYERS), description="VGG19 ReLU outputs to compare"
    )
    layer_weights: Optional[list[float]] = Field(None, description="One weight per layer (default: all 1)")
    criterion: Literal["l1", "l2"] = Field("l1", description="Distance between feature maps")

    @field_validator("weights")
    @classmethod
    def _weights(cls, value: Optional[str]) -> str:
        if not value:
            raise ValueError(VGG_WEIGHTS_HELP)
        return value

    @field_validator("layers")
    @classmethod
    def _layers(cls, value: list[str]) -> list[str]:
        if not value:
            raise ValueError("give at least one layer")
        unknown = [name for name in value if name not in VGG19_LAYERS]
        if unknown:
            raise ValueError(f"unknown VGG19 layer {unknown[0]!r}; available: {', '.join(VGG19_LAYERS)}")
        if len(set(value)) != len(value):
            raise ValueError("a layer is listed twice")
        return value

    @field_validator("layer_weights")
    @classmethod
    def _layer_weights(cls, value: Optional[list[float]], info: ValidationInfo) -> Optional[list[float]]:
        layers = info.data.get("layers")
        if value is not None and layers is not None and len(value) != len(layers):
            raise ValueError(f"{len(value)} values for {len(layers)} layers")
        return value


# -- GAN objectives -----------------------------------------------------------
class GANOptions(Section):
    gp_weight: float = Field(0.0, ge=0, description="Gradient penalty weight lambda (0: no penalty)")


class LabelledGANOptions(GANOptions):
    real_label: float = Field(1.0, description="Target for real patches (e.g. 0.9 for one-sided smoothing)")
    fake_label: float = Field(0.0, description="Target for fake patches")


class WGANGPOptions(GANOptions):
    gp_weight: float = Field(10.0, ge=0, description="Gradient penalty weight lambda")


# -- schedules ----------------------------------------------------------------
def check_exponential(start_value: float, end_value: float) -> None:
    """Geometric interpolation needs two non-zero values of the same sign."""
    if start_value * end_value <= 0:
        raise ValueError(
            "exponential needs start_value and end_value non-zero and of the same sign "
            "(use a small value such as 1e-3 instead of 0)"
        )


def _end_after_start(value: float, info: ValidationInfo) -> float:
    """Schedules change between ``start`` and ``end``; an empty or reversed span is a mistake."""
    if "start" in info.data and value <= info.data["start"]:
        raise ValueError(f"must be greater than start ({info.data['start']:g})")
    return value


class ConstantOptions(Section):
    value: float = Field(1.0, description="The value at every position")
    unit: Unit = Field("epoch", description="Position the schedule reads: epoch (from 0) or global step")


class RampOptions(Section):
    unit: Unit = Field("epoch", description="Position the schedule reads: epoch (from 0) or global step")
    start_value: float = Field(1.0, description="Value at and before start")
    end_value: float = Field(0.0, description="Value at and after end")
    start: float = Field(0.0, ge=0, description="Where the change begins (epoch or step)")
    end: float = Field(..., description="Where the change ends (epoch or step)")

    _end = field_validator("end")(_end_after_start)


class ExponentialOptions(RampOptions):
    start_value: float = Field(1.0, description="Value at and before start (non-zero)")
    end_value: float = Field(0.01, description="Value at and after end (non-zero, same sign)")

    @field_validator("end_value")
    @classmethod
    def _signs(cls, value: float, info: ValidationInfo) -> float:
        if "start_value" in info.data:
            check_exponential(info.data["start_value"], value)
        return value


class WarmupOptions(Section):
    unit: Unit = Field("epoch", description="Position the schedule reads: epoch (from 0) or global step")
    start_value: float = Field(0.0, description="Value at and before start")
    end_value: float = Field(1.0, description="Value reached at end, kept afterwards unless 'then' is given")
    start: float = Field(0.0, ge=0, description="Where the warm-up begins")
    end: float = Field(5.0, description="Where the warm-up ends")
    then: Optional[ScheduleChoice] = Field(
        None, description="Schedule used from end on, read at the same position (e.g. {name: cosine, ...})"
    )

    _end = field_validator("end")(_end_after_start)

    @field_validator("then")
    @classmethod
    def _same_unit(cls, value: Optional[ComponentChoice], info: ValidationInfo) -> Optional[ComponentChoice]:
        unit = info.data.get("unit", "epoch")
        then_unit = value.options.get("unit", unit) if value is not None else unit
        if then_unit != unit:
            raise ValueError(f"its unit ({then_unit}) must match the warm-up's unit ({unit})")
        return value


class Pix2PixLROptions(Section):
    n_epochs: Optional[int] = Field(100, ge=0, description="Epochs at the initial learning rate (null: the first "
                                                           "half of the run's epochs)")
    n_epochs_decay: Optional[int] = Field(100, ge=0, description="Epochs of linear decay towards zero (null: the "
                                                                 "run's epochs after n_epochs)")
    epoch_count: int = Field(1, ge=0, description="The reference's starting epoch count (1 unless resuming it)")
