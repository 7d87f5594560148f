"""NectarGAN pix2pix: paired image-to-image translation with a conditional GAN (Isola et al., 2017).

No Python API (``__all__`` is empty): the plugin is used by name, through the
registry and the command line (docs/plugins/compatibility.md).
"""

__all__: list[str] = []
