"""Pieces shared by the generator and the discriminator: activations, norms, init, factories."""

from __future__ import annotations

from typing import Any, Mapping, TypeVar

import torch
from pydantic import BaseModel, ValidationError
from torch import nn

from nectargan_core import ConfigError, describe_errors

#: ``init_gain`` when it is left unset: the reference's std for ``normal``, neutral otherwise.
DEFAULT_GAIN = {"normal": 0.02, "xavier": 1.0, "kaiming": 1.0, "orthogonal": 1.0}

Options = TypeVar("Options", bound=BaseModel)


def activation(name: str, negative_slope: float = 0.2) -> nn.Module:
    """A fresh activation module. Never in-place: skips and shortcuts reuse the input."""
    if name == "leaky_relu":
        return nn.LeakyReLU(negative_slope)
    if name == "relu":
        return nn.ReLU()
    if name == "gelu":
        return nn.GELU()
    if name == "silu":
        return nn.SiLU()
    raise ValueError(f"unknown activation '{name}'; choose leaky_relu, relu, gelu or silu")


def norm_layer(name: str, channels: int) -> nn.Module | None:
    """The normalisation after a conv, or None. Instance norm is affine-free, as in the reference."""
    if name == "batch":
        return nn.BatchNorm2d(channels)
    if name == "instance":
        return nn.InstanceNorm2d(channels)
    if name in {"none", "spectral"}:
        return None
    raise ValueError(f"unknown norm '{name}'; choose batch, instance or none")


def init_weights(module: nn.Module, scheme: str = "normal", gain: float | None = None) -> nn.Module:
    """Initialise every conv and linear layer of ``module``; return it.

    ``normal`` draws N(0, gain) (the reference, gain 0.02); ``xavier`` and
    ``orthogonal`` use ``gain`` as torch does; ``kaiming`` scales He-normal
    (fan-in) weights by ``gain``. Biases start at 0 and BatchNorm at weight
    N(1, 0.02), bias 0, whatever the scheme. Call it before adding
    parametrizations such as spectral norm, which wrap the raw weight.
    """
    if scheme not in DEFAULT_GAIN:
        raise ValueError(f"unknown init '{scheme}'; choose {', '.join(DEFAULT_GAIN)}")
    gain = DEFAULT_GAIN[scheme] if gain is None else gain
    for layer in module.modules():
        if any(p.is_meta for p in layer.parameters(recurse=False)):
            continue  # no data to fill, and torch's meta init path imports torch._dynamo (~1.5 s)
        if isinstance(layer, (nn.Conv2d, nn.ConvTranspose2d, nn.Linear)):
            if scheme == "normal":
                nn.init.normal_(layer.weight, 0.0, gain)
            elif scheme == "xavier":
                nn.init.xavier_normal_(layer.weight, gain=gain)
            elif scheme == "kaiming":
                nn.init.kaiming_normal_(layer.weight, a=0, mode="fan_in")
                with torch.no_grad():
                    layer.weight.mul_(gain)
            else:
                nn.init.orthogonal_(layer.weight, gain=gain)
            if layer.bias is not None:
                nn.init.zeros_(layer.bias)
        elif isinstance(layer, nn.BatchNorm2d):
            nn.init.normal_(layer.weight, 1.0, 0.02)
            nn.init.zeros_(layer.bias)
    return module


def validated(model: type[Options], options: Mapping[str, Any], label: str) -> Options:
    """``options`` checked against ``model``; a one-line ConfigError naming each bad option."""
    try:
        return model.model_validate(dict(options))
    except ValidationError as exc:
        raise ConfigError(f"{label}: " + "; ".join(describe_errors(exc, model))) from None
