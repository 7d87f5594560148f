"""NectarGAN losses plugin: losses, GAN objectives, loss subspecs and schedules.

Importing the package does not import torch; the plugin module only registers
names. Build things with :class:`nectargan_losses.manager.LossManager` (losses
from a ``loss`` config section) and :mod:`nectargan_losses.schedules`.
"""

from importlib.metadata import version

__version__ = version("nectargan-losses")
