"""Live training plots in visdom for NectarGAN runs, sent without ever slowing training.

No Python API (``__all__`` is empty): the plugin is used by name, through the
registry and the command line (docs/plugins/compatibility.md).
"""

__all__: list[str] = []
