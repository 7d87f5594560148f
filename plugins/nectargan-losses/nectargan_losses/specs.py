"""Loss subspecs: named sets of weighted terms (data only, no torch).

A term names a registered loss (compared as ``loss(fake_B, real_B)``) or
:data:`GAN`, the adversarial objective picked by the config's ``gan_mode``.
Generator terms add up to the generator's loss; discriminator terms (always
:data:`GAN`) add up to the discriminator's.
"""

from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import ConfigDict, Field, model_validator

from nectargan_core import Section

from .options import ScheduleChoice

#: The reserved loss name of the adversarial term.
GAN = "gan"


class TermSpec(Section):
    """One weighted loss term."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    loss: str = Field(..., description=f"Registered loss name, or '{GAN}' for the objective chosen by gan_mode")
    role: Literal["generator", "discriminator"] = Field("generator", description="Which network this term trains")
    weight: float = Field(1.0, ge=0, description="Constant weight (ignored when schedule is set)")
    schedule: Optional[ScheduleChoice] = Field(None, description="Weight schedule, e.g. {name: linear, ...}")
    options: dict[str, Any] = Field(default_factory=dict, description="Options of the loss")

    @model_validator(mode="after")
    def _check(self) -> "TermSpec":
        if self.role == "discriminator" and self.loss != GAN:
            raise ValueError(f"discriminator terms must use loss '{GAN}' (got '{self.loss}')")
        if self.loss == GAN and self.options:
            raise ValueError(f"the '{GAN}' term takes no options; set loss.gan_options instead")
        return self

    def weight_spec(self) -> dict[str, Any]:
        """The weight as a schedule spec: the schedule, or a constant."""
        if self.schedule is not None:
            return {"name": self.schedule.name, **self.schedule.options}
        return {"name": "constant", "value": self.weight}


class LossSpec(Section):
    """A named, weighted set of loss terms."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    description: str = ""
    """What the spec is for, shown by ``nectargan plugins list`` and the losses page."""
    terms: dict[str, TermSpec]
    """The terms by name (``l1``, ``gan``, ...); the name is the logged key (``G/l1``)."""

    def extend(self, description: str, **terms: TermSpec) -> "LossSpec":
        """This spec plus ``terms`` (new names only)."""
        clash = sorted(set(terms) & set(self.terms))
        if clash:
            raise ValueError(f"terms already in the spec: {', '.join(clash)}")
        return LossSpec(description=description, terms={**self.terms, **terms})


BASIC = LossSpec(
    description="pix2pix reference: cGAN + 100 * L1; D loss 0.5 * (real + fake)",
    terms={
        "gan": TermSpec(loss=GAN, weight=1.0),
        "l1": TermSpec(loss="l1", weight=100.0),
        "gan_d": TermSpec(loss=GAN, role="discriminator", weight=0.5),
    },
)
EXTENDED = BASIC.extend(
    "basic + L2 (10), Sobel (3) and Laplacian (1) structure terms",
    l2=TermSpec(loss="l2", weight=10.0),
    sobel=TermSpec(loss="sobel", weight=3.0),
    laplacian=TermSpec(loss="laplacian", weight=1.0),
)
BASIC_VGG = BASIC.extend(
    "basic + VGG19 perceptual (10); needs loss.terms.vgg.options.weights",
    vgg=TermSpec(loss="vgg", weight=10.0),
)
EXTENDED_VGG = EXTENDED.extend(
    "extended + VGG19 perceptual (10); needs loss.terms.vgg.options.weights",
    vgg=TermSpec(loss="vgg", weight=10.0),
)

BUILTIN_SPECS = {"basic": BASIC, "extended": EXTENDED, "basic+vgg": BASIC_VGG, "extended+vgg": EXTENDED_VGG}
