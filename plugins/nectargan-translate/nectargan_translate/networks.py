"""Building the generator and discriminator from config choices, for training and inference alike."""

from __future__ import annotations

from typing import Any

import torch

from nectargan_core import Registry

from .contracts import check_channels
from .options import data_channels


def build_network(registry: Registry, choice: Any, **channels: int) -> torch.nn.Module:
    """The registered network ``choice.name`` with its options.

    Channel counts (``in_channels``/``out_channels`` for generators,
    ``input_channels``/``target_channels`` for discriminators) come from the
    data section and override the model's own options; they are passed only
    to models whose options declare them, so a third-party model without
    them still builds for 3-channel data (other counts are a ConfigError).
    """
    component = registry.get("model", choice.name)
    fields = component.options.model_fields if component.options is not None else {}
    check_channels(component.name, component.provided_by, fields, channels)
    options = {**choice.options, **{k: v for k, v in channels.items() if k in fields}}
    return component.load()(**options)


def build_generator(registry: Registry, config: Any) -> torch.nn.Module:
    """The generator of ``config.models.generator``, with the data section's input and output channels."""
    in_channels, out_channels = data_channels(config)
    return build_network(registry, config.models.generator, in_channels=in_channels, out_channels=out_channels)


def build_discriminator(registry: Registry, config: Any) -> torch.nn.Module:
    """The discriminator of ``config.models.discriminator``, with the data section's input and target channels."""
    in_channels, out_channels = data_channels(config)
    return build_network(registry, config.models.discriminator, input_channels=in_channels,
                         target_channels=out_channels)
