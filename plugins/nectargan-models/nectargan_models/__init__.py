"""NectarGAN models: the reference pix2pix UNet and PatchGAN, and configurable variants.

Importing this package does not import torch; the networks live in
:mod:`nectargan_models.unet` and :mod:`nectargan_models.patchgan`.
"""
