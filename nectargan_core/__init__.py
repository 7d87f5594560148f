"""NectarGAN core: the hook specifications, plugin loading, config, run engine and CLI.

Plugin authors need only::

    from nectargan_core import hookimpl

Importing this package does not import torch; ``Trainer``, ``Run``, the
trainer kit (``TrainerKit``, ``Update``, ``optimizer_step``) and the other
engine classes are loaded on first access.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .errors import CheckpointError, ConfigError, NectarGANError, PluginError
from .hookspecs import hookimpl, hookspec

__version__: str  # the installed nectargan-core's version, read on first access

if TYPE_CHECKING:  # what _LAZY loads on first access, spelled out for type checkers and the API reference
    from .accumulation import AccumulationGroup
    from .checkpoint import load_checkpoint
    from .config import Section, choice_of, load_config, name_of, parts_of
    from .generators import GeneratorSpec
    from .kit import TrainerKit
    from .metrics import read_metrics
    from .plugins import get_plugins
    from .run import Run
    from .sampling import ResumableSampler
    from .trainer import Trainer
    from .update import Update, optimizer_step

_LAZY = {
    "Trainer": ("nectargan_core.trainer", "Trainer"),
    "Run": ("nectargan_core.run", "Run"),
    "ResumableSampler": ("nectargan_core.sampling", "ResumableSampler"),
    "TrainerKit": ("nectargan_core.kit", "TrainerKit"),
    "Update": ("nectargan_core.update", "Update"),
    "optimizer_step": ("nectargan_core.update", "optimizer_step"),
    "AccumulationGroup": ("nectargan_core.accumulation", "AccumulationGroup"),
    "GeneratorSpec": ("nectargan_core.generators", "GeneratorSpec"),
    "load_config": ("nectargan_core.config", "load_config"),
    "choice_of": ("nectargan_core.config", "choice_of"),
    "name_of": ("nectargan_core.config", "name_of"),
    "parts_of": ("nectargan_core.config", "parts_of"),
    "Section": ("nectargan_core.config", "Section"),
    "get_plugins": ("nectargan_core.plugins", "get_plugins"),
    "load_checkpoint": ("nectargan_core.checkpoint", "load_checkpoint"),
    "read_metrics": ("nectargan_core.metrics", "read_metrics"),
}

__all__ = [
    "hookimpl", "hookspec", "__version__",
    "NectarGANError", "ConfigError", "PluginError", "CheckpointError",
    *_LAZY,
]


def __getattr__(name: str) -> Any:
    if name == "__version__":  # one source: the installed distribution's metadata (pyproject.toml)
        from importlib.metadata import version

        globals()[name] = value = version("nectargan-core")
        return value
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'nectargan_core' has no attribute {name!r}")
