"""What the pix2pix trainer requires of parts it did not build: datasets and discriminators of other plugins.

Each requirement is checked once, with a one-line error naming the part, the
plugin that provides it and what to change, instead of a silent default
(docs/plugins/contracts.md lists them all):

* a dataset declares a ``batch_size`` option (checked when the config is
  validated): its batches are ``data.batch_size`` pairs, and a split ``S``
  (val, test) is batched by ``data.S.batch_size`` where the options have one;
* a dataset's items are mappings with tensors ``"A"`` and ``"B"`` of the same
  height and width (checked on item 0 when the run sets up);
* a discriminator says how it is called with a bool ``conditional``
  attribute: ``D(A, B)`` when true, ``D(B)`` when false.

Torch-free at import: the config model imports :class:`DatasetChoice`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationInfo, model_validator

from nectargan_core import ConfigError, PluginError, choice_of, registry_from

_DataChoiceBase = choice_of("dataset", default="paired")


class DatasetChoice(_DataChoiceBase):  # type: ignore[misc, valid-type]
    """The ``data`` section: a registered dataset and its options, which must include ``batch_size``."""

    @model_validator(mode="after")
    def _declares_batch_size(self, info: ValidationInfo) -> "DatasetChoice":
        registry = registry_from(info)
        if registry is None:
            return self
        component = registry.get("dataset", self.name)
        fields = component.options.model_fields if component.options is not None else {}
        if "batch_size" not in fields:
            raise ValueError(
                f"dataset '{self.name}' ({component.provided_by}) declares no batch_size option, and a "
                "translation trainer batches its data by data.batch_size; its author must add one to the options model it registers "
                "(batch_size: int = Field(1, ge=1)); see docs/plugins/contracts.md")
        for split in (None, "val", "test"):
            size = batch_size_of(self.options, split)
            if not (isinstance(size, int) and not isinstance(size, bool) and size >= 1):
                key = "batch_size" if split is None else f"{split}.batch_size"
                raise ValueError(f"dataset '{self.name}': {key} must be a whole number of at least 1 (got {size!r})")
        return self


def batch_size_of(options: Mapping[str, Any], split: str | None) -> Any:
    """The batch size of ``split`` (None or ``train``: ``batch_size``; else ``<split>.batch_size`` if given)."""
    nested = options.get(split) if split not in (None, "train") else None
    if isinstance(nested, Mapping) and "batch_size" in nested:
        return nested["batch_size"]
    return options.get("batch_size")


#: How far outside [-1, 1] an item's values may stray (rounding in another plugin's own normalisation).
RANGE_SLACK = 1e-3


def check_dataset_item(dataset: Any, name: str, provider: str, split: str,
                       channels: tuple[int, int] | None = None) -> None:
    """Refuse a dataset whose items are not ``{"A": tensor, "B": tensor}`` of one height and width.

    Item 0's tensors must also be floating point with values in [-1, 1], and,
    given ``channels`` (the data section's input and output counts), have
    those channel counts: a dataset that breaks them would train on garbage,
    or fail deep inside a network, instead of being named here.
    """
    import torch

    where = f"dataset '{name}' ({provider}), {split} split"
    try:
        count = len(dataset)
    except TypeError:
        raise PluginError(f"{where}: has no len(); a translation trainer needs a map-style dataset (__len__ and __getitem__)") \
            from None
    if not count:
        return
    item = dataset[0]
    if not isinstance(item, Mapping) or not all(isinstance(item.get(key), torch.Tensor) for key in ("A", "B")):
        found = f"keys {', '.join(map(str, item))}" if isinstance(item, Mapping) else type(item).__name__
        raise PluginError(f"{where}: item 0 must be a mapping with tensors 'A' (input) and 'B' (target); got {found}")
    a, b = item["A"], item["B"]
    if a.dim() != 3 or b.dim() != 3 or a.shape[-2:] != b.shape[-2:]:
        raise PluginError(f"{where}: item 0 must hold 'A' and 'B' as CxHxW tensors of one height and width; got "
                          f"{tuple(a.shape)} and {tuple(b.shape)}")
    for key, image, count, option in (("A", a, channels and channels[0], "in_channels"),
                                      ("B", b, channels and channels[1], "out_channels")):
        if not image.is_floating_point():
            raise PluginError(f"{where}: item 0's '{key}' is a {str(image.dtype).replace('torch.', '')} tensor; "
                              "images are floating point in [-1, 1] (for 8-bit pixels: x.float() / 127.5 - 1)")
        low, high = float(image.min()), float(image.max())
        if low < -1 - RANGE_SLACK or high > 1 + RANGE_SLACK:
            raise PluginError(f"{where}: item 0's '{key}' holds values from {low:g} to {high:g}; images are in "
                              "[-1, 1] (for 8-bit pixels: x / 127.5 - 1)")
        if count and image.shape[0] != count:
            raise PluginError(f"{where}: item 0's '{key}' has {image.shape[0]} channels, and data.{option} is "
                              f"{count}; make them agree (the networks are built for data.{option})")


def is_conditional(discriminator: Any, name: str, provider: str) -> bool:
    """The discriminator's ``conditional`` attribute: True to be called ``D(A, B)``, False for ``D(B)``."""
    value = getattr(discriminator, "conditional", None)
    if not isinstance(value, bool):
        found = "has none" if value is None else f"has {value!r}"
        raise PluginError(f"model '{name}' ({provider}): pix2pix calls its discriminator D(A, B) or D(B) as its "
                          f"bool attribute 'conditional' says, and it {found}; its author must set "
                          "self.conditional = True or False (see docs/plugins/contracts.md)")
    return value


def check_channels(model: str, provider: str, declared: Mapping[str, Any], channels: Mapping[str, int]) -> None:
    """Refuse a model that would silently keep its own channel count where the data has another.

    Channel counts are passed only to models whose options declare them; a
    count other than 3 that the model cannot take is an error.
    """
    for key, value in channels.items():
        if key not in declared and value != 3:
            source = "in_channels" if key in ("in_channels", "input_channels") else "out_channels"
            raise ConfigError(f"data.{source} is {value}, but model '{model}' ({provider}) has no '{key}' option, so it "
                              f"would be built for its own channel count; choose a model that declares '{key}', or "
                              f"use {source}: 3")
