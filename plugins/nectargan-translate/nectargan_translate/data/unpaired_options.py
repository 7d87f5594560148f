"""The ``unpaired`` dataset's options (torch-free): the paired dataset's, read by domain.

An unpaired dataset is sized, augmented, split and loaded exactly like a
paired one, so its options are the paired dataset's
(:class:`~nectargan_translate.data.options.PairedDataOptions`: ``load_size``,
``crop_size``, ``augment``, ``batch_size``, the loader keys, ``val`` and
``test``), with these differences:

* ``layout`` is ``unpaired``: a split ``S`` is the two folders ``SA/`` and
  ``SB/`` of ``root`` (``trainA/``, ``trainB/``, ``testA/``, ...);
* ``in_channels`` and ``out_channels`` are the channels of domain A and of
  domain B, and ``direction: BtoA`` swaps the two domains;
* ``serial`` pairs training item ``i`` with ``B[i mod |B|]`` instead of a
  random B image;
* every augmentation, photometric ones included, applies to each image on its
  own (nothing is a target that must stay clean).
"""

from __future__ import annotations

from typing import Any, Literal, Mapping, Optional

from pydantic import Field

from .options import Channels, PairedDataOptions, parse_options


class UnpairedDataOptions(PairedDataOptions):
    """Unpaired images: a folder per domain and split (``trainA/``, ``trainB/``, ...), any counts and names."""

    root: Optional[str] = Field(None, description="Dataset folder holding trainA/ and trainB/ (and valA/ valB/, testA/ testB/)")
    layout: Literal["unpaired"] = Field(  # type: ignore[assignment]
        "unpaired", description="Always unpaired: split S is the folders SA/ and SB/ of root")
    direction: Literal["AtoB", "BtoA"] = Field("AtoB", description="BtoA swaps the two domains (reads SB/ as A)")
    in_channels: Channels = Field(3, description="Channels of domain A (after direction): 1, 3 or 4")
    out_channels: Channels = Field(3, description="Channels of domain B (after direction): 1, 3 or 4")
    serial: bool = Field(False, description="Training item i takes B[i mod |B|] instead of a random B image "
                                            "(the reference's --serial_batches; shuffling is data.shuffle)")


def parse_unpaired(options: UnpairedDataOptions | Mapping[str, Any]) -> UnpairedDataOptions:
    """Validated options from a model or a plain mapping; a bad value is a one-line ConfigError."""
    return parse_options(options, UnpairedDataOptions)  # type: ignore[return-value]
