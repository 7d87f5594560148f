"""User-facing errors.

Anything a user can cause (a bad config value, a missing file, a broken plugin)
raises a :class:`NectarGANError` whose message is one line naming the file,
key or value at fault and what to do. The CLI prints that line and exits
non-zero, with no traceback; everything else is a bug and keeps its traceback.
"""

from __future__ import annotations

#: How torch's DataLoader re-raises an exception from a worker process: the class, rebuilt from this text.
WORKER_PREFIX = "Caught "
WORKER_MARK = " in DataLoader worker process "


class NectarGANError(Exception):
    """An error the user can fix; its message is shown as one line.

    Raised in a DataLoader worker process (a corrupt image, say), it reaches
    the main process rebuilt by torch from a text holding the worker's whole
    traceback; the error then takes back its own one-line message (the
    traceback stays in ``worker_traceback``), so the user still sees one line
    naming the file.
    """

    exit_code = 1

    def __init__(self, *args: object) -> None:
        self.worker_traceback: str | None = None
        if len(args) == 1 and isinstance(args[0], str):
            original = _message_from_worker(args[0], type(self))
            if original is not None:
                self.worker_traceback, args = args[0], (original,)
        super().__init__(*args)


def _message_from_worker(text: str, cls: type) -> str | None:
    """The original message inside torch's text for an exception re-raised from a DataLoader worker."""
    head = text.split("\n", 1)[0]
    if not (head.startswith(WORKER_PREFIX + cls.__name__ + WORKER_MARK) and "\nOriginal Traceback" in text):
        return None
    marker = f"{cls.__module__}.{cls.__qualname__}: "
    start = text.rfind("\n" + marker)
    if start < 0:
        return None
    return text[start + 1 + len(marker):].strip() or None


class ConfigError(NectarGANError):
    """A config file, key or value is invalid."""

    exit_code = 2


class PluginError(NectarGANError):
    """A plugin failed to load or register, or a named part does not exist."""


class CheckpointError(NectarGANError):
    """A checkpoint file is missing, truncated, foreign or unsafe."""


class RunDirError(NectarGANError):
    """A run directory is missing, unwritable or not a NectarGAN run."""


class FolderTakenError(NectarGANError):
    """A complete-or-absent output lost a race: another process filled its target folder (or put a file there)
    while this one built it. Nothing of this process is kept."""


class TrainingError(NectarGANError):
    """Training cannot go on: a non-finite loss or weights, out of memory, a full or read-only disk."""


class NameConflictError(PluginError):
    """A bare name that several plugins provide: the user must say which one (a usage error)."""

    exit_code = 2
