"""User-facing errors.

Anything a user can cause (a bad config value, a missing file, a broken plugin)
raises a :class:`NectarGANError` whose message is one line naming the file,
key or value at fault and what to do. The CLI prints that line and exits
non-zero, with no traceback; everything else is a bug and keeps its traceback.
"""

from __future__ import annotations


class NectarGANError(Exception):
    """An error the user can fix; its message is shown as one line."""

    exit_code = 1


class ConfigError(NectarGANError):
    """A config file, key or value is invalid."""

    exit_code = 2


class PluginError(NectarGANError):
    """A plugin failed to load or register, or a named part does not exist."""


class CheckpointError(NectarGANError):
    """A checkpoint file is missing, truncated, foreign or unsafe."""


class RunDirError(NectarGANError):
    """A run directory is missing, unwritable or not a NectarGAN run."""


class TrainingError(NectarGANError):
    """Training cannot go on: a non-finite loss or weights, out of memory, a full or read-only disk."""


class NameConflictError(PluginError):
    """A bare name that several plugins provide: the user must say which one (a usage error)."""

    exit_code = 2
