"""The CycleGAN trainer's config sections (torch-free).

These fields become top-level sections of the run config when
``trainer: cyclegan`` is selected; the defaults are the reference's::

    trainer: cyclegan
    data: {root: datasets/horse2zebra}            # trainA/ trainB/ testA/ testB/; load 286, crop 256, flip
    models:
      generator: {name: resnet_9blocks}            # G_A: A -> B and G_B: B -> A, instance norm, no dropout
      discriminator: {name: patchgan_70, norm: instance}   # D_A judges B images, D_B judges A images
    loss: {gan_mode: lsgan, lambda_A: 10, lambda_B: 10, lambda_identity: 0.5}
    pool: {size: 50}
    optim: {lr_g: 2.0e-4, lr_d: 2.0e-4, beta1: 0.5}   # LR constant for half of loop.epochs, then decaying to 0
"""

from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import BaseModel, Field, ValidationInfo, field_validator, model_validator

from nectargan_core import PrecisionSection, Section, choice_of, registry_from
from nectargan_losses import ScheduleChoice
from nectargan_translate import RUN_LENGTH_LR, ExamplesSection, TestSection, UnpairedDataChoice, registered_metrics

GeneratorChoice = choice_of("model", default="resnet_9blocks")
DiscriminatorChoice = choice_of("model", default="patchgan_70")

DEFAULT_DISCRIMINATOR = "patchgan_70"
#: What the reference's CycleGAN changes in the default discriminator: instance norm (its --norm), one image.
DISCRIMINATOR_DEFAULTS = {"norm": "instance", "conditional": False}


class ModelsSection(Section):
    """The networks: one generator design for G_A and G_B, one discriminator design for D_A and D_B.

    Channel counts come from ``data`` (domain A's and B's) and override the
    models' own options. The discriminators judge one image (unconditional).
    """

    generator: GeneratorChoice = Field(default_factory=GeneratorChoice, validate_default=True,
                                       description="Registered generator and its options (G_A and G_B)")
    discriminator: DiscriminatorChoice = Field(
        default_factory=lambda: DiscriminatorChoice(name=DEFAULT_DISCRIMINATOR, **DISCRIMINATOR_DEFAULTS),
        validate_default=True,
        description="Registered discriminator and its options (D_A and D_B); default patchgan_70 with "
                    "norm instance")

    @model_validator(mode="before")
    @classmethod
    def _unconditional(cls, data: Any, info: ValidationInfo) -> Any:
        """Keys set on the default discriminator keep its CycleGAN defaults; every discriminator is unconditional.

        ``--set models.discriminator.ndf=32`` changes the width of the instance-norm
        default, not of a batch-norm ``patchgan_70``; a model with a ``conditional``
        option gets ``false`` unless the config says otherwise, which is refused.
        """
        if not isinstance(data, dict) or not isinstance(data.get("discriminator"), dict):
            return data
        choice = dict(data["discriminator"])
        name = choice.get("name", DEFAULT_DISCRIMINATOR)
        if name == DEFAULT_DISCRIMINATOR:
            choice = {**DISCRIMINATOR_DEFAULTS, **choice}
        else:
            registry = registry_from(info)
            if registry is not None and registry.has("model", name):
                options = registry.get("model", name).options
                if options is not None and "conditional" in options.model_fields:
                    choice.setdefault("conditional", False)
        return {**data, "discriminator": choice}

    @model_validator(mode="after")
    def _no_condition(self) -> "ModelsSection":
        if self.discriminator.options.get("conditional") is True:
            raise ValueError("discriminator.conditional: CycleGAN's discriminators judge one image (D_A domain B's, "
                             "D_B domain A's), with no condition; set it to false or leave it out")
        return self


class LossSection(Section):
    """The reference's objective: GAN terms both ways, cycle consistency and identity."""

    gan_mode: str = Field("lsgan", description="GAN objective: a registered one (lsgan, vanilla, hinge, wgan-gp, ...)")
    gan_options: dict[str, Any] = Field(default_factory=dict, description="Options of the GAN objective")
    lambda_A: float = Field(10.0, ge=0, description="Weight of the cycle loss |G_B(G_A(A)) - A|")
    lambda_B: float = Field(10.0, ge=0, description="Weight of the cycle loss |G_A(G_B(B)) - B|")
    lambda_identity: float = Field(
        0.5, ge=0, description="Identity losses, relative to the cycle weights: |G_A(B) - B| weighs "
                               "lambda_identity * lambda_B, |G_B(A) - A| lambda_identity * lambda_A (0: off)")

    @model_validator(mode="after")
    def _objective(self, info: ValidationInfo) -> "LossSection":
        registry = registry_from(info)
        if registry is not None:
            from nectargan_core import unknown_name_message
            from nectargan_losses import gan_objectives, validated_options

            objectives = gan_objectives(registry)
            if self.gan_mode not in objectives:
                raise ValueError("gan_mode: " + unknown_name_message("GAN objective", self.gan_mode, objectives))
            self.__dict__["gan_options"] = validated_options(registry, "loss", self.gan_mode, self.gan_options,
                                                             "gan_options")
        return self


class PoolSection(Section):
    """The image pools: D_A and D_B judge fakes drawn from a history of generated images."""

    size: int = Field(50, ge=0, description="Images per pool (0: D judges the current fakes only). When full, each "
                                            "new fake is, with probability 0.5, swapped for a stored one")


class OptimSection(Section):
    """Adam over G_A + G_B and over D_A + D_B, their LR schedules, and how updates are made."""

    lr_g: float = Field(2e-4, gt=0, description="Learning rate of G_A and G_B")
    lr_d: float = Field(2e-4, gt=0, description="Learning rate of D_A and D_B")
    beta1: float = Field(0.5, ge=0, lt=1, description="Adam beta1 (both optimizers)")
    beta2: float = Field(0.999, ge=0, lt=1, description="Adam beta2 (both optimizers)")
    weight_decay: float = Field(0.0, ge=0, description="Adam weight decay (L2, both optimizers)")
    implementation: Literal["auto", "fused", "foreach", "single", "default"] = Field(
        "auto", description="Adam kernel: auto (fused where the device supports it), fused, foreach, single "
                            "(per-tensor loop), default (torch's own choice, as the reference: foreach on CUDA, "
                            "single on CPU)")
    lr_schedule: ScheduleChoice = Field(
        default_factory=lambda: ScheduleChoice(**RUN_LENGTH_LR),
        description="LR multiplier schedule of G (and of D unless lr_schedule_d); the default is the reference's "
                    "policy fitted to loop.epochs: constant for the first half, then linear decay to zero "
                    "(100 + 100 for 200 epochs)")
    lr_schedule_d: Optional[ScheduleChoice] = Field(None, description="Separate LR schedule for D (null: as G's)")
    gradient_accumulation: int = Field(1, ge=1, description="Batches whose gradients are summed per update")
    grad_clip: Optional[float] = Field(None, gt=0, description="Clip the gradient norm of each update (G_A+G_B "
                                                               "together, D_A+D_B together) to this")


class ValidationSection(Section):
    """What validation measures: how well each generator's output translates back (cycle reconstruction)."""

    metrics: list[str] = Field(
        default_factory=lambda: ["l1", "psnr", "ssim"],
        description="Metrics of G_B(G_A(A)) against A (cycle_A_*) and G_A(G_B(B)) against B (cycle_B_*), "
                    "and their mean (cycle_*), on the val split: l1, psnr, ssim, or any a plugin registers")
    eval_mode: bool = Field(True, description="Run the generators in eval mode (dropout off, running BN "
                                              "statistics); false: train mode, BN statistics left untouched")
    max_batches: Optional[int] = Field(None, ge=1, description="Validate on at most N batches per domain "
                                                               "(null: all)")

    _registered = field_validator("metrics")(staticmethod(registered_metrics))


class CycleGANOptions(BaseModel):
    """Sections the CycleGAN trainer adds to the run config."""

    data: UnpairedDataChoice = Field(default_factory=UnpairedDataChoice, validate_default=True,
                             description="Dataset (unpaired by default) and its options")
    models: ModelsSection = Field(default_factory=ModelsSection, description="Generators and discriminators")
    loss: LossSection = Field(default_factory=LossSection, description="GAN objective and loss weights")
    pool: PoolSection = Field(default_factory=PoolSection, description="Image pools of generated images")
    optim: OptimSection = Field(default_factory=OptimSection, description="Optimizers and LR schedules")
    precision: PrecisionSection = Field(default_factory=PrecisionSection, description="Autocast and memory format")
    validation: ValidationSection = Field(default_factory=ValidationSection, description="Validation metrics")
    examples: ExamplesSection = Field(default_factory=ExamplesSection, description="Example image grids")
    test: TestSection = Field(default_factory=TestSection, description="How nectargan test runs the generators")
