"""The pix2pix data layer: paired datasets, augmentations, loaders and dataset tools.

Importing this package does not import torch (the plugin module and the CLI
import :mod:`.options` through it); the torch parts load on first access::

    from nectargan_translate.data import PairedDataOptions, PairedDataset, build_dataloader
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

__all__ = ["DatasetError", "DownloadError", "PairedDataOptions", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
