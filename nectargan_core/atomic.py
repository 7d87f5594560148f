"""Crash-safe writes: build in a temp file or folder beside the target, fsync, rename.

A reader (or a resumed run) sees either the old file or the new one, never a
partial write, even if the process dies or the disk fills mid-write.

* :func:`atomic_write` writes one file (checkpoints, status, metrics, images).
* :func:`staging` gives a temp folder to build a whole output in (a dataset, an
  export and its sidecar); :func:`commit_folder` renames a built folder into
  place, :func:`commit_files` moves built files and the record describing them.

Every temp name is ``.NAME.tmp-PID``: a writer killed midway (SIGKILL, power
loss) leaves one, which the next process that writes into that folder (or a
resume) deletes once PID is no longer alive. A failed write names its target in the OSError
(``filename``), so the CLI can report it in one line (:func:`describe_os_error`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
from pathlib import Path
from typing import BinaryIO, Callable, Iterator, Optional, Sequence

from .errors import FolderTakenError
from .text import printable

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


def remove_stale_temps(folder: Path, name: Optional[str] = None) -> list[Path]:
    """Delete the temp files and folders in ``folder`` left by writers that died mid-write (SIGKILL, power loss).

    Only those whose writer PID is not alive are removed: a live writer's temp is
    a write in progress. ``name``: only the temps of that target. Returns what was removed.
    """
    removed = []
    try:
        entries = list(folder.iterdir())
    except OSError:
        return removed
    for entry in sorted(entries):
        match = TEMP_PATTERN.match(entry.name)
        if match is None or (name is not None and match.group("name") != name) or pid_alive(int(match.group("pid"))):
            continue
        try:
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
        except OSError:  # another resume removed it first, or the folder is read-only: leave it
            continue
        removed.append(entry)
    return removed


#: ``(pid, folder)`` pairs already swept by :func:`sweep_stale_temps` in this process.
_SWEPT: set[tuple[int, str]] = set()


def output_taken(target: Path) -> bool:
    """Whether a command's new output ``target`` already holds something (a file, or a folder that is not empty).

    Asked before refusing such a target: what a killed earlier run of a command
    left beside it (its staging folder ``.NAME.tmp-PID``) is removed first, so a
    refusal never leaves that behind for good.
    """
    if target.parent.is_dir():
        remove_stale_temps(target.parent, target.name)
    try:
        return target.exists() and not (target.is_dir() and not any(target.iterdir()))
    except OSError:  # a folder that cannot be listed is not an empty one
        return True


def sweep_stale_temps(folder: Path) -> list[Path]:
    """:func:`remove_stale_temps` of ``folder``, once per process: the first write into a folder clears what a
    killed earlier run left there (``data split --copy``, ``test``, ``predict`` and every other writer)."""
    key = (os.getpid(), os.path.abspath(folder))
    if key in _SWEPT:
        return []
    _SWEPT.add(key)
    return remove_stale_temps(folder)


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


def _fsync_tree(folder: Path) -> None:
    """Flush every file and folder under ``folder`` to disk, so a rename publishes complete contents."""
    for parent, _, files in os.walk(folder):
        for name in files:
            fd = os.open(os.path.join(parent, name), os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        _fsync_dir(Path(parent))


def os_error_of(exc: Optional[BaseException]) -> Optional[OSError]:
    """``exc`` if it is an OSError, else the OSError it was raised from or during, if any.

    ``torch.save`` reports a failed ``write()`` (ENOSPC, EFBIG) of the file it writes to as a
    RuntimeError ("unexpected pos ..."), with the OSError as its context.
    """
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, OSError):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


def _name_target(exc: BaseException, target: Path, *temps: Path) -> None:
    """Make the OSError behind ``exc`` name ``target`` (or the file in it) instead of nothing or a temp name."""
    cause = os_error_of(exc)
    if cause is None:
        return
    if cause.filename is None:
        cause.filename = str(target)
        return
    name = os.fsdecode(cause.filename) if isinstance(cause.filename, (str, bytes)) else str(cause.filename)
    for temp in map(str, temps):
        if name == temp or name.startswith(temp + os.sep):
            cause.filename = str(target) + name[len(temp):]
            return


def atomic_write(path: Path, write: Callable[[BinaryIO], None]) -> None:
    """Call ``write(handle)`` on a temp file next to ``path``, fsync, then rename it over ``path``.

    The first write into a folder in this process deletes the temps dead writers left there (:func:`sweep_stale_temps`).
    """
    sweep_stale_temps(path.parent)
    tmp = temp_path(path)
    try:
        with open(tmp, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):  # on a read-only file system even unlinking a missing file fails (EROFS)
            tmp.unlink()
        _name_target(exc, path, tmp)
        raise
    _fsync_dir(path.parent)


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` as UTF-8 to ``path`` complete or not at all (:func:`atomic_write`)."""
    atomic_write(path, lambda handle: handle.write(text.encode("utf-8")))


@contextlib.contextmanager
def new_folder(path: Path) -> Iterator[Path]:
    """Make ``path`` (and missing parents) for a command's outputs; after a failure, remove again the folders
    this made that are still empty, so that a command that wrote nothing leaves nothing (not an empty folder)."""
    missing = missing_folders(path)
    Path(path).mkdir(parents=True, exist_ok=True)
    try:
        yield Path(path)
    except BaseException:
        remove_if_empty(missing)
        raise


def missing_folders(path: Path) -> list[Path]:
    """``path`` and those of its parents that do not exist yet, deepest first (what a ``mkdir -p`` would make)."""
    missing = []
    folder = Path(path)
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    return missing


def remove_if_empty(folders: list[Path]) -> None:
    """Remove ``folders`` (deepest first, as :func:`missing_folders` lists them) while they are empty."""
    for made in folders:  # one that holds something stays, with its parents
        try:
            made.rmdir()
        except OSError:
            break


@contextlib.contextmanager
def staging(target: Path) -> Iterator[Path]:
    """A new, empty temp folder ``.NAME.tmp-PID`` beside ``target``, to build it in.

    Stale temps of ``target`` (their writer is dead) are removed first. On leaving
    the block, whatever is still in the folder is deleted: everything after an
    error or a signal, nothing after :func:`commit_folder` moved it into place.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    sweep_stale_temps(target.parent)
    remove_stale_temps(target.parent, target.name)
    stage = temp_path(target)
    if stage.exists():  # this PID's leftover from an earlier process that had the same id
        shutil.rmtree(stage) if stage.is_dir() and not stage.is_symlink() else stage.unlink()
    try:
        stage.mkdir()
        yield stage
    except BaseException as exc:
        _name_target(exc, target, stage)
        raise
    finally:
        if stage.is_dir() and not stage.is_symlink():
            shutil.rmtree(stage, ignore_errors=True)


def commit_folder(built: Path, target: Path) -> None:
    """Flush ``built`` to disk and rename it to ``target`` (which must be absent or an empty folder).

    When another process filled ``target`` (or put a file there) since the caller checked it, this one lost the
    race: :class:`~nectargan_core.errors.FolderTakenError`, one line; ``built`` is left for the caller's staging
    to remove and ``target`` is not touched.
    """
    _fsync_tree(built)
    if os.path.islink(target):  # the rename would replace the link, not fill the folder it points to
        raise FolderTakenError(printable(f"{target}: is a symbolic link; the output appears by a rename, so give "
                                         "the folder it points to, or a new name"))
    try:
        os.rename(built, target)
    except OSError as exc:
        if exc.errno in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR, errno.EISDIR):
            raise FolderTakenError(printable(
                f"{target}: another process wrote it while this one worked; nothing of this run was kept there: "
                "use that one, or choose a new folder")) from None
        raise
    _fsync_dir(target.parent)


def commit_files(stage: Path, folder: Path, names: Sequence[str], record: str) -> None:
    """Move ``stage/NAME`` for each of ``names``, then the ``record`` describing them, into ``folder``.

    The old record is deleted first and the new one moved in last, so a process
    killed in between leaves the files without a record, never a record beside
    files it does not describe. Each file is replaced by one rename: a reader
    sees the old file or the new one.
    """
    _fsync_tree(stage)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / record).unlink(missing_ok=True)
    _fsync_dir(folder)
    for name in (*names, record):
        os.replace(stage / name, folder / name)
    _fsync_dir(folder)


#: What the machine, not the code, is at fault for when a write fails.
ENVIRONMENT_ERRNOS = {
    errno.ENOSPC: "free disk space or write somewhere else",
    errno.EDQUOT: "free space in your quota or write somewhere else",
    errno.EFBIG: "raise the file size limit (ulimit -f) or write somewhere else",
    errno.EROFS: "write somewhere else",
    errno.EACCES: "check the permissions or write somewhere else",
    errno.EPERM: "check the permissions or write somewhere else",
    errno.ENOTDIR: "a part of the path is a file, not a folder; choose another path",
    errno.ENAMETOOLONG: "choose a shorter path",
    errno.EIO: "the disk reported an input/output error; check it or write somewhere else",
    errno.ENOENT: "it, or a folder on its path, was removed or moved while the command ran; run it again",
}


def describe_os_error(exc: BaseException, *, with_file: bool = True) -> Optional[str]:
    """One line for a fault of the environment (full, read-only, size-limited disk) behind ``exc``, else None.

    ``FILE: REASON; WHAT TO DO`` (without ``FILE: `` when ``with_file`` is false or no file is known).
    """
    cause = os_error_of(exc)
    if cause is not None and cause.errno == errno.EEXIST and cause.filename is not None \
            and os.path.lexists(cause.filename) and not os.path.isdir(cause.filename):  # a folder wanted, a file found
        where = f"{os.fsdecode(cause.filename)}: " if with_file else ""
        return f"{where}exists and is not a folder; choose another path"
    if cause is None or cause.errno not in ENVIRONMENT_ERRNOS:
        return None
    where = f"{target_of(os.fsdecode(cause.filename))}: " if with_file and cause.filename else ""
    return f"{where}{cause.strerror or os.strerror(cause.errno)}; {ENVIRONMENT_ERRNOS[cause.errno]}"


def target_of(path: str) -> str:
    """``path`` with a staging folder ``.NAME.tmp-PID`` shown as the ``NAME`` it becomes (users know that one)."""
    return "/".join(re.sub(r"^\.(.+)\.tmp-\d+$", r"\1", part) for part in path.split("/"))
