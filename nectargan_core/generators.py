"""Deprecated: ``GeneratorSpec`` moved to ``nectargan_translate`` (this module goes in the next release).

``nectargan_core.GeneratorSpec`` still works, with a DeprecationWarning; the
inference commands read any object with ``model``, ``in_channels`` and
``out_channels``, so trainers that return this class keep working meanwhile.

What a trainer tells the inference commands about its generators.

``nectargan test``, ``predict`` and ``export`` read a generator out of a
checkpoint. Which tracked network that is, and how to rebuild it from the
checkpoint's stored config, only the trainer that wrote the checkpoint knows:
pix2pix has one generator (``generator``), CycleGAN two (``G_A`` for A to B,
``G_B`` for B to A). A trainer says so with two class-level declarations
(now on ``nectargan_translate.TranslationTrainer``)::

    class CycleGANTrainer(Trainer):
        generators = {"AtoB": "G_A", "BtoA": "G_B"}   # direction -> tracked name, default first

        @classmethod
        def generator_spec(cls, config, direction):
            a, b = config.data.options["in_channels"], config.data.options["out_channels"]
            return GeneratorSpec(config.models.generator, *((a, b) if direction == "AtoB" else (b, a)))

The commands then build ``spec.model`` (a registered model and its options)
with the spec's channel counts, load ``checkpoint["state"][generators[direction]]``
into it, and run it. Torch-free: declaring these imports nothing heavy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: The translation directions a trainer may declare generators for.
DIRECTIONS = ("AtoB", "BtoA")


@dataclass(frozen=True)
class GeneratorSpec:
    """How the generator of one direction is built from a run's config (its weights come from the checkpoint).

    ``model`` is the config's choice of a registered model (``.name`` and
    ``.options``, e.g. ``config.models.generator``); ``in_channels`` and
    ``out_channels`` are the image channels it reads and writes, passed to the
    model when its options declare them.
    """

    model: Any
    in_channels: int
    out_channels: int
