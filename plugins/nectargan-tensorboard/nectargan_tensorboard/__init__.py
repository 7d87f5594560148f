"""NectarGAN's TensorBoard visualizer.

Importing this package imports neither torch nor tensorboard; the writer lives
in :mod:`nectargan_tensorboard.visualizer`, loaded only by runs that enable it.

No Python API (``__all__`` is empty): the plugin is used by name, through the
registry and the command line (docs/plugins/compatibility.md).
"""

__all__: list[str] = []
