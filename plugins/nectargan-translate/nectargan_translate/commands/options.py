"""Options shared by the generator commands, and the parsing they need (torch-free)."""

from __future__ import annotations

import re
from typing import Any, Callable, Optional

import click

from nectargan_core import DEVICE_PATTERN, IMAGE_WHY, MAX_IMAGE_SIDE

SIZE_PATTERN = re.compile(r"^(\d+)(?:x(\d+))?$")


class SizeType(click.ParamType):
    """``N`` (a square) or ``HxW``, as ``(height, width)``."""

    name = "N|HxW"

    def convert(self, value: Any, param: Optional[click.Parameter], ctx: Optional[click.Context]) -> tuple[int, int]:
        if isinstance(value, tuple):
            return value
        match = SIZE_PATTERN.match(str(value).strip())
        if not match:
            self.fail(f"{value!r} is not a size; use N (square) or HxW, e.g. 256 or 256x512", param, ctx)
        sides = [digits.lstrip("0") or "0" for digits in match.groups() if digits is not None]
        if any(side == "0" for side in sides):
            self.fail(f"{value!r} is not a size; use N (square) or HxW, e.g. 256 or 256x512", param, ctx)
        # Compared as digits first: int() refuses numbers of more than 4300 digits.
        if any(len(side) > len(str(MAX_IMAGE_SIDE)) or int(side) > MAX_IMAGE_SIDE for side in sides):
            self.fail(f"{value!r}: a side is more than {MAX_IMAGE_SIDE}: {IMAGE_WHY}", param, ctx)
        height = int(sides[0])
        return height, int(sides[1]) if len(sides) > 1 else height


class GivenPath(click.Path):
    """A path argument or option; an empty one is refused (``Path("")`` would silently mean the current folder).

    Whether it can be read is left to the command, which names an unreadable
    file the same way whether it was given or found in a folder (click's own
    check made it a usage error, exit 2, in one case and not the other).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("readable", False)
        super().__init__(*args, **kwargs)

    def convert(self, value: Any, param: Optional[click.Parameter], ctx: Optional[click.Context]) -> Any:
        if isinstance(value, str) and not value:
            self.fail("is empty; give a path ('.' for the current folder)", param, ctx)
        return super().convert(value, param, ctx)


class TileType(click.ParamType):
    """``N`` (a tile side) or ``auto`` (the training size)."""

    name = "N|auto"

    def convert(self, value: Any, param: Optional[click.Parameter], ctx: Optional[click.Context]) -> int | str:
        if isinstance(value, int) or value == "auto":
            return value
        text = str(value).strip()
        if not text.isdigit() or len(text) > len(str(MAX_IMAGE_SIDE)) or not 1 <= int(text) <= MAX_IMAGE_SIDE:
            self.fail(f"{value!r} is not a tile side; use a number of pixels from 1 to {MAX_IMAGE_SIDE}, or auto "
                      "(the training size)", param, ctx)
        return int(text)


def check_device(ctx: click.Context, param: click.Parameter, value: str) -> str:
    if not DEVICE_PATTERN.match(value):
        raise click.BadParameter(f"{value!r}: use auto, cpu, cuda, cuda:N or mps", ctx, param)
    return value


def checkpoint_option(func: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--checkpoint", "which", metavar="latest|best|EPOCH", default="latest", show_default=True,
                        help="Which checkpoint of a run directory (ignored for a checkpoint file).")(func)


def direction_option(func: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--direction", type=click.Choice(["AtoB", "BtoA"]), default=None,
                        help="Which generator: AtoB or BtoA (CycleGAN has both; default: the checkpoint's first, "
                             "the only one of pix2pix).")(func)


def tile_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """``--tile N|auto`` and ``--overlap PX``: run images at their own size in blended tiles (predict and test)."""
    func = click.option("--overlap", type=click.IntRange(0, MAX_IMAGE_SIDE), metavar="PX", default=None,
                        help="With --tile: pixels neighbouring tiles share, blended (default: a quarter of the "
                             "tile).")(func)
    return click.option("--tile", type=TileType(), metavar="N|auto", default=None,
                        help="Run each image in overlapping N x N tiles blended without seams (auto: the training "
                             "size); any image size; the generator's memory is bounded by the tile and "
                             "--batch-size (tiles per pass).")(func)


def device_option(func: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--device", metavar="DEVICE", default="auto", show_default=True, callback=check_device,
                        help="auto, cpu, cuda, cuda:N or mps.")(func)



def reference_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """``--arch`` and ``--set``: read TARGET as a pix2pix/CycleGAN reference state dict."""
    func = click.option("--set", "arch_options", metavar="OPTION=VALUE", multiple=True,
                        help="With --arch: an architecture option of the reference network, e.g. --set norm=instance "
                             "(repeatable).")(func)
    return click.option("--arch", metavar="NAME", default=None,
                        help="TARGET is a pix2pix/CycleGAN reference state dict (latest_net_G.pth) of this network "
                             "(unet_256, unet_128, resnet_9blocks, ...), mapped as nectargan models import does.")(func)


def check_reference_options(arch: Optional[str], arch_options: tuple[str, ...]) -> None:
    if arch_options and arch is None:
        raise click.UsageError("--set describes a reference network: use it with --arch")
