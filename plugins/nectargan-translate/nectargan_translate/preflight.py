"""Checks of a pix2pix config that need no training, made before a run directory exists.

A mistake found while the trainer sets up (no dataset folder, an image size
the generator cannot take, a discriminator too deep for the crop) used to
leave a ``failed`` run directory behind it. These checks find such mistakes
from the config alone, cheaply: the dataset is listed but not read, and the
networks are built on the meta device (no memory, no initialisation).
"""

from __future__ import annotations

from typing import Any, Optional

import torch

from nectargan_core.errors import ConfigError, NectarGANError
from nectargan_core.registry import Registry

from .data.check import inspect_split
from .data.listing import split_dir
from .data.options import parse_options
from .networks import build_discriminator, build_generator

#: Errors a network constructor raises for options it cannot build; anything else (a model that cannot
#: be built on the meta device, say) leaves the check to the real build.
BUILD_ERRORS = (ValueError, TypeError, NectarGANError)


def check_config(config: Any, registry: Registry) -> None:
    """Raise a one-line :class:`ConfigError` (or ``DatasetError``) for what the config gets wrong."""
    check_data(config)
    generator = meta_network("generator", lambda: build_generator(registry, config), config)
    discriminator = meta_network("discriminator", lambda: build_discriminator(registry, config), config)
    size = training_size(config)
    if size is not None:
        check_size(size, generator, discriminator, config)


def check_data(config: Any) -> None:
    """The dataset folder and its train split exist and hold pairs (listed, not read)."""
    data = config.data
    if data.name != "paired":
        return
    if not data.options.get("root"):
        raise ConfigError("data.root: no dataset folder given; set data.root (make a synthetic one with: "
                          "nectargan data synth data/synth)")
    options = parse_options(data.options)
    report = inspect_split(split_dir(options.root, options.folder("train")), options.layout, verify="none")
    if report.problems:
        raise ConfigError(f"data.root: {report.problems[0]}")


def meta_network(role: str, build: Any, config: Any) -> Optional[torch.nn.Module]:
    """The network built on the meta device, or None when it cannot be built there for other reasons."""
    choice = getattr(config.models, role)
    try:
        with torch.device("meta"):
            return build()
    except ConfigError:  # already one line naming the key at fault (a channel count the model cannot take)
        raise
    except BUILD_ERRORS as exc:
        raise ConfigError(f"models.{role}: '{choice.name}' cannot be built with these options: {exc}") from None
    except Exception:  # noqa: BLE001 - not an options mistake: the real build will say what it is
        return None


def training_size(config: Any) -> Optional[int]:
    """The side of the square training images: ``crop_size``, else ``load_size`` (None: images keep theirs)."""
    options = config.data.options
    size = options.get("crop_size") or options.get("load_size")
    return int(size) if size else None


def check_size(size: int, generator: Optional[torch.nn.Module], discriminator: Optional[torch.nn.Module],
               config: Any) -> None:
    """The training size suits the generator's size multiple and the discriminator's depth."""
    key = "data.crop_size" if config.data.options.get("crop_size") else "data.load_size"
    multiple = getattr(generator, "size_multiple", None)
    if isinstance(multiple, int) and multiple > 0 and size % multiple:
        lower, upper = size // multiple * multiple, (size // multiple + 1) * multiple
        sizes = " or ".join(str(s) for s in (lower, upper) if s > 0)
        raise ConfigError(
            f"{key}: {size} is not a multiple of {multiple}, which models.generator "
            f"('{config.models.generator.name}') needs for its inputs; use {sizes}, or a generator with "
            "fewer downsamplings (depth)")
    check_input = getattr(generator, "check_input_size", None)
    if callable(check_input):  # e.g. a ResNet's reflection padding needs a minimum size
        try:
            check_input(size, size)
        except (ValueError, NectarGANError) as exc:
            raise ConfigError(f"{key}: {size}: {exc}; raise {key} or choose another models.generator") from None
    output_size = getattr(discriminator, "output_size", None)
    if callable(output_size):
        try:
            output_size(size)
        except ValueError as exc:
            raise ConfigError(f"{key}: {exc}; raise {key} or use fewer layers in models.discriminator "
                              "(n_layers)") from None
