"""Output locations that refuse writes, made with what the kernel enforces (the tests run as root).

* ``read-only``: a read-only bind mount of a folder (root ignores ``chmod``); as a
  non-root user, where mounting is not permitted, a folder without write permission.
* ``full``: a tmpfs holding the seeded contents, then filled up to ``slack`` free bytes (skipped where
  mounting is not permitted).
* ``size limit``: an ordinary folder, and a command whose ``RLIMIT_FSIZE`` is 16 bytes (SIGXFSZ ignored, so
  ``write()`` fails with EFBIG): a full disk that needs no mount, available everywhere. (16, not 0: Python's
  ``tempfile`` probes its folder with a 4-byte write, and no output of a command is that small.)

Each location is a :class:`Location`; :func:`run_nectargan` runs the CLI with its limit.
"""

from __future__ import annotations

import os
import resource
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

import pytest

KINDS = ("read-only", "full", "size limit")
PAGE = os.sysconf("SC_PAGE_SIZE")


@dataclass
class Location:
    kind: str
    path: Path
    #: RLIMIT_FSIZE for the command (size limit only)
    fsize: Optional[int] = None
    mounts: list[Path] = field(default_factory=list)

    def preexec(self) -> Optional[Callable[[], None]]:
        if self.fsize is None:
            return None
        limit = self.fsize

        def limited() -> None:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

        return limited


def _mount(args: list[str]) -> Optional[str]:
    """Run mount; None on success, else why not."""
    if shutil.which("mount") is None:
        return "no mount command"
    done = subprocess.run(["mount", *args], capture_output=True, text=True)
    return None if done.returncode == 0 else (done.stderr.strip() or f"mount exited {done.returncode}")


def usage(folder: Path) -> int:
    """Bytes a tmpfs needs for the files under ``folder`` (whole pages, plus a page per folder)."""
    total = PAGE
    for path in folder.rglob("*"):
        total += PAGE if path.is_dir() else -(-path.stat().st_size // PAGE) * PAGE
    return total


def make_location(kind: str, root: Path, seed: Optional[Callable[[Path], None]] = None, *,
                  slack: int = 8 * PAGE, fsize: int = 16) -> Location:
    """A location of ``kind`` under ``root`` whose contents ``seed(folder)`` wrote while it was writable.

    ``slack``: free bytes left in a full tmpfs; ``fsize``: the size limit's bytes.
    """
    source = root / f"{kind.replace(' ', '-')}-contents"
    source.mkdir(parents=True)
    if seed is not None:
        seed(source)
    if kind == "size limit":
        return Location(kind, source, fsize=fsize)
    point = root / kind.replace(" ", "-")
    point.mkdir()
    if kind == "read-only":
        if os.geteuid() != 0:
            os.chmod(source, 0o555)
            return Location(kind, source)
        problem = _mount(["--bind", str(source), str(point)])
        if problem is None:
            problem = _mount(["-o", "remount,bind,ro", str(point)])
            if problem is not None:
                subprocess.run(["umount", str(point)], check=False)
        if problem is not None:
            pytest.skip(f"cannot make a read-only bind mount here: {problem}")
        return Location(kind, point, mounts=[point])
    if kind == "full":
        problem = _mount(["-t", "tmpfs", "-o", f"size={usage(source) + slack + 64 * PAGE}", "tmpfs", str(point)])
        if problem is not None:
            pytest.skip(f"cannot mount a tmpfs here: {problem}")
        try:
            for entry in source.iterdir():
                (shutil.copytree if entry.is_dir() else shutil.copy2)(entry, point / entry.name)
            fill(point / ".filler", slack)
        except BaseException:
            subprocess.run(["umount", str(point)], check=False)
            raise
        return Location(kind, point, mounts=[point])
    raise ValueError(kind)


def fill(filler: Path, leave: int) -> None:
    """Write ``filler`` until the file system is full, then give back ``leave`` bytes."""
    with open(filler, "wb", buffering=0) as handle:
        try:
            while handle.write(bytes(PAGE)):
                pass
        except OSError:
            pass
    if leave:
        os.truncate(filler, max(0, filler.stat().st_size - -(-leave // PAGE) * PAGE))


def release(location: Location) -> None:
    for point in location.mounts:
        subprocess.run(["umount", str(point)], check=False)
    if location.kind == "read-only" and not location.mounts:
        os.chmod(location.path, 0o755)


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` and its bytes (to prove a failed command changed nothing)."""
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def run_nectargan(*args: object, location: Optional[Location] = None, cwd: Optional[Path] = None,
                  timeout: float = 180) -> subprocess.CompletedProcess:
    """``nectargan ARGS`` in a real subprocess, under the location's file size limit if it has one."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NECTARGAN_")}
    exe = Path(sys.executable).with_name("nectargan")
    command = [str(exe)] if exe.exists() else [sys.executable, "-m", "nectargan_core"]
    return subprocess.run(command + [str(a) for a in args], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, preexec_fn=location.preexec() if location else None)


def one_error_line(result: subprocess.CompletedProcess) -> str:
    """The only ``error:`` line of a failed command; fails the test on a traceback or several error lines."""
    assert result.returncode != 0, result.stdout + result.stderr
    assert "Traceback" not in result.stderr and "terminate called" not in result.stderr, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and errors[0] == result.stderr.strip().splitlines()[-1], result.stderr
    return errors[0]
