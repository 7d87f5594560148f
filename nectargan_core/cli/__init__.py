"""The ``nectargan`` command line (click). Torch is imported only by commands that train."""
