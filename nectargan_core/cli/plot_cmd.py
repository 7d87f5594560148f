"""``nectargan plot``: a run's curves as PNG files."""

from __future__ import annotations

from pathlib import Path

import click

from ..errors import RunDirError
from ..limits import SMOOTH_OPTION
from ..rundir import RunDir
from ..text import printable


@click.command("plot")
@click.argument("run_dir", metavar="RUN_DIR")
@click.option("-o", "--output", "out_dir", metavar="DIR", default=None,
              help="Folder for the PNG files (default: RUN_DIR/plots).")
@click.option("--smooth", metavar="N", type=SMOOTH_OPTION, default=10, show_default=True,
              help="Moving average over N logging intervals drawn over the raw curve (1: raw only).")
@click.option("--details", is_flag=True, help="Also plot dotted detail keys such as G/l1.raw and D/gan_d.weight.")
def plot_command(run_dir: str, out_dir: str | None, smooth: int, details: bool) -> None:
    """Draw a run's loss, validation and learning-rate curves as PNG files.

    One figure per network (loss keys grouped by the part before '/': G, D, ...)
    with a panel per loss term, one with a panel per validation metric, and one
    with the learning rates; x is the fractional epoch. Works while the run is
    still training.

    \b
    Examples:
      nectargan plot runs/facades/version_0
      nectargan plot runs/facades/version_0 --smooth 50 -o figures/
    """
    from ..reporting.history import History
    from ..reporting.plots import render_plots, write_plots

    run = RunDir.open(run_dir)
    plots = render_plots(History.read(run.metrics_file), smooth, details)
    if not plots:
        raise RunDirError(f"{run.path}: no metrics yet; plot again after the first logging interval")
    for path in write_plots(plots, Path(out_dir) if out_dir else run.path / "plots"):
        click.echo(f"wrote {printable(path)}")
