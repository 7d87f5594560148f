"""Entry point module: registration only. It must not import torch.

Factories are registered as ``"module:attribute"`` strings, imported only
when a run builds them; the options model is torch-free. The paired dataset
and the commands (data, test, predict, export) come with nectargan-translate.
"""

from __future__ import annotations

from nectargan_core import hookimpl

from .options import Pix2pixOptions


@hookimpl
def register_trainers(register):
    register("pix2pix", "nectargan_pix2pix.trainer:Pix2pixTrainer", options=Pix2pixOptions,
             description="Paired image-to-image translation with a conditional GAN (the pix2pix reference step)")


@hookimpl
def register_presets(register):
    register("pix2pix-reference", "nectargan_pix2pix.presets:PIX2PIX_REFERENCE",
             description="The pix2pix reference's train.py and test.py recipe (200 epochs, unet_256, batch 1, "
                         "test in train mode)")
    register("pix2pix-tiny", "nectargan_pix2pix.presets:PIX2PIX_TINY",
             description="A pix2pix run that takes seconds on a CPU (32 px, 5-level UNet, 2-layer PatchGAN, 8 "
                         "channels wide): for tests and smoke runs; the tiny_config('pix2pix') test fixture")
