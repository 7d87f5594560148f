"""The ``data`` config section: where the pairs are, how they are loaded and augmented.

Torch-free on purpose: the plugin module registers :class:`PairedDataOptions`
as the options of the ``paired`` dataset, and config validation, ``nectargan
config`` and the data commands use it without importing torch.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal, Mapping, Optional, Union

from pydantic import AfterValidator, Field, ValidationError, ValidationInfo, field_validator, model_validator

from nectargan_core import (MAX_IMAGE_SIDE, Batch, ConfigError, ImageSide, Section, Workers, at_most, describe_errors,
                            plain_name)

Split = Literal["train", "val", "test"]
Channels = Literal[1, 3, 4]
SPLITS: tuple[Split, ...] = ("train", "val", "test")
#: Most batches one DataLoader worker loads ahead (torch's default is 2); each one waits in memory.
MAX_PREFETCH = 16
PREFETCH_WHY = "every batch loaded ahead waits in memory, per worker (torch's default is 2)"
#: Largest blur kernel: reflect padding needs it narrower than twice the image, so no larger
#: kernel fits an image NectarGAN handles.
MAX_KERNEL = 2 * MAX_IMAGE_SIDE - 1
KERNEL_WHY = f"a blur kernel must be narrower than twice the image side, and images are at most {MAX_IMAGE_SIDE}"
#: The augmentations a decode-once cache applies to whole batches (exact moves of pixels); any other needs
#: the per-sample worker path (see :mod:`.cache`).
CACHED_AUGMENTATIONS = frozenset({"hflip", "vflip", "rot90"})


def _ordered(value: tuple[Any, Any]) -> tuple[Any, Any]:
    if value[0] > value[1]:
        raise ValueError(f"[{value[0]}, {value[1]}] is not a range: the first value must not exceed the second")
    return value


Range = Annotated[tuple[float, float], AfterValidator(_ordered)]
PositiveRange = Annotated[tuple[Annotated[float, Field(gt=0)], Annotated[float, Field(gt=0)]],
                          AfterValidator(_ordered)]


# -- augmentations --------------------------------------------------------------
class Augmentation(Section):
    """One augmentation: ``name`` selects it, ``p`` is the chance it is applied to a sample.

    ``paired`` augmentations are geometric and move A and B together; the others are
    photometric and touch only the input A, so the target B stays a clean label.
    """

    name: str
    p: float = Field(0.5, ge=0, le=1, description="Probability of applying it to a sample")
    paired: ClassVar[bool] = True


class HFlip(Augmentation):
    """Mirror left-right."""

    name: Literal["hflip"] = "hflip"


class VFlip(Augmentation):
    """Mirror top-bottom."""

    name: Literal["vflip"] = "vflip"


class Rot90(Augmentation):
    """Rotate by 90, 180 or 270 degrees (only 180 on non-square images, so sizes keep)."""

    name: Literal["rot90"] = "rot90"


class Affine(Augmentation):
    """Random rotation, shift, zoom and shear; uncovered borders are black."""

    name: Literal["affine"] = "affine"
    degrees: float = Field(10.0, ge=0, le=180, description="Rotation drawn from [-degrees, degrees]")
    translate: float = Field(0.05, ge=0, le=1, description="Shift up to this fraction of width and height")
    scale: PositiveRange = Field((0.9, 1.1), description="Zoom factor range")
    shear: float = Field(0.0, ge=0, le=90, description="Shear drawn from [-shear, shear] degrees")


class Elastic(Augmentation):
    """Smooth random displacement field (ElasticTransform)."""

    name: Literal["elastic"] = "elastic"
    p: float = Field(0.25, ge=0, le=1, description="Probability of applying it to a sample")
    alpha: float = Field(30.0, ge=0, description="Displacement magnitude in pixels")
    sigma: Annotated[float, at_most(MAX_KERNEL // 8, KERNEL_WHY + " (the field is blurred with an 8 sigma wide kernel)")] \
        = Field(5.0, gt=0, description="Smoothness of the displacement field")

    @property
    def kernel_size(self) -> int:
        """The blur kernel torchvision's ElasticTransform uses for this sigma (odd)."""
        return int(8 * self.sigma + 1) | 1


class ColorJitter(Augmentation):
    """Random brightness, contrast, saturation and hue (A only)."""

    name: Literal["color_jitter"] = "color_jitter"
    paired: ClassVar[bool] = False
    p: float = Field(0.8, ge=0, le=1, description="Probability of applying it to a sample")
    brightness: float = Field(0.2, ge=0, description="Factor drawn from [1 - b, 1 + b]")
    contrast: float = Field(0.2, ge=0, description="Factor drawn from [1 - c, 1 + c]")
    saturation: float = Field(0.2, ge=0, description="Factor drawn from [1 - s, 1 + s]")
    hue: float = Field(0.02, ge=0, le=0.5, description="Hue shift drawn from [-h, h]")


class GaussianNoise(Augmentation):
    """Additive Gaussian noise on the [0, 1] image, clipped (A only)."""

    name: Literal["gaussian_noise"] = "gaussian_noise"
    paired: ClassVar[bool] = False
    sigma: float = Field(0.03, ge=0, description="Standard deviation of the noise")


class Blur(Augmentation):
    """Gaussian blur with a random sigma (A only)."""

    name: Literal["blur"] = "blur"
    paired: ClassVar[bool] = False
    p: float = Field(0.3, ge=0, le=1, description="Probability of applying it to a sample")
    kernel_size: Annotated[int, at_most(MAX_KERNEL, KERNEL_WHY)] = Field(5, ge=3, description="Odd kernel side in pixels")
    sigma: PositiveRange = Field((0.1, 1.5), description="Sigma range in pixels")

    @field_validator("kernel_size")
    @classmethod
    def _odd(cls, value: int) -> int:
        if value % 2 == 0:
            raise ValueError(f"must be odd (got {value})")
        return value


class Gamma(Augmentation):
    """Gamma curve ``x ** gamma`` with a random gamma (A only)."""

    name: Literal["gamma"] = "gamma"
    paired: ClassVar[bool] = False
    p: float = Field(0.3, ge=0, le=1, description="Probability of applying it to a sample")
    gamma: PositiveRange = Field((0.8, 1.25), description="Gamma range")


class Grayscale(Augmentation):
    """Replace colour by luminance, keeping the channel count (A only)."""

    name: Literal["grayscale"] = "grayscale"
    paired: ClassVar[bool] = False
    p: float = Field(0.1, ge=0, le=1, description="Probability of applying it to a sample")


class Jpeg(Augmentation):
    """Re-encode as JPEG at a random quality (A only)."""

    name: Literal["jpeg"] = "jpeg"
    paired: ClassVar[bool] = False
    p: float = Field(0.3, ge=0, le=1, description="Probability of applying it to a sample")
    quality: Annotated[tuple[Annotated[int, Field(ge=1, le=100)], Annotated[int, Field(ge=1, le=100)]],
                       AfterValidator(_ordered)] = Field((50, 95), description="JPEG quality range, 1-100")


AUGMENTATIONS: tuple[type[Augmentation], ...] = (
    HFlip, VFlip, Rot90, Affine, Elastic, ColorJitter, GaussianNoise, Blur, Gamma, Grayscale, Jpeg,
)
AugmentationSpec = Annotated[
    Union[HFlip, VFlip, Rot90, Affine, Elastic, ColorJitter, GaussianNoise, Blur, Gamma, Grayscale, Jpeg],
    Field(discriminator="name"),
]


# -- the section ----------------------------------------------------------------
class EvalSplitOptions(Section):
    """How a validation or test split is read: never augmented, never shuffled."""

    folder: str = Field(..., min_length=1, description="Sub-folder of root that holds this split")
    batch_size: Batch = Field(1, description="Batch size")
    preprocess: Literal["center_crop", "resize", "none"] = Field(
        "center_crop",
        description="center_crop: resize to load_size, then the centre crop_size square; "
                    "resize: straight to crop_size (whole image); none: original size",
    )
    max_images: Optional[int] = Field(None, ge=1, description="Use only the first N pairs (null: all)")

    @field_validator("folder")
    @classmethod
    def _plain(cls, value: str) -> str:
        return plain_name(value)


class ValSplitOptions(EvalSplitOptions):
    """How the validation split is read: never augmented, never shuffled."""

    folder: str = Field("val", min_length=1, description="Sub-folder of root that holds this split")


class TestSplitOptions(EvalSplitOptions):
    """How the test split is read: never augmented, never shuffled."""

    folder: str = Field("test", min_length=1, description="Sub-folder of root that holds this split")


class PairedDataOptions(Section):
    """Paired A/B images: layout, channels, sizes, augmentations and loading."""

    root: Optional[str] = Field(None, description="Dataset folder holding train/, val/ and test/")
    layout: Literal["auto", "aligned", "folders"] = Field(
        "auto", description="aligned: one A|B file per pair; folders: A/ and B/ matched by name; auto: detect",
    )
    direction: Literal["AtoB", "BtoA"] = Field("AtoB", description="BtoA swaps the roles of A and B")
    in_channels: Channels = Field(3, description="Channels of the input (A after direction): 1, 3 or 4")
    out_channels: Channels = Field(3, description="Channels of the target (B after direction): 1, 3 or 4")
    load_size: Optional[ImageSide] = Field(286, description="Resize both images to this square first (null: keep)")
    crop_size: Optional[ImageSide] = Field(256, description="Random square crop for training (null: none)")
    interpolation: Literal["bicubic", "bilinear", "nearest"] = Field(
        "bicubic", description="Resampling for resize; warps use bilinear, or nearest when this is nearest",
    )
    resize_rounding: Literal["none", "uint8"] = Field(
        "none", description="none: resize in float32; uint8: resize 8-bit pixels with PIL and round the result to "
                            "8 bits, bit for bit as the reference does (16-bit images lose their extra precision)",
    )
    augment: list[AugmentationSpec] = Field(
        default_factory=lambda: [HFlip()], description="Training augmentations, applied in order",
    )
    max_images: Optional[int] = Field(None, ge=1, description="Train on only the first N pairs (null: all)")
    verify: Literal["header", "full", "none"] = Field(
        "header", description="Checks at start: header reads every image header; full decodes every image",
    )
    batch_size: Batch = Field(1, description="Training batch size")
    shuffle: bool = Field(True, description="Shuffle training pairs, by run.seed and epoch")
    drop_last: bool = Field(False, description="Drop the last incomplete training batch")
    num_workers: Workers = Field(2, description="DataLoader worker processes (0: load in the main process; "
                                                 "at most 4 per CPU)")
    pin_memory: Optional[bool] = Field(None, description="Page-locked batches (null: when training on CUDA)")
    persistent_workers: bool = Field(True, description="Keep workers alive between epochs")
    prefetch_factor: Optional[Annotated[int, at_most(MAX_PREFETCH, PREFETCH_WHY)]] = Field(
        None, ge=1, description="Batches loaded ahead per worker (null: 2)")
    cache: Literal["auto", "off", "memory", "device"] = Field(
        "auto", description="Decode the training split once and crop, flip and normalise batches from it: "
                            "memory: in host RAM; device: on the training GPU (memory on a CPU run); off: decode "
                            "in the workers every epoch; auto: device, memory or off by what fits")
    val: ValSplitOptions = Field(default_factory=ValSplitOptions, description="Validation split")
    test: TestSplitOptions = Field(default_factory=TestSplitOptions, description="Test split")

    @field_validator("augment", mode="before")
    @classmethod
    def _names(cls, value: Any) -> Any:
        """Accept bare names, e.g. ``augment: [hflip, vflip]``."""
        if isinstance(value, (list, tuple)):
            return [{"name": item} if isinstance(item, str) else item for item in value]
        return value

    @field_validator("crop_size")
    @classmethod
    def _fits(cls, value: Optional[int], info: ValidationInfo) -> Optional[int]:
        load = info.data.get("load_size")
        if value is not None and load is not None and value > load:
            raise ValueError(f"{value} is larger than load_size {load}; lower crop_size or raise load_size")
        return value

    @model_validator(mode="after")
    def _kernels_fit(self) -> "PairedDataOptions":
        """A blur wider than twice the training image fails in torchvision at the first batch: refuse it now."""
        side = self.crop_size or self.load_size
        if side is None:
            return self
        for index, spec in enumerate(self.augment):
            kernel = getattr(spec, "kernel_size", None)
            if kernel is not None and kernel > 2 * side - 1:
                what = "sigma" if isinstance(spec, Elastic) else "kernel_size"
                raise ValueError(f"augment.{index} ({spec.name}): {what} gives a {kernel}-pixel blur kernel, too "
                                 f"large for {side}-pixel training images (at most {2 * side - 1}: a kernel must be "
                                 "narrower than twice the image)")
        return self

    @model_validator(mode="after")
    def _cacheable(self) -> "PairedDataOptions":
        """An explicit cache cannot apply every augmentation to a batch: refuse one it cannot, naming it."""
        if self.cache in ("memory", "device"):
            for index, spec in enumerate(self.augment):
                if spec.name not in CACHED_AUGMENTATIONS:
                    names = ", ".join(sorted(CACHED_AUGMENTATIONS))
                    raise ValueError(f"cache: {self.cache} applies only crops and {names} to batches, not "
                                     f"augment.{index} ({spec.name}); set data.cache: off (or auto, which then "
                                     "loads in the workers)")
        return self

    def folder(self, split: Split) -> str:
        """The sub-folder of ``root`` that holds ``split``."""
        return "train" if split == "train" else getattr(self, split).folder


def parse_options(options: PairedDataOptions | Mapping[str, Any],
                  model: type[PairedDataOptions] = PairedDataOptions) -> PairedDataOptions:
    """Validated ``model`` options from a model or a plain mapping; a bad value is a one-line ConfigError."""
    if isinstance(options, model):
        return options
    try:
        return model.model_validate(dict(options))
    except ValidationError as exc:
        raise ConfigError("; ".join(f"data.{line}" for line in describe_errors(exc, model))) from None
