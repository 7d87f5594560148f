"""NectarGAN's TensorBoard visualizer.

Importing this package imports neither torch nor tensorboard; the writer lives
in :mod:`nectargan_tensorboard.visualizer`, loaded only by runs that enable it.
"""
