"""The pix2pix trainer's config: the shared translation sections, one generator and one discriminator.

These fields become top-level sections of the run config when
``trainer: pix2pix`` is selected (:mod:`nectargan_translate.options` says what
each section holds).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from nectargan_core import PrecisionSection, Registry
from nectargan_losses import LossSection
from nectargan_translate import (DISCRIMINATOR_CHANNELS, GENERATOR_CHANNELS, DataChoice, ExamplesSection, ModelsSection,
                                 OptimSection, TestSection, ValidationSection, data_channels)


class Pix2pixOptions(BaseModel):
    """Sections the pix2pix trainer adds to the run config."""

    @staticmethod
    def resolve_config(config: Any, registry: Registry) -> dict[str, str]:
        """Write the data's channel counts into the networks' options, so the config says what is built.

        The networks are built with ``data.in_channels`` / ``data.out_channels``
        whatever their own options say; recording those counts in
        ``models.generator`` and ``models.discriminator`` keeps ``config.yaml``,
        ``config show``, checkpoints, reports and export sidecars truthful.
        Returns ``{network option: data key}`` for each value it set.
        """
        sources = dict(zip(("in_channels", "out_channels"), data_channels(config)))
        derived: dict[str, str] = {}
        for role, mapping in (("generator", GENERATOR_CHANNELS), ("discriminator", DISCRIMINATOR_CHANNELS)):
            choice = getattr(config.models, role)
            options = registry.get("model", choice.name).options
            fields = options.model_fields if options is not None else {}
            extra = choice.__pydantic_extra__
            for option, key in mapping.items():
                if option in fields and extra is not None:
                    extra[option] = sources[key]
                    derived[f"models.{role}.{option}"] = f"data.{key}"
        return derived

    data: DataChoice = Field(default_factory=DataChoice, validate_default=True,
                             description="Dataset (paired by default) and its options")
    models: ModelsSection = Field(default_factory=ModelsSection, description="Generator and discriminator")
    loss: LossSection = Field(default_factory=LossSection, description="Loss spec, GAN objective and edits")
    optim: OptimSection = Field(default_factory=OptimSection, description="Optimizers and LR schedules")
    precision: PrecisionSection = Field(default_factory=PrecisionSection, description="Autocast and memory format")
    validation: ValidationSection = Field(default_factory=ValidationSection, description="Validation metrics")
    examples: ExamplesSection = Field(default_factory=ExamplesSection, description="Example image grids")
    test: TestSection = Field(default_factory=TestSection, description="How nectargan test runs the generator")
