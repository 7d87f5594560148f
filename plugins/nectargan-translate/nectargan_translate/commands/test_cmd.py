"""``nectargan test``: score a checkpoint on a split of its dataset."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import click

from nectargan_core import BATCH_OPTION, printable, printable_lines

from .options import (GivenPath, check_reference_options, checkpoint_option, device_option, reference_options,
                      tile_options)


@click.command("test")
@click.argument("run_dir", metavar="RUN_DIR|CHECKPOINT", type=GivenPath(path_type=Path))
@checkpoint_option
@click.option("--split", type=click.Choice(["test", "val", "train"]), default="test", show_default=True,
              help="Split of the run's dataset (train is read unaugmented, like val).")
@click.option("--mode", type=click.Choice(["eval", "train"]), default=None,
              help="eval: dropout off, BN running statistics. train: the reference's test behaviour "
                   "(dropout on, per-batch BN statistics); the saved weights are never changed. "
                   "Default: the run's test.mode (eval unless its config says otherwise).")
@click.option("--out", "out_dir", type=GivenPath(path_type=Path), default=None,
              help="Output folder (default: RUN_DIR/test/<checkpoint>-<split>[-train-mode], where <checkpoint> "
                   "holds the epoch and step, e.g. best-epoch0003-step00000012). Replaced as a whole by a rerun.")
@click.option("--batch-size", type=BATCH_OPTION, default=None,
              help="Images per batch (default: the run's data.<split>.batch_size).")
@device_option
@click.option("--data-root", type=GivenPath(file_okay=False, path_type=Path), default=None,
              help="Dataset folder, when the run's data.root does not resolve from here.")
@click.option("--grid", is_flag=True, help="Also write input | output | target grids to grids/.")
@tile_options
@click.option("--direction", type=click.Choice(["AtoB", "BtoA", "both"]), default="both", show_default=True,
              help="Which generator: AtoB, BtoA, or both: every direction the checkpoint has (CycleGAN: both, each "
                   "in its own folder; pix2pix: its one).")
@reference_options
def test_command(run_dir: Path, which: str, split: str, mode: Optional[str], out_dir: Optional[Path],
                 batch_size: Optional[int], device: str, data_root: Optional[Path], grid: bool,
                 tile: Optional[int | str], overlap: Optional[int], direction: Optional[str], arch: Optional[str],
                 arch_options: tuple[str, ...]) -> None:
    """Run a trained generator over a split; write per-image L1, PSNR, SSIM, the images and a results page.

    Writes index.html (every image as input | output | target with its
    scores, worst first, sortable; the checkpoint, epoch and mode; the
    output = input baseline), metrics.json, metrics.csv (one row per image and
    a mean row), and images/, inputs/ and targets/ as PNG. Metrics compare
    images in [0, 1]. On an unpaired split (CycleGAN) the generator of
    --direction translates its input domain and the other generator
    translates back: the metrics compare that reconstruction with the input,
    and reconstructions/ takes the place of targets/. By default (--direction
    both) a checkpoint with a generator each way (CycleGAN) is tested both
    ways, each direction in its own folder, as the reference's test.py does.
    With --tile, each image runs in overlapping tiles blended without seams,
    as predict --tile does: for a split kept at full size
    (data.test.preprocess: none), photographs larger than the training size.

    \b
    Examples:
      nectargan test runs/facades/version_0
      nectargan test runs/facades/version_0 --checkpoint best --grid
      nectargan test runs/facades/version_0 --checkpoint 100 --mode train --batch-size 1
      nectargan test latest_net_G.pth --arch unet_256 --data-root datasets/facades
      nectargan test runs/horse2zebra/version_0 --direction BtoA --grid
      nectargan test runs/photos/version_0 --tile auto --overlap 32
    """
    check_reference_options(arch, arch_options)
    from nectargan_core import require_torch

    require_torch("nectargan test")  # before anything that imports it
    from nectargan_core import resolve_device

    from ..tester import run_test

    def one(chosen: Optional[str], out: Optional[Path]) -> Any:
        report = run_test(run_dir, which, split=split, mode=mode, out_dir=out, batch_size=batch_size,
                          device=resolve_device(device), data_root=data_root, grid=grid, arch=arch,
                          arch_options=arch_options, direction=chosen, tile=tile, overlap=overlap)
        click.echo(printable_lines(report.summary()))
        for note in report.notes:
            click.echo(printable(note), err=True)
        click.echo(printable(f"results: {report.out_dir}" + (" (replaced the earlier results there)"
                                                              if report.replaced else "")))
        click.echo(printable(f"page: {report.page}"))
        return report

    first = one(None if direction == "both" else direction, out_dir)
    others = first.generator.directions[1:] if direction == "both" else ()
    if others and out_dir is not None:
        click.echo(printable(f"note: {run_dir} has a generator for {', '.join(others)} too; with --out only "
                             f"{first.generator.direction} was tested (give --direction and another --out for the "
                             "other)"), err=True)
    elif others:  # as the reference's test.py: every direction the checkpoint has, each in its own folder
        for other in others:
            one(other, None)
