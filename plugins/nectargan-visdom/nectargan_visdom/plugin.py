"""Entry point module: registration only. Neither torch nor visdom is imported here."""

from __future__ import annotations

from nectargan_core import hookimpl

from .cli import visdom_group
from .options import VisdomOptions


@hookimpl
def register_visualizers(register):
    register("visdom", "nectargan_visdom.visualizer:VisdomVisualizer", options=VisdomOptions,
             description="Live loss, learning-rate and validation curves, example grids and the config in visdom")


@hookimpl
def register_commands(cli):
    cli.add_command(visdom_group)
