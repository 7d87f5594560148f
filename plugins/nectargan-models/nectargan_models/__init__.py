"""NectarGAN models: the pix2pix/CycleGAN reference networks, configurable variants, and weight conversion.

This package's ``__all__`` is the distribution's public API
(docs/plugins/compatibility.md); its submodules are internal. Importing the
package does not import torch: the networks load on first access.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nectargan_core import lazy_exports

if TYPE_CHECKING:  # the public names, loaded on first access (nectargan_core.lazy_exports reads this block)
    from .errors import InputSizeError
    from .unet import UNet, build_unet, build_unet_128, build_unet_256, check_multiple
    from .resnet import ResNetGenerator, build_resnet, build_resnet_6blocks, build_resnet_9blocks
    from .patchgan import (MultiScalePatchGAN, PatchGAN, build_multiscale_patchgan, build_patchgan, output_size,
                           receptive_field)
    from .pixelgan import PixelGAN, build_pixelgan
    from .options import (MultiScalePatchGANOptions, PatchGANOptions, PixelGANOptions, ResNet6Options, ResNet9Options,
                          ResNetOptions, UNet128Options, UNet256Options, UNetOptions)
    # the reference implementation's state dicts, both ways
    from .reference import from_reference, reference_build, to_reference
    from .importing import import_reference

__all__ = [
    "InputSizeError",
    "UNet", "build_unet", "build_unet_128", "build_unet_256", "check_multiple",
    "ResNetGenerator", "build_resnet", "build_resnet_6blocks", "build_resnet_9blocks",
    "PatchGAN", "build_patchgan", "output_size", "receptive_field", "MultiScalePatchGAN", "build_multiscale_patchgan",
    "MultiScalePatchGANOptions", "PixelGAN", "build_pixelgan",
    "PatchGANOptions", "PixelGANOptions", "ResNet6Options", "ResNet9Options", "ResNetOptions", "UNet128Options",
    "UNet256Options", "UNetOptions",
    "from_reference", "reference_build", "to_reference", "import_reference",
]

__getattr__, __dir__ = lazy_exports(__name__, __file__)
