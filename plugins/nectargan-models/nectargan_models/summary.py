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

from nectargan_core import Component, PluginError


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


def geometry(module: nn.Module, input_size: int, name: str = "model") -> dict[str, Any]:
    """``receptive_field`` and ``output_size`` (or ``input_error``) where the module reports them.

    Both are optional; a module that has them in another form (a receptive
    field that is not a positive int, an ``output_size`` that is not a method
    returning one) is a :class:`PluginError` naming the model, not a
    silently missing line.
    """
    data: dict[str, Any] = {}
    field = getattr(module, "receptive_field", None)
    if field is not None:
        data["receptive_field"] = _positive_int(field, f"model '{name}': receptive_field")
    output_size = getattr(module, "output_size", None)
    if output_size is not None:
        if not callable(output_size):
            raise PluginError(f"model '{name}': output_size must be a method output_size(input_size) -> int "
                              f"(got {type(output_size).__name__}); see docs/plugins/contracts.md")
        try:
            size = output_size(input_size)
        except ValueError as exc:
            data["input_error"] = str(exc)
        else:
            data["output_size"] = _positive_int(size, f"model '{name}': output_size({input_size})")
    return data


def _positive_int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise PluginError(f"{what} must be a positive int (got {value!r}); see docs/plugins/contracts.md")
    return value
