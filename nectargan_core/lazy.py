"""Resolve ``"module:attribute"`` references lazily.

Plugins register heavy objects (torch modules, trainers) by reference so that
loading plugins, listing them and printing help never imports torch.
"""

from __future__ import annotations

import importlib
from typing import Any


def resolve(ref: Any) -> Any:
    """Return ``ref`` itself, or the object a ``"pkg.module:attr.sub"`` string names."""
    if not isinstance(ref, str):
        return ref
    module_name, sep, attr_path = ref.partition(":")
    if not sep or not module_name or not attr_path:
        raise ValueError(f"reference {ref!r} is not of the form 'package.module:attribute'")
    obj: Any = importlib.import_module(module_name)
    for part in attr_path.split("."):
        obj = getattr(obj, part)
    return obj
