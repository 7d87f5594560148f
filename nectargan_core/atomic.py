"""Crash-safe file writes: temp file in the same folder, fsync, rename.

A reader (or a resumed run) sees either the old file or the new one, never a
partial write, even if the process dies or the disk fills mid-write.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import BinaryIO, Callable

#: ``.NAME.tmp-PID``: the temp file of a write in progress (or of one killed mid-write) by process PID.
TEMP_PATTERN = re.compile(r"^\.(?P<name>.+)\.tmp-(?P<pid>\d+)$")


def temp_path(path: Path) -> Path:
    """The temp file that this process writes ``path`` through."""
    return path.with_name(f".{path.name}.tmp-{os.getpid()}")


def pid_alive(pid: int) -> bool:
    """Whether a process with this id exists on this machine (another user's counts)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:  # pragma: no cover - e.g. a pid out of range
        return False
    return True


def remove_stale_temps(folder: Path) -> list[Path]:
    """Delete the temp files in ``folder`` left by writers that died mid-write (SIGKILL, power loss).

    Only files whose writer PID is not alive are removed: a live writer's temp is
    a write in progress. Returns what was removed.
    """
    removed = []
    try:
        entries = list(folder.iterdir())
    except OSError:
        return removed
    for entry in sorted(entries):
        match = TEMP_PATTERN.match(entry.name)
        if match is None or pid_alive(int(match.group("pid"))) or not entry.is_file():
            continue
        try:
            entry.unlink()
        except FileNotFoundError:  # another resume removed it first
            continue
        removed.append(entry)
    return removed


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # pragma: no cover - not supported on some platforms
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def atomic_write(path: Path, write: Callable[[BinaryIO], None]) -> None:
    """Call ``write(handle)`` on a temp file next to ``path``, fsync, then rename it over ``path``."""
    tmp = temp_path(path)
    try:
        with open(tmp, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write(path, lambda handle: handle.write(text.encode("utf-8")))
