"""Entry point module: registration only. It must not import torch.

Factories are registered as ``"module:attribute"`` strings, imported only
when a run builds them; the options models are torch-free.
"""

from __future__ import annotations

from nectargan_core import hookimpl

from .options import CycleGANOptions


@hookimpl
def register_trainers(register):
    register("cyclegan", "nectargan_cyclegan.trainer:CycleGANTrainer", options=CycleGANOptions,
             description="Unpaired image-to-image translation with two generators and cycle consistency "
                         "(the CycleGAN reference step)")


@hookimpl
def register_presets(register):
    register("cyclegan-reference", "nectargan_cyclegan.presets:CYCLEGAN_REFERENCE",
             description="The CycleGAN reference's train.py and test.py recipe (200 epochs, resnet_9blocks, "
                         "pools of 50, batch 1)")
