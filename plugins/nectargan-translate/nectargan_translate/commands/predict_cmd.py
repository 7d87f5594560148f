"""``nectargan predict``: translate image files and folders with a trained generator."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import click

from nectargan_core import BATCH_OPTION, BoundedFloat, printable_lines

from .options import (GivenPath, SizeType, check_reference_options, checkpoint_option, device_option,
                      direction_option, reference_options, tile_options)


@click.command("predict")
@click.argument("target", metavar="CHECKPOINT|RUN_DIR", type=GivenPath(path_type=Path))
@click.argument("inputs", metavar="INPUTS...", nargs=-1, required=True, type=GivenPath(path_type=Path))
@click.option("-o", "--out", "out_dir", required=True, type=GivenPath(path_type=Path),
              help="Output folder (created if needed).")
@checkpoint_option
@click.option("--batch-size", type=BATCH_OPTION, default=1, show_default=True,
              help="Images per forward pass (images of the same input size are batched together).")
@device_option
@click.option("-r", "--recursive", is_flag=True, help="Search input folders recursively (sub-folders are mirrored).")
@click.option("--pad", "fit", flag_value="pad", default=True,
              help="Default: reflect-pad to the next multiple the generator accepts; outputs cropped back.")
@click.option("--crop", "fit", flag_value="crop",
              help="Centre-crop to --size (default: the largest multiples that fit); outputs are the crop.")
@click.option("--resize", "fit", flag_value="resize",
              help="Resize to --size (default: the training size) and the output back to the input's size.")
@click.option("--size", type=SizeType(), metavar="N|HxW", default=None, help="Side N or HxW for --crop and --resize.")
@tile_options
@click.option("--scale", type=BoundedFloat(0.0, 8.0, "an input scaled more than 8 times is no photograph's detail",
                                          low_open=True), metavar="F", default=None,
              help="Resize each input by F first (0.5: half size); outputs keep the scaled size.")
@click.option("--png-compression", type=click.IntRange(0, 9), default=1, show_default=True,
              help="zlib level of the output PNGs (lossless at every level; 9: smallest files, slowest).")
@direction_option
@reference_options
def predict_command(target: Path, inputs: tuple[Path, ...], out_dir: Path, which: str, batch_size: int,
                    device: str, recursive: bool, fit: str, size: Optional[tuple[int, int]],
                    tile: Optional[int | str], overlap: Optional[int], scale: Optional[float],
                    png_compression: int, direction: Optional[str], arch: Optional[str],
                    arch_options: tuple[str, ...]) -> None:
    """Run a trained generator on images; write one PNG per input, named after it.

    INPUTS are image files and folders (sorted; .bmp .jpeg .jpg .png .tif .tiff
    .webp). Images are converted to the channels the generator was trained on
    (grey to RGB, alpha dropped; 16-bit keeps its full range) and may have any
    size: the generator needs multiples of 2**depth, so by default each image
    is reflect-padded up to the next multiple and its output cropped back.
    Photographs much larger than the training size run best in tiles of the
    training size (--tile auto), which the model saw in training.

    \b
    Examples:
      nectargan predict runs/facades/version_0 photos/ -o out/
      nectargan predict runs/facades/version_0/checkpoints/best.pt a.png b.jpg -o out/ --batch-size 8
      nectargan predict runs/facades/version_0 big/ -o out/ --resize --size 256
      nectargan predict runs/edges2photos/version_0 photos/ -o out/ --tile auto --overlap 32
      nectargan predict latest_net_G.pth photos/ -o out/ --arch unet_256
      nectargan predict runs/horse2zebra/version_0 zebras/ -o horses/ --direction BtoA
    """
    check_reference_options(arch, arch_options)
    from click.core import ParameterSource

    if tile is not None and click.get_current_context().get_parameter_source("fit") == ParameterSource.COMMANDLINE:
        raise click.UsageError(f"--tile runs images at their own size in tiles: it does not go with --{fit}")
    from ..files import plan

    jobs = plan(inputs, out_dir, recursive)  # torch-free: path and header errors come before torch loads

    from nectargan_core import require_torch

    require_torch("nectargan predict")  # before anything that imports it
    from nectargan_core import resolve_device

    from ..predictor import predict_jobs

    report = predict_jobs(target, jobs, out_dir, which=which, batch_size=batch_size, device=resolve_device(device),
                          fit=fit, size=size, png_compression=png_compression, arch=arch,
                          arch_options=arch_options, direction=direction, tile=tile, overlap=overlap, scale=scale)
    for note in report.notes():
        click.echo(printable_lines(note), err=True)
    click.echo(printable_lines(report.summary()))
