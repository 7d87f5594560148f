"""Entry point module: registration only. It must not import torch.

Factories are given as ``"module:attribute"`` references, so torch is imported
only when a model is built; the options models are torch-free.
"""

from __future__ import annotations

from nectargan_core import hookimpl

from .cli import models_group
from .options import (
    MultiScalePatchGANOptions,
    PatchGANOptions,
    PixelGANOptions,
    ResNet6Options,
    ResNet9Options,
    ResNetOptions,
    UNet128Options,
    UNet256Options,
    UNetOptions,
)


@hookimpl
def register_models(register):
    register("unet_256", "nectargan_models.unet:build_unet_256", options=UNet256Options, role="generator",
             description="Reference pix2pix UNet for 256x256 images: 8 downsamplings, 54.4M parameters")
    register("unet_128", "nectargan_models.unet:build_unet_128", options=UNet128Options, role="generator",
             description="Reference pix2pix UNet for 128x128 images: 7 downsamplings, 41.8M parameters")
    register("unet", "nectargan_models.unet:build_unet", options=UNetOptions, role="generator",
             description="Configurable UNet: depth, widths, norm, residual blocks, resize-conv upsampling")
    register("resnet_9blocks", "nectargan_models.resnet:build_resnet_9blocks", options=ResNet9Options,
             role="generator",
             description="Reference CycleGAN ResNet, 9 residual blocks (256x256 images), 11.4M parameters")
    register("resnet_6blocks", "nectargan_models.resnet:build_resnet_6blocks", options=ResNet6Options,
             role="generator",
             description="Reference CycleGAN ResNet, 6 residual blocks (128x128 images), 7.8M parameters")
    register("resnet", "nectargan_models.resnet:build_resnet", options=ResNetOptions, role="generator",
             description="Configurable ResNet generator: blocks, downsamplings, norm, padding, resize-conv upsampling")
    register("patchgan_70", "nectargan_models.patchgan:build_patchgan", options=PatchGANOptions,
             role="discriminator", description="Reference pix2pix PatchGAN: 70x70 patches, 30x30 logits at 256")
    register("patchgan", "nectargan_models.patchgan:build_patchgan", options=PatchGANOptions,
             role="discriminator", description="Configurable PatchGAN: layers, widths, batch/instance/spectral norm")
    register("patchgan_multiscale", "nectargan_models.patchgan:build_multiscale_patchgan",
             options=MultiScalePatchGANOptions, role="discriminator",
             description="PatchGANs at 3 scales of the input (pix2pixHD); returns one logit map per scale")
    register("pixelgan", "nectargan_models.pixelgan:build_pixelgan", options=PixelGANOptions,
             role="discriminator",
             description="Reference pix2pix PixelGAN (--netD pixel): 1x1 convs, one logit per pixel")


@hookimpl
def register_commands(cli):
    cli.add_command(models_group)
