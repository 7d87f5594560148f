"""Errors of this plugin (torch-free, so options and the CLI can raise them)."""

from __future__ import annotations

from nectargan_core import NectarGANError


class InputSizeError(NectarGANError, ValueError):
    """An image size the network cannot process; the message names valid sizes.

    A :class:`NectarGANError` so the CLI shows it as one line, and a
    :class:`ValueError` so plain ``except ValueError`` callers catch it too.
    """
