"""Entry point module: registration only, no torch import.

Losses are registered with ``gan=False`` (``loss(prediction, target)``) or
``gan=True`` (a GAN objective, chosen by ``loss.gan_mode``, see gan.py).
"""

from __future__ import annotations

from nectargan_core import hookimpl

from .options import (
    CharbonnierOptions,
    ConstantOptions,
    ExponentialOptions,
    GANOptions,
    LabelledGANOptions,
    Pix2PixLROptions,
    RampOptions,
    SmoothL1Options,
    SobelOptions,
    SSIMOptions,
    VGGOptions,
    WarmupOptions,
    WGANGPOptions,
)
from .specs import BUILTIN_SPECS

_LOSSES = "nectargan_losses.losses"
_GAN = "nectargan_losses.gan"
_SCHEDULES = "nectargan_losses.schedules"


@hookimpl
def register_losses(register):
    register("l1", "torch.nn:L1Loss", description="Mean absolute error", gan=False)
    register("l2", "torch.nn:MSELoss", description="Mean squared error", gan=False)
    register("smooth_l1", "torch.nn:SmoothL1Loss", options=SmoothL1Options,
             description="Quadratic below beta, linear above (Huber / beta)", gan=False)
    register("charbonnier", f"{_LOSSES}:Charbonnier", options=CharbonnierOptions,
             description="mean(sqrt(diff^2 + eps^2)): L1 smooth at zero", gan=False)
    register("sobel", f"{_LOSSES}:Sobel", options=SobelOptions,
             description="L1 between per-channel Sobel gradient magnitudes (or gradients)", gan=False)
    register("laplacian", f"{_LOSSES}:Laplacian",
             description="L1 between per-channel Laplacians", gan=False)
    register("ssim", f"{_LOSSES}:SSIMLoss", options=SSIMOptions,
             description="1 - SSIM of [-1, 1] images mapped to [0, 1]", gan=False)
    register("vgg", "nectargan_losses.perceptual:VGGPerceptualLoss", options=VGGOptions,
             description="VGG19 perceptual loss; weights from a local file only", gan=False)
    register("vanilla", f"{_GAN}:VanillaGAN", options=LabelledGANOptions,
             description="GAN objective: BCE with logits (pix2pix)", gan=True)
    register("lsgan", f"{_GAN}:LSGAN", options=LabelledGANOptions,
             description="GAN objective: least squares", gan=True)
    register("hinge", f"{_GAN}:HingeGAN", options=GANOptions,
             description="GAN objective: hinge", gan=True)
    register("wgan-gp", f"{_GAN}:WGANGP", options=WGANGPOptions,
             description="GAN objective: Wasserstein critic with gradient penalty", gan=True)


@hookimpl
def register_loss_specs(register):
    for name, spec in BUILTIN_SPECS.items():
        register(name, spec, description=spec.description)


@hookimpl
def register_schedules(register):
    register("constant", f"{_SCHEDULES}:Constant", options=ConstantOptions, description="A fixed value")
    register("linear", f"{_SCHEDULES}:Linear", options=RampOptions,
             description="Straight line from start_value to end_value between start and end")
    register("exponential", f"{_SCHEDULES}:Exponential", options=ExponentialOptions,
             description="Geometric change from start_value to end_value between start and end")
    register("cosine", f"{_SCHEDULES}:Cosine", options=RampOptions,
             description="Half-cosine from start_value to end_value between start and end")
    register("warmup", f"{_SCHEDULES}:Warmup", options=WarmupOptions,
             description="Linear warm-up to end_value, then constant or the 'then' schedule")
    register("pix2pix_linear", f"{_SCHEDULES}:Pix2PixLinear", options=Pix2PixLROptions,
             description="pix2pix LR policy: constant for n_epochs, linear decay over n_epochs_decay")
