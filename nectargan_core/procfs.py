"""What ``/proc`` says about another process (its state, parent and rank), and waking it.

Its own module because the launcher's guards, the distributed liveness
check and the bounded batch waits all ask it, and those modules import each
other's neighbours (signals imports batchwait): a shared leaf keeps the
import graph acyclic.
"""

from __future__ import annotations

import os
import signal

#: /proc/PID/stat states, as a user would read them.
STATES = {"T": "stopped (SIGSTOP or a debugger)", "t": "stopped by a debugger",
          "D": "waiting on a disk or network file system", "Z": "exited", "R": "running", "S": "waiting"}


def proc_state(pid: int) -> tuple[str, int]:
    """Process ``pid``'s state letter (``R``, ``S``, ``T`` stopped, ``Z``...) and parent pid; ``("", 0)`` if gone."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
        return fields[0], int(fields[1])
    except (OSError, IndexError, ValueError):
        return "", 0


def describe_state(letter: str) -> str:
    """``stopped (SIGSTOP or a debugger)`` for ``T``: a state letter in words (the letter itself when unknown)."""
    return STATES.get(letter, letter)


def rank_of(pid: int) -> int:
    """The ``RANK`` in the environment of worker ``pid`` (-1 when it cannot be read)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            for item in handle.read().split(b"\0"):
                if item.startswith(b"RANK=") and item[5:].isdigit():
                    return int(item[5:])
    except OSError:
        pass
    return -1


def wake(pid: int) -> None:
    """SIGCONT to process ``pid``, and to its process group when it leads one (its stopped DataLoader workers)."""
    try:
        if os.getpgid(pid) == pid:
            os.killpg(pid, signal.SIGCONT)
        else:
            os.kill(pid, signal.SIGCONT)
    except OSError:
        pass


def children(pid: int | str = "self") -> list[int]:
    """The pids of process ``pid``'s children (of every thread of it), from ``/proc``; empty when it is gone."""
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children") as handle:
                found.extend(int(child) for child in handle.read().split())
        except (OSError, ValueError):
            continue
    return found


def command_line(pid: int) -> list[bytes]:
    """Process ``pid``'s arguments (empty when it is gone)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read().split(b"\0")[:-1]
    except OSError:
        return []
