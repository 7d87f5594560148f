"""NectarGAN losses plugin: losses, GAN objectives, loss subspecs and schedules.

This package's ``__all__`` is the distribution's public API
(docs/plugins/compatibility.md); its submodules are internal. Importing the
package does not import torch; the plugin module only registers names. Build
losses from a ``loss`` config section with :class:`LossManager`.
"""

from __future__ import annotations

from importlib.metadata import version
from typing import TYPE_CHECKING

from nectargan_core import lazy_exports

__version__ = version("nectargan-losses")

if TYPE_CHECKING:  # the public names, loaded on first access (nectargan_core.lazy_exports reads this block)
    from .manager import LossManager, LossResult
    from .config import LossSection, gan_objectives, validated_options
    from .specs import LossSpec, TermSpec
    from .gan import LSGAN, WGANGP, GANObjective, HingeGAN, VanillaGAN, gradient_penalty, per_scale
    from .options import ScheduleChoice
    from .schedules import (Constant, Cosine, Exponential, HeldAfter, Linear, Pix2PixLinear, Ramp, Schedule, Warmup,
                            build_schedule, lr_scheduler, refresh_lr)

__all__ = [
    "__version__", "LossManager", "LossResult", "LossSection", "gan_objectives", "validated_options", "LossSpec",
    "TermSpec",
    "GANObjective", "VanillaGAN", "LSGAN", "HingeGAN", "WGANGP", "gradient_penalty", "per_scale", "ScheduleChoice", "Constant", "Cosine", "Exponential", "HeldAfter",
    "Linear",
    "Pix2PixLinear", "Ramp", "Schedule", "Warmup", "build_schedule", "lr_scheduler", "refresh_lr",
]

__getattr__, __dir__ = lazy_exports(__name__, __file__)
