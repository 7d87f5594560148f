"""One writer per run: the lock a training process holds on its run directory.

Two processes training the same run directory (``nectargan train --resume``
started twice, a restarted service next to a survivor) would both write
checkpoints and interleave ``metrics.jsonl``. The process that trains a run
holds an exclusive ``flock`` on ``RUN_DIR/run.lock`` from the moment it opens
the run until it ends; a second one is refused with one line naming the
holder (pid, host, since when: from the kernel's lock table on this machine,
else from the file). The kernel releases the lock when its holder exits,
however it exits (SIGKILL, out of memory), so a lock left by a dead process is
simply taken over; the file itself only records who holds it. A resume
records itself only once it has succeeded, so a resume that fails leaves the
file as it was.

Readers (``nectargan runs``, the report) use :func:`is_held` to tell a run
that is being trained from one whose ``status.json`` still says ``running``
because its process was killed.

The lock is not passed to child processes: a DataLoader worker forked from
the holder closes its copy at once, so a lingering worker cannot keep a dead
trainer's run locked. ``flock`` works on local file systems and on NFS (as a
POSIX lock, on Linux); on file systems without locking the run is not
protected, and that is said once.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import sys
import time
import weakref
from pathlib import Path
from typing import Any, Optional

from .atomic import pid_alive
from .errors import RunDirError
from .filekind import NotRegularFile, open_regular

LOCK_NAME = "run.lock"
#: How long to retry a lock held by a process that is gone but whose forked children still hold it.
DEAD_HOLDER_WAIT_S = 10.0
#: How long to retry a busy lock before looking at who holds it (readers hold it for microseconds).
BUSY_WAIT_S = 1.0

_held: "weakref.WeakSet[RunLock]" = weakref.WeakSet()


class RunInUseError(RunDirError):
    """Another process is training this run."""


class RunLostError(RunInUseError):
    """Another process took the run while this one trained it (its ``run.lock`` was deleted or replaced)."""


class RunLock:
    """The exclusive lock on one run directory, held until :meth:`release` (or the process ends)."""

    def __init__(self, path: Path, fd: Optional[int], previous: Optional[dict[str, Any]] = None,
                 created: bool = False) -> None:
        self.path = path
        self._fd = fd
        #: Who held the run before (as its lock file recorded), if anyone did.
        self.previous = previous
        #: Whether this lock made the lock file (a run older than the lock), and whether it recorded itself.
        self.created = created
        self.recorded = False

    @property
    def held(self) -> bool:
        return self._fd is not None

    @classmethod
    def acquire(cls, run_dir: str | Path, *, record: bool = True) -> "RunLock":
        """Lock ``run_dir`` for this process, or raise :class:`RunInUseError` naming the holder.

        ``record``: write this process into the lock file now. A resume passes
        False and calls :meth:`record` once it has succeeded, so that a resume
        that fails leaves the file (and the whole run directory) as it was.
        """
        path = Path(run_dir) / LOCK_NAME
        started = time.monotonic()
        while True:
            created = not path.exists()
            try:  # never through a link (it could point outside the run), never a FIFO (it would block)
                fd = open_regular(path, os.O_RDWR | os.O_CREAT, 0o644, follow_links=False)
            except NotRegularFile as exc:
                raise RunDirError(f"{path}: the run's lock file is {exc.strerror}, not a file; remove it (the next "
                                  "run that takes this run directory makes a new one)") from None
            except IsADirectoryError:
                raise RunDirError(f"{path}: the run's lock file is a folder, not a file; remove it (the next run "
                                  "that takes this run directory makes a new one)") from None
            except OSError as exc:
                raise RunDirError(f"{path}: cannot create the run's lock file: {exc.strerror}; "
                                  "check that the run directory is writable") from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                waited = time.monotonic() - started
                holder = current_holder(path)
                if waited < BUSY_WAIT_S or (waited < DEAD_HOLDER_WAIT_S and holder_gone(holder)):
                    time.sleep(0.05)
                    continue
                raise in_use(run_dir, holder) from None
            except OSError as exc:
                os.close(fd)
                if exc.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS):
                    raise RunDirError(f"{path}: cannot lock the run: {exc.strerror}") from None
                print(f"warning: {path}: this file system does not support locks ({exc.strerror}); nothing "
                      "stops a second process from training this run at the same time", file=sys.stderr)
                return cls(path, None)
            if _same_file(path, fd):
                break
            os.close(fd)  # the file was removed or replaced while we waited for it: lock the one there now
        lock = cls(path, fd, read_holder(path) or None, created)
        _held.add(lock)
        if record:
            lock.record()
        return lock

    def ensure(self) -> None:
        """Check, before a write, that this process still holds the run; called at every write of the trainer.

        Deleting or replacing ``run.lock`` while a run trains (by hand, a
        cleanup script, ``rsync --delete``) would let a second writer lock a
        new file. A file that is gone or replaced is locked again, with a
        warning; when another process has locked it meanwhile, that process now
        trains the run: :class:`RunLostError` stops this one before it writes
        anything more.
        """
        fd = self._fd
        if fd is None or _same_file(self.path, fd):
            return
        try:
            new = RunLock.acquire(self.path.parent, record=False)
        except RunInUseError:
            holder = describe_holder(current_holder(self.path))
            raise RunLostError(
                f"{self.path}: the run's lock file was deleted or replaced while this process trained the run, "
                f"and {holder} has taken the run since; this process stopped without writing anything more "
                "(two writers would mix the run's files); never delete run.lock of a live run") from None
        _held.discard(new)
        self._fd, new._fd = new._fd, None
        os.close(fd)
        self.record()
        _held.add(self)
        print(f"warning: {self.path} was deleted or replaced while this process trained the run; locked it "
              "again (never delete run.lock of a live run: a second writer could take the run)",
              file=sys.stderr, flush=True)

    def record(self) -> None:
        """Write who holds the run (pid, host, since when) into the lock file, for a refused second writer."""
        if self._fd is None:
            return
        data = (json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "since": time.time()}) + "\n").encode()
        try:
            os.pwrite(self._fd, data, 0)
            os.ftruncate(self._fd, len(data))
        except OSError as exc:  # a full disk or a file size limit: name the file, as every other write does
            raise OSError(exc.errno, exc.strerror, str(self.path)) from None
        self.recorded = True

    def release(self, *, undo: bool = False) -> None:
        """Let go of the run (the file stays: it records the last holder).

        ``undo``: the run was not trained after all (a resume that failed): a
        lock file this lock created and never wrote is removed again.
        """
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            if undo and self.created and not self.recorded:
                self.path.unlink(missing_ok=True)  # before unlocking: whoever locks next re-checks the file
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def _close_in_child(self) -> None:
        """In a forked child: drop this process's copy of the descriptor (the parent keeps the lock)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    def __del__(self) -> None:  # a Run dropped without close(): the lock goes with it
        try:
            self.release()
        except Exception:  # noqa: BLE001 - at interpreter exit os may be gone
            pass


def _same_file(path: Path, fd: int) -> bool:
    try:
        named, held = os.stat(path), os.fstat(fd)
    except OSError:
        return False
    return (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino)


def _after_fork_in_child() -> None:
    for lock in list(_held):
        lock._close_in_child()


os.register_at_fork(after_in_child=_after_fork_in_child)


def is_held(run_dir: str | Path) -> Optional[bool]:
    """Whether some process holds ``run_dir``'s lock; None when the run has no lock file (older runs)."""
    path = Path(run_dir) / LOCK_NAME
    try:
        fd = open_regular(path, follow_links=False)
    except OSError:  # none, or not a lock file (a FIFO would block a plain open)
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return None
    finally:
        os.close(fd)  # closing drops the probe's shared lock at once
    return False


def check_free(run_dir: str | Path) -> None:
    """Raise :class:`RunInUseError` now if another process trains ``run_dir`` (a check before starting)."""
    if is_held(run_dir):
        raise in_use(run_dir, current_holder(Path(run_dir) / LOCK_NAME))


def current_holder(path: Path) -> dict[str, Any]:
    """Who holds the lock file ``path``: the process this machine's kernel names (``/proc/locks``), or else
    the one the file records (a holder on another machine sharing the folder, or no ``/proc``)."""
    recorded = read_holder(path)
    pid = _local_lock_holder(path)
    if pid is None:
        return recorded
    here = {"pid": pid, "host": socket.gethostname()}
    return {**here, "since": recorded["since"]} if recorded.get("pid") == pid and "since" in recorded else here


def _local_lock_holder(path: Path) -> Optional[int]:
    """The pid holding a ``flock`` on ``path`` according to ``/proc/locks`` (Linux), or None."""
    try:
        info = os.stat(path)
        with open("/proc/locks") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return None
    for line in lines:
        fields = line.split()
        if len(fields) < 6 or fields[1] != "FLOCK" or fields[2] == "->":
            continue
        try:
            major, minor, inode = fields[5].split(":")
            if (int(inode), os.makedev(int(major, 16), int(minor, 16))) == (info.st_ino, info.st_dev):
                return int(fields[4])
        except ValueError:
            continue
    return None


def in_use(run_dir: str | Path, holder: dict[str, Any]) -> RunInUseError:
    return RunInUseError(f"{run_dir}: {describe_holder(holder)} is training this run; one process writes a "
                         "run: wait for it to end, or stop it first")


def read_holder(path: Path) -> dict[str, Any]:
    try:
        with os.fdopen(open_regular(path, follow_links=False), "rb") as handle:
            data = json.loads(handle.read(4096))  # a record is under 100 bytes
    except (OSError, ValueError, RecursionError):
        return {}
    return data if isinstance(data, dict) else {}


def describe_holder(holder: dict[str, Any]) -> str:
    if not holder.get("pid"):
        return "another process"
    since = holder.get("since")
    try:
        when = f" since {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(since))}" if isinstance(since, (int, float)) else ""
    except (OverflowError, OSError, ValueError):  # a crafted or damaged record: a time no clock shows
        when = ""
    return f"process {holder['pid']} on {holder.get('host', 'an unknown host')}{when}"


def holder_gone(holder: dict[str, Any]) -> bool:
    """Whether the recorded holder is a process of this host that no longer exists."""
    pid = holder.get("pid")
    if holder.get("host") != socket.gethostname() or not isinstance(pid, int) or pid <= 0:
        return False
    return not pid_alive(pid)


