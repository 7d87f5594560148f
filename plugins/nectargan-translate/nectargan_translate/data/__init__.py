"""The data layer of translation: paired and unpaired datasets, augmentations, loaders and dataset tools.

Internal: plugins import these names from ``nectargan_translate``. Importing
this package does not import torch (the plugin module and the CLI import
:mod:`.options` through it); the torch parts load on first access.
"""

from __future__ import annotations

from typing import Any

from .errors import DatasetError, DownloadError
from .options import PairedDataOptions

_LAZY = {
    "PairedDataset": "paired",
    "build_paired_dataset": "paired",
    "build_dataloader": "loader",
    "EpochSampler": "sampler",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
