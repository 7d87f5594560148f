"""Built-in plugin ``core``: the console visualizer."""

from __future__ import annotations

from nectargan_core import hookimpl

from .console import ConsoleOptions


@hookimpl
def register_visualizers(register):
    register(
        "console",
        "nectargan_core.builtin.console:ConsoleVisualizer",
        options=ConsoleOptions,
        description="Progress and losses on the terminal (plain lines when not a terminal)",
    )
