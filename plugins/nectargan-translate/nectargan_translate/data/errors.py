"""Errors of the data layer (torch-free, so the CLI and options can raise them)."""

from __future__ import annotations

from nectargan_core import NectarGANError


class DatasetError(NectarGANError):
    """A dataset folder or image is missing, unreadable or inconsistent; the message names the file."""


class DownloadError(NectarGANError):
    """A download failed, did not match its checksum, or its archive is unsafe."""
