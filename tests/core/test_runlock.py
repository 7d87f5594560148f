"""The run lock (nectargan_core.runlock): one holder, the holder named, released with its process only."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nectargan_core.errors import RunDirError
from nectargan_core.runlock import LOCK_NAME, RunInUseError, RunLock, is_held, read_holder

HOLD_THEN_FORK = r"""
import os, sys, time
from nectargan_core.runlock import RunLock
lock = RunLock.acquire(sys.argv[1])
child = os.fork()
if child == 0:  # a forked child (a DataLoader worker, say) that outlives the holder
    quiet = os.open(os.devnull, os.O_RDWR)
    os.dup2(quiet, 1)
    os.dup2(quiet, 2)  # let go of the test's pipes
    time.sleep(30)
    os._exit(0)
print(child, flush=True)
os._exit(0)  # the holder dies without releasing anything
"""


def test_a_second_holder_is_refused_with_the_first_named(tmp_path: Path) -> None:
    assert is_held(tmp_path) is None  # no lock file: a run older than the lock
    first = RunLock.acquire(tmp_path)
    assert is_held(tmp_path) is True
    with pytest.raises(RunInUseError) as refused:
        RunLock.acquire(tmp_path)
    message = str(refused.value)
    assert message.startswith(f"{tmp_path}: process {os.getpid()} on {socket.gethostname()} since ")
    assert message.endswith(" is training this run; one process writes a run: wait for it to end, or stop it first")
    first.release()
    assert is_held(tmp_path) is False
    again = RunLock.acquire(tmp_path)
    assert again.previous and again.previous["pid"] == os.getpid()  # the file remembers the last holder
    again.release()


def test_a_dead_holders_lock_is_taken_over_even_while_its_forked_child_lives(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", HOLD_THEN_FORK, str(tmp_path)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    child = int(done.stdout.split()[0])
    try:
        assert Path(f"/proc/{child}").exists()  # the forked child still runs...
        assert is_held(tmp_path) is False  # ...but does not hold the run
        started = time.monotonic()
        lock = RunLock.acquire(tmp_path)
        assert time.monotonic() - started < 1.5
        assert lock.previous["pid"] != os.getpid()
        lock.release()
    finally:
        os.kill(child, 9)
    assert (tmp_path / LOCK_NAME).is_file()


HOLD_UNRECORDED = r"""
import sys
from nectargan_core.runlock import RunLock
lock = RunLock.acquire(sys.argv[1], record=False)  # as a resume does until it has succeeded
print("held", flush=True)
sys.stdin.readline()
"""


def test_a_holder_that_has_not_recorded_itself_is_named_by_the_kernel(tmp_path: Path) -> None:
    lock_file = tmp_path / LOCK_NAME
    lock_file.write_text('{"pid": 1, "host": "elsewhere", "since": 0}\n')  # the record of an earlier holder
    before = lock_file.read_bytes()
    child = subprocess.Popen([sys.executable, "-c", HOLD_UNRECORDED, str(tmp_path)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "held"
        with pytest.raises(RunInUseError) as refused:
            RunLock.acquire(tmp_path)
        assert str(refused.value).startswith(f"{tmp_path}: process {child.pid} on {socket.gethostname()} is training")
    finally:
        child.communicate("\n", timeout=30)
    assert lock_file.read_bytes() == before  # holding without recording changed nothing


def test_a_failed_resume_leaves_no_lock_file_it_made(tmp_path: Path) -> None:
    lock = RunLock.acquire(tmp_path, record=False)
    assert (tmp_path / LOCK_NAME).exists() and lock.created
    lock.release(undo=True)
    assert not (tmp_path / LOCK_NAME).exists()
    kept = RunLock.acquire(tmp_path)  # a run that did train keeps its record
    kept.release(undo=True)
    assert (tmp_path / LOCK_NAME).read_text().startswith(f'{{"pid": {os.getpid()}, "host": ')


@pytest.mark.parametrize("kind", ["symlink", "fifo"])
def test_a_lock_file_that_is_no_file_is_refused_in_one_line(tmp_path: Path, kind: str) -> None:
    """A run.lock linked to a file outside the run got the holder's record written into that file; a FIFO
    blocked the resume (and `nectargan runs`) forever."""
    outside = tmp_path / "precious.txt"
    outside.write_text("precious\n")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    lock_file = run_dir / "run.lock"
    if kind == "symlink":
        lock_file.symlink_to(outside)
    else:
        os.mkfifo(lock_file)
    with pytest.raises(RunDirError) as info:
        RunLock.acquire(run_dir)
    what = "a symbolic link" if kind == "symlink" else "a FIFO"
    assert str(info.value) == (f"{lock_file}: the run's lock file is {what}, not a file; remove it (the next run "
                               "that takes this run directory makes a new one)")
    assert outside.read_text() == "precious\n"
    assert is_held(run_dir) is None and read_holder(lock_file) == {}
