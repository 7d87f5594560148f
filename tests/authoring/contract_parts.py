"""Parts of an outside plugin, each honouring or breaking one contract of docs/plugins/contracts.md.

``plugin`` (the module object below) registers them all under ``cx_`` names;
tests add it with the ``nectargan_plugin_host`` fixture.
"""

from __future__ import annotations

import sys
from types import ModuleType

import torch
from pydantic import Field
from torch import nn

from nectargan_core import hookimpl
from nectargan_core.config import Section
from nectargan_losses.schedules import Schedule
from nectargan_pix2pix.trainer import Pix2pixTrainer

HERE = __name__


# -- datasets under pix2pix ---------------------------------------------------
class PairsOptions(Section):
    count: int = Field(7, ge=1)
    size: int = Field(32, ge=4)
    batch_size: int = Field(1, ge=1, description="Pairs per batch")


class NoBatchOptions(Section):
    count: int = Field(7, ge=1)


class Pairs(torch.utils.data.Dataset):
    """``count`` pairs of ``size`` px: B is A mirrored."""

    def __init__(self, count: int = 7, size: int = 32, batch_size: int = 1, split: str = "train", seed: int = 0):
        self.count, self.size = count, size
        self.base = seed * 1000 + (0 if split == "train" else 500)

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        a = torch.rand(3, self.size, self.size, generator=torch.Generator().manual_seed(self.base + index)) * 2 - 1
        return {"A": a, "B": a.flip(-1)}


class TuplePairs(Pairs):
    """Items as (A, B) tuples: not what pix2pix reads."""

    def __getitem__(self, index: int):  # type: ignore[override]
        item = super().__getitem__(index)
        return item["A"], item["B"]


class BytePairs(Pairs):
    """Items as 8-bit tensors: not images in [-1, 1]."""

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        item = super().__getitem__(index)
        return {key: ((value + 1) * 127.5).to(torch.uint8) for key, value in item.items()}


class PixelValuePairs(Pairs):
    """Float items in 0..255: the range is wrong."""

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return {key: (value + 1) * 127.5 for key, value in super().__getitem__(index).items()}


class GreyInputPairs(Pairs):
    """A has one channel, where the config says three."""

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        item = super().__getitem__(index)
        return {"A": item["A"][:1], "B": item["B"]}


# -- discriminators under pix2pix ---------------------------------------------
class Judge(nn.Module):
    """A small conditional or unconditional patch discriminator that records how it was called."""

    def __init__(self, input_channels: int = 3, target_channels: int = 3, conditional: bool = True):
        super().__init__()
        self.conditional = conditional
        self.net = nn.Conv2d(input_channels + target_channels if conditional else target_channels, 1, 4, 2, 1)
        self.arities: set[int] = set()

    def forward(self, *images: torch.Tensor) -> torch.Tensor:
        self.arities.add(len(images))
        if len(images) != (2 if self.conditional else 1):
            raise TypeError(f"called with {len(images)} images")
        return self.net(torch.cat(images, 1))


class UnsaidJudge(nn.Module):
    """Takes D(A, B) but does not say so (no ``conditional`` attribute)."""

    def __init__(self, input_channels: int = 3, target_channels: int = 3):
        super().__init__()
        self.net = nn.Conv2d(input_channels + target_channels, 1, 4, 2, 1)

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return self.net(torch.cat([a, b], 1))


class JudgeOptions(Section):
    input_channels: int = 3
    target_channels: int = 3
    conditional: bool = True


class ChannelOptions(Section):
    input_channels: int = 3
    target_channels: int = 3


# -- generators -----------------------------------------------------------------
def fixed_three(width: int = 4) -> nn.Module:
    """A generator for 3-channel images only: it declares no in_channels/out_channels option."""
    return nn.Sequential(nn.Conv2d(3, width, 3, padding=1), nn.Tanh(), nn.Conv2d(width, 3, 3, padding=1))


class WidthOptions(Section):
    width: int = 4


# -- schedules and losses -----------------------------------------------------------
class Halving(Schedule):
    """Halves every ``every`` steps."""

    def __init__(self, every: int = 1) -> None:
        self.every, self.unit = every, "step"

    def value(self, t: float) -> float:
        return 0.5 ** (t // self.every)


def halving(every: int = 1) -> Halving:
    return Halving(every)


def not_a_schedule() -> object:
    return {"value": 1.0}


def stepwise() -> Schedule:
    schedule = Halving()
    schedule.unit = "steps"  # a typo of "step"
    return schedule


def mean_abs(fake: torch.Tensor, real: torch.Tensor) -> torch.Tensor:
    return (fake - real).abs().mean()


def abs_loss() -> object:
    return mean_abs


def not_callable() -> object:
    return 3.0


# -- models reporting geometry --------------------------------------------------
class Reported(nn.Conv2d):
    receptive_field = 4

    def __init__(self) -> None:
        super().__init__(3, 1, 4, 2, 1)

    def output_size(self, input_size: int) -> int:
        if input_size % 2:
            raise ValueError(f"{input_size} is odd; use an even size")
        return input_size // 2


class Misreported(Reported):
    receptive_field = "4x4"  # type: ignore[assignment]


# -- trainers exported for the reference ------------------------------------------
class Exported(Pix2pixTrainer):
    reference_networks = {"G": ("generator", "models.generator")}
    reference_model = "pix2pix"


class ExportedWithoutModel(Pix2pixTrainer):
    reference_networks = {"G": ("generator", "models.generator")}
    reference_model = None  # type: ignore[assignment]


class ExportedAsList(Pix2pixTrainer):
    reference_networks = {"G": ["generator", "models.generator"]}  # type: ignore[dict-item]


# -- the plugin ---------------------------------------------------------------------
plugin = ModuleType("contract_plugin")


@hookimpl
def register_datasets(register):
    register("cx_pairs", f"{HERE}:Pairs", options=PairsOptions)
    register("cx_nobatch", f"{HERE}:Pairs", options=NoBatchOptions)
    register("cx_tuples", f"{HERE}:TuplePairs", options=PairsOptions)
    register("cx_bytes", f"{HERE}:BytePairs", options=PairsOptions)
    register("cx_pixel_values", f"{HERE}:PixelValuePairs", options=PairsOptions)
    register("cx_grey_input", f"{HERE}:GreyInputPairs", options=PairsOptions)


@hookimpl
def register_models(register):
    register("cx_judge", f"{HERE}:Judge", options=JudgeOptions, role="discriminator")
    register("cx_unsaid", f"{HERE}:UnsaidJudge", options=ChannelOptions, role="discriminator")
    register("cx_fixed3", f"{HERE}:fixed_three", options=WidthOptions, role="generator")
    register("cx_reported", f"{HERE}:Reported", role="discriminator")
    register("cx_misreported", f"{HERE}:Misreported", role="discriminator")


@hookimpl
def register_schedules(register):
    register("cx_halving", f"{HERE}:halving")
    register("cx_dict", f"{HERE}:not_a_schedule")
    register("cx_steps", f"{HERE}:stepwise")


@hookimpl
def register_losses(register):
    register("cx_abs", f"{HERE}:abs_loss")
    register("cx_number", f"{HERE}:not_callable")


@hookimpl
def register_trainers(register):
    options = Pix2pixTrainer.options
    register("cx_exported", f"{HERE}:Exported", options=options)
    register("cx_nomodel", f"{HERE}:ExportedWithoutModel", options=options)
    register("cx_aslist", f"{HERE}:ExportedAsList", options=options)


for _hook in (register_datasets, register_models, register_schedules, register_losses, register_trainers):
    setattr(plugin, _hook.__name__, _hook)
sys.modules.setdefault(HERE, sys.modules[__name__])
