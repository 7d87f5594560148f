"""``nectargan runs``: every run under a folder, with its state and results."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

import click

from ..errors import RunDirError
from ..reporting.runs import RunSummary, list_runs
from ..text import printable

HEADER = ("RUN", "STATUS", "EPOCHS", "STEPS", "BEST", "LATEST CHECKPOINT")


def row(summary: RunSummary) -> tuple[str, ...]:
    """The table cells of one run; everything comes from files on disk, so escape sequences are shown escaped."""
    epochs = f"{summary.epochs}/{summary.epochs_total}" if summary.epochs_total else str(summary.epochs)
    best = (f"{summary.best_metric} {summary.best_value:.4g}"
            if summary.best_metric and summary.best_value is not None else "-")
    latest = str(summary.latest_checkpoint) if summary.latest_checkpoint else "-"
    cells = (summary.label, summary.status_text, epochs, str(summary.steps), best, latest)
    return tuple(printable(cell) for cell in cells)


def columns(rows: Sequence[Sequence[str]]) -> list[str]:
    """Left-aligned columns two spaces apart; the last column is not padded."""
    widths = [max(len(cell) for cell in column) for column in zip(*rows)]
    return ["  ".join(cell.ljust(width) for cell, width in zip(r, widths)).rstrip() for r in rows]


@click.command("runs")
@click.argument("directory", metavar="[DIR]", default="runs")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list instead of a table.")
def runs_command(directory: str, as_json: bool) -> None:
    """List the runs under DIR (default: runs), by name then version.

    A run whose status.json says running but whose process is gone (killed,
    machine rebooted) is shown as 'interrupted (process gone)'. BEST is the
    best value of checkpoint.best_metric over the validations.

    \b
    Examples:
      nectargan runs
      nectargan runs experiments/ --json
    """
    if not Path(directory).is_dir():
        raise RunDirError(f"{printable(directory)}: folder not found; runs are written under run.output_dir "
                          "(default: runs)")
    summaries = list(list_runs(directory))
    if as_json:
        click.echo(json.dumps([s.as_dict() for s in summaries], indent=2))
    elif not summaries:
        click.echo(printable(f"no runs under {directory} (runs live in {directory}/NAME/version_N)"))
    else:
        click.echo("\n".join(columns([HEADER, *map(row, summaries)])))
