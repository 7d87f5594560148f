"""Built-in plugin ``core``: the console visualizer and the run-inspection commands."""

from __future__ import annotations

from nectargan_core import hookimpl
from nectargan_core.cli.plot_cmd import plot_command
from nectargan_core.cli.report_cmd import report_command
from nectargan_core.cli.runs_cmd import runs_command

from .console import ConsoleOptions


@hookimpl
def register_visualizers(register):
    register(
        "console",
        "nectargan_core.builtin.console:ConsoleVisualizer",
        options=ConsoleOptions,
        description="Progress and losses on the terminal (plain lines when not a terminal)",
    )


@hookimpl
def register_commands(cli):
    for command in (runs_command, plot_command, report_command):
        cli.add_command(command)
