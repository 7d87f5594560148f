"""What ``/proc`` says about another process: its state and parent.

Its own module because the launcher's guards, the distributed liveness
check and the bounded batch waits all ask it, and those modules import each
other's neighbours (signals imports batchwait): a shared leaf keeps the
import graph acyclic.
"""

from __future__ import annotations

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
