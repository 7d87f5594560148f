"""Entry point module: registration only. It must not import torch.

Factories are registered as ``"module:attribute"`` strings, imported only
when a run builds them; the options models and the CLI group are torch-free.
"""

from __future__ import annotations

from nectargan_core import hookimpl

from .commands import COMMANDS
from .data.options import PairedDataOptions
from .data_cli import data_group
from .options import Pix2pixOptions


@hookimpl
def register_trainers(register):
    register("pix2pix", "nectargan_pix2pix.trainer:Pix2pixTrainer", options=Pix2pixOptions,
             description="Paired image-to-image translation with a conditional GAN (the pix2pix reference step)")


@hookimpl
def register_datasets(register):
    register("paired", "nectargan_pix2pix.data.dataset:build_paired_dataset", options=PairedDataOptions,
             description="Paired A/B images: aligned A|B files or A/ and B/ folders, train/val/test splits")


@hookimpl
def register_commands(cli):
    cli.add_command(data_group)
    for command in COMMANDS:
        cli.add_command(command)


@hookimpl
def register_presets(register):
    register("pix2pix-reference", "nectargan_pix2pix.presets:PIX2PIX_REFERENCE",
             description="The pix2pix reference's train.py and test.py recipe (200 epochs, unet_256, batch 1, "
                         "test in train mode)")
    register("pix2pix-tiny", "nectargan_pix2pix.presets:PIX2PIX_TINY",
             description="A pix2pix run that takes seconds on a CPU (32 px, 5-level UNet, 2-layer PatchGAN, 8 "
                         "channels wide): for tests and smoke runs; the tiny_config('pix2pix') test fixture")
