"""NectarGAN models: the pix2pix/CycleGAN reference networks, configurable variants, and weight conversion.

Importing this package does not import torch; the networks live in
:mod:`nectargan_models.unet`, :mod:`nectargan_models.resnet`,
:mod:`nectargan_models.patchgan` and :mod:`nectargan_models.pixelgan`, the
mapping to and from the reference's state dicts in
:mod:`nectargan_models.reference` and its command in
:mod:`nectargan_models.importing`.
"""
