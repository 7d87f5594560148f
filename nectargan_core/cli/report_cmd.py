"""``nectargan report``: one self-contained HTML page about a run."""

from __future__ import annotations

from pathlib import Path

import click

from ..limits import EXAMPLES_OPTION, SMOOTH_OPTION, TEST_IMAGES_OPTION
from ..rundir import RunDir
from ..text import printable


@click.command("report")
@click.argument("run_dir", metavar="RUN_DIR")
@click.option("-o", "--output", metavar="FILE", default=None, help="Where to write (default: RUN_DIR/report.html).")
@click.option("--smooth", metavar="N", type=SMOOTH_OPTION, default=10, show_default=True,
              help="Moving average over N logging intervals in the loss plots (1: raw only).")
@click.option("--max-examples", metavar="N", type=EXAMPLES_OPTION, default=24, show_default=True,
              help="Embed at most N example grids, evenly spaced over the epochs (0: all).")
@click.option("--test-images", metavar="N", type=TEST_IMAGES_OPTION, default=6, show_default=True,
              help="Per test folder, embed its N/2 worst and N/2 best images (0: none).")
def report_command(run_dir: str, output: str | None, smooth: int, max_examples: int, test_images: int) -> None:
    """Write a single HTML file that describes a run and opens offline.

    What defines the run (trainer, networks and their parameter counts, data,
    schedule, precision; the full config collapsed), status and checkpoints,
    loss and validation curves, the example grids side by side over the
    epochs, the sections installed plugins add (with nectargan-translate: the
    results of 'nectargan test', their means, worst and best images, whether
    the weights are still current, and a link to each results page), and
    timing. Images are embedded, so the file can be
    copied, mailed or archived on its own.

    \b
    Examples:
      nectargan report runs/facades/version_0
      nectargan report runs/facades/version_0 -o facades.html --max-examples 0
    """
    from ..reporting.report import write_report

    run = RunDir.open(run_dir)
    path = write_report(run, Path(output) if output else None, smooth=smooth, max_examples=max_examples,
                        test_images=test_images)
    click.echo(f"wrote {printable(path)}")
