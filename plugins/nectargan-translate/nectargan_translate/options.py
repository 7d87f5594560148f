"""Config sections image-translation trainers share (torch-free).

A trainer's options model picks the sections it needs; pix2pix takes them
all, so a pix2pix run config reads::

    trainer: pix2pix
    data: {root: data/facades, crop_size: 256}
    models:
      generator: {name: unet_256, norm: batch}
      discriminator: {name: patchgan_70}
    loss: {spec: basic, gan_mode: vanilla}
    optim: {lr_g: 2.0e-4, lr_d: 2.0e-4}
    precision: {amp: auto}
    validation: {metrics: [l1, psnr, ssim]}
    examples: {every_epochs: 1, count: 4}
    test: {mode: eval}
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal, Optional

from pydantic import Field, ValidationInfo, field_validator, model_validator

from nectargan_core import PluginError, PrecisionSection, Section, choice_of, metric_direction, registry_from
from nectargan_losses import ScheduleChoice

from .contracts import DatasetChoice

#: The metrics this plugin registers (what validation accepts where no registry is at hand).
METRIC_NAMES = ("l1", "psnr", "ssim")

DataChoice = DatasetChoice
"""The ``data`` section of a paired trainer's config: a registered dataset (default ``paired``) and its options.

Its options must declare ``batch_size`` (:class:`~nectargan_translate.contracts.DatasetChoice`).
"""
UnpairedDataChoice = choice_of("dataset", default="unpaired")
"""The ``data`` section of a trainer on two unpaired domains (default: the ``unpaired`` dataset)."""
GeneratorChoice = choice_of("model", default="unet_256")
DiscriminatorChoice = choice_of("model", default="patchgan_70")

RUN_LENGTH_LR = {"name": "pix2pix_linear", "n_epochs": None, "n_epochs_decay": None}
"""The default ``optim.lr_schedule``: the reference LR policy fitted to the run.

Constant for the first half of ``loop.epochs``, then linear decay to 0 over the second half
(200 epochs: the reference's 100 + 100).
"""


GENERATOR_CHANNELS = {"in_channels": "in_channels", "out_channels": "out_channels"}
"""Generator option -> the ``data`` key it is taken from (only for generators whose options declare it)."""
DISCRIMINATOR_CHANNELS = {"input_channels": "in_channels", "target_channels": "out_channels"}
"""Discriminator option -> the ``data`` key it is taken from (only for discriminators whose options declare it)."""


def data_channels(config: Any) -> tuple[int, int]:
    """(input channels, output channels) declared by the run's data section (3 and 3 when it declares none)."""
    options = config.data.options
    return int(options.get("in_channels", 3)), int(options.get("out_channels", 3))


class ModelsSection(Section):
    """The two networks. Channel counts come from ``data`` and override the models' own options."""

    generator: GeneratorChoice = Field(default_factory=GeneratorChoice, validate_default=True,
                                       description="Registered generator and its options")
    discriminator: DiscriminatorChoice = Field(default_factory=DiscriminatorChoice, validate_default=True,
                                               description="Registered discriminator and its options")


class OptimSection(Section):
    """Adam for G and D, their LR schedules, and how updates are made."""

    lr_g: float = Field(2e-4, gt=0, description="Generator learning rate")
    lr_d: float = Field(2e-4, gt=0, description="Discriminator learning rate")
    beta1: float = Field(0.5, ge=0, lt=1, description="Adam beta1 (both networks)")
    beta2: float = Field(0.999, ge=0, lt=1, description="Adam beta2 (both networks)")
    weight_decay: float = Field(0.0, ge=0, description="Adam weight decay (L2, both networks)")
    implementation: Literal["auto", "fused", "foreach", "single", "default"] = Field(
        "auto", description="Adam kernel: auto (fused where the device supports it), fused, foreach, single "
                            "(per-tensor loop), default (torch's own choice, as the reference: foreach on CUDA, "
                            "single on CPU)")
    lr_schedule: ScheduleChoice = Field(default_factory=lambda: ScheduleChoice(**RUN_LENGTH_LR), validate_default=True,
                                        description="LR multiplier schedule of G (and of D unless lr_schedule_d)")
    lr_schedule_d: Optional[ScheduleChoice] = Field(None, description="Separate LR schedule for D (null: same as G)")
    gradient_accumulation: int = Field(1, ge=1, description="Batches whose gradients are summed per update")
    grad_clip: Optional[float] = Field(None, gt=0, description="Clip each network's gradient norm to this")
    d_every: int = Field(1, ge=1, description="Update D every N steps (trainers that declare it: pix2pix)")
    g_every: int = Field(1, ge=1, description="Update G every N steps (d_every=1, g_every=5: 5 D updates per G; "
                                              "trainers that declare it: pix2pix)")


def registered_metrics(names: list[str], info: ValidationInfo) -> list[str]:
    """``names`` if each is a registered metric (a field validator for a trainer's ``metrics`` list)."""
    registry = registry_from(info)
    for name in names:
        if name in METRIC_NAMES:  # always this plugin's (evaluation.metric_functions), whoever else has the name
            continue
        if registry is not None:  # another bare name that two plugins register is refused, naming both
            try:
                registry.get("metric", name)
            except PluginError as exc:
                raise ValueError(str(exc)) from None
        elif name not in METRIC_NAMES:
            raise ValueError(f"unknown metric '{name}'; available: {', '.join(METRIC_NAMES)}")
    return names


UPDATE_RATIO = "update_ratio"
"""The capability of a trainer whose step honours ``optim.d_every`` and ``optim.g_every`` (see
``TranslationTrainer.updates_due``); a config that sets either above 1 for another trainer is refused."""


class ValidationSection(Section):
    """What validation measures, and when training stops early."""

    metrics: list[str] = Field(
        default_factory=lambda: ["l1", "psnr", "ssim"],
        description="Metrics on the val split: l1, psnr, ssim, or any a plugin registers (nectargan plugins list)")
    eval_mode: bool = Field(
        True, description="Run G in eval mode (dropout off, running BN statistics). false: the reference's "
                          "test behaviour (dropout on, batch statistics; BN running statistics are left untouched)")
    max_batches: Optional[int] = Field(None, ge=1, description="Validate on at most N batches (null: all)")
    early_stop_metric: Optional[str] = Field(None, description="Stop when this metric (e.g. psnr) stops improving")
    early_stop_mode: Literal["auto", "min", "max"] = Field(
        "auto", description="Which way early_stop_metric improves: min, max, or auto (as the metric is registered: "
                            "l1 lower, psnr/ssim higher)")
    early_stop_patience: int = Field(10, ge=1, description="Validations without improvement before stopping")
    early_stop_min_delta: float = Field(0.0, ge=0, description="Smallest change that counts as improvement")

    @field_validator("metrics")
    @classmethod
    def _registered(cls, names: list[str], info: ValidationInfo) -> list[str]:
        return registered_metrics(names, info)

    @model_validator(mode="after")
    def _metric_known(self, info: ValidationInfo) -> "ValidationSection":
        if self.early_stop_metric is not None:
            if self.early_stop_metric.removeprefix("val/") not in self.metrics:
                raise ValueError(f"early_stop_metric '{self.early_stop_metric}' is not among metrics "
                                 f"({', '.join(self.metrics)})")
            try:
                metric_direction(self.early_stop_metric, self.early_stop_mode, registry_from(info))
            except ValueError as exc:
                raise ValueError(f"{exc}; set early_stop_mode: min or max") from None
        return self


class ExamplesSection(Section):
    """Example grids (input | output | target) of fixed images, to watch the generator learn."""

    every_epochs: Optional[int] = Field(1, ge=1, description="Write a grid every N epochs (null: never)")
    count: int = Field(4, ge=1, le=64, description="How many images, spread over the split (one from each "
                                                    "of count equal stretches, drawn by run.seed)")
    split: Literal["val", "test", "train"] = Field("val", description="Where the images come from (train if "
                                                                       "the split is missing)")


class TestSection(Section):
    """How ``nectargan test`` runs the generator by default (its --mode overrides it)."""

    __test__: ClassVar[bool] = False  # not a pytest test class, whatever its name

    mode: Literal["eval", "train"] = Field(
        "eval", description="eval: dropout off, BN running statistics; train: the reference's test.py, which never "
                            "calls eval() (dropout on, statistics of each batch; the saved weights are not changed)")
