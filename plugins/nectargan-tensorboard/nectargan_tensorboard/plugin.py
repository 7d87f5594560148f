"""Entry point module: registration only. It must not import torch or tensorboard."""

from __future__ import annotations

from nectargan_core import hookimpl

from .options import TensorBoardOptions


@hookimpl
def register_visualizers(register):
    register(
        "tensorboard",
        "nectargan_tensorboard.visualizer:TensorBoardVisualizer",
        options=TensorBoardOptions,
        description="TensorBoard event files: losses, learning rates, validation, example grids, the config",
    )
