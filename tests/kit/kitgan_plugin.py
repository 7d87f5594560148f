"""Registration of the kit's test trainers (torch-free, like every plugin module).

``kitgan`` is a two-network GAN built on the TrainerKit; ``plain`` is a
trainer that does not use the kit (and declares nothing), for the config-time
refusal of options it cannot honour.
"""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import BaseModel, Field

from nectargan_core import PrecisionSection, Section, hookimpl


class KitGanSection(Section):
    """The kitgan trainer's data, networks and update settings."""

    samples: int = Field(6, ge=1, description="Training samples (noise z paired with a real x)")
    features: int = Field(4, ge=1, description="Features of z and x")
    batch_size: int = Field(2, ge=1, description="Batch size")
    accumulate: int = Field(1, ge=1, description="Gradient accumulation (batches per optimizer step)")
    norm: bool = Field(False, description="BatchNorm1d in both networks")
    implementation: Literal["fused", "foreach", "single"] = Field("single", description="Adam kernel")
    fp16_scaler: bool = Field(False, description="An enabled GradScaler per update (the fp16 path), no autocast")
    g_adv: float = Field(1.0, ge=0, description="Weight of G's adversarial term (0: G's loss ignores D)")
    detach_fake: bool = Field(True, description="Detach G's output in D's update (false: rely on freezing)")
    clip: Optional[float] = Field(None, gt=0, description="Gradient clipping of each update")
    lr: float = Field(0.01, gt=0, description="Adam's learning rate (G and D)")
    lr_decay: Optional[float] = Field(None, gt=0, description="LR schedule of G: lr * decay**k")
    lr_unit: Literal["step", "epoch"] = Field("step", description="What lr_decay's k counts: optimizer steps or epochs")
    nan_at_step: Optional[int] = Field(None, description="Make the batch of this global step NaN")
    nan_rank: Optional[int] = Field(None, description="With nan_at_step: poison only this process's batch")
    kill_at_step: Optional[int] = Field(None, description="SIGKILL this process while it trains this global step")
    nan_in: Literal["inputs", "loss", "gradients"] = Field(
        "inputs", description="inputs: NaN samples (losses, gradients and BN statistics NaN); loss: a NaN added to "
                              "each loss (the gradients stay finite: only the loss flag tells); gradients: D's "
                              "gradients only (the losses and BN statistics stay finite: only the gradients tell)")


class KitGanOptions(BaseModel):
    kitgan: KitGanSection = Field(default_factory=KitGanSection, description="kitgan trainer settings")


class KitGanAmpOptions(KitGanOptions):
    precision: PrecisionSection = Field(default_factory=PrecisionSection, description="Autocast")


class PlainSection(Section):
    """The plain trainer's settings."""

    samples: int = Field(4, ge=1, description="Training samples")


class PlainOptions(BaseModel):
    plain: PlainSection = Field(default_factory=PlainSection, description="plain trainer settings")


@hookimpl
def register_trainers(register):
    register("kitgan", "kitgan_trainer:KitGanTrainer", options=KitGanOptions,
             description="A two-network GAN on vectors, built on the TrainerKit")
    register("kitgan_amp", "kitgan_trainer:KitGanTrainer", options=KitGanAmpOptions,
             description="kitgan with a precision section: the kit's autocast follows precision.amp")
    register("plain", "kitgan_trainer:PlainTrainer", options=PlainOptions,
             description="One network, its own optimizer step, no kit")
