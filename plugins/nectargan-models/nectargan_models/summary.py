"""What ``nectargan models`` reports about a network: size and geometry. Imports torch.

Networks are built on the meta device: no memory is allocated and init is a
no-op, so counting the 54M parameters of ``unet_256`` is instant. Any
plugin's model can report geometry by exposing ``output_size(input_size)``
(raising ValueError for sizes it cannot take) and a ``receptive_field`` int.
"""

from __future__ import annotations

from typing import Any, Mapping

import torch
from torch import nn

from nectargan_core.registry import Component


def build_meta(component: Component, options: Mapping[str, Any]) -> nn.Module:
    """The registered model built with ``options`` on the meta device."""
    factory = component.load()
    with torch.device("meta"):
        module = factory(**options)
    if not isinstance(module, nn.Module):
        raise TypeError(f"model '{component.name}' factory returned {type(module).__name__}, not an nn.Module")
    return module


def parameter_count(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def geometry(module: nn.Module, input_size: int) -> dict[str, Any]:
    """``receptive_field`` and ``output_size`` (or ``input_error``) where the module reports them."""
    data: dict[str, Any] = {}
    field = getattr(module, "receptive_field", None)
    if isinstance(field, int):
        data["receptive_field"] = field
    output_size = getattr(module, "output_size", None)
    if callable(output_size):
        try:
            data["output_size"] = output_size(input_size)
        except ValueError as exc:
            data["input_error"] = str(exc)
    return data
