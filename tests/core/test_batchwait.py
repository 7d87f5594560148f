"""The bounded batch wait's reading of a failed fetch (the end-to-end cases are in tests/reliability)."""

from __future__ import annotations

import time

import pytest

from nectargan_core.batchwait import WorkerDied, bounded


class DyingWorker:
    """A worker process as torch's iterator holds it: killed, but reaped only ``after`` seconds later."""

    pid = 4242

    def __init__(self, after: float) -> None:
        self.dies_at = time.monotonic() + after

    @property
    def exitcode(self):
        return -9 if time.monotonic() >= self.dies_at else None

    def is_alive(self) -> bool:
        return self.exitcode is None

    def kill(self) -> None:
        pass

    def join(self, timeout=None) -> None:
        pass


class Fetching:
    """A loader whose one worker dies while its batch is fetched: the socket resets before the exit is known."""

    num_workers = 1
    timeout = 5

    def __init__(self, worker: DyingWorker) -> None:
        self._workers = [worker]

    def __iter__(self):
        return self

    def __next__(self):
        raise ConnectionResetError(104, "Connection reset by peer")


def test_a_fetch_reset_by_a_dying_worker_is_that_worker_s_death() -> None:
    with pytest.raises(WorkerDied, match=r"worker process \(pid 4242\) was killed by signal Killed"):
        next(bounded(Fetching(DyingWorker(after=0.3)), 5))


def test_a_fetch_error_with_every_worker_alive_is_the_error_itself() -> None:
    with pytest.raises(ConnectionResetError):
        next(bounded(Fetching(DyingWorker(after=60)), 5))
