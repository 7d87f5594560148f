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


class EndingEpoch:
    """A DataLoader iterator whose per-epoch workers (real processes, stopped) have delivered every batch."""

    num_workers = 2
    timeout = 5
    _persistent_workers = False

    def __init__(self, workers) -> None:
        self._workers = workers
        self._num_yielded = 3
        self.shut_down_with = None

    def __len__(self) -> int:
        return 3

    def __iter__(self):
        return self

    def __next__(self):
        self.shut_down_with = [w.is_alive() for w in self._workers]  # torch joins each live one for 5 s here
        raise StopIteration

    def _shutdown_workers(self) -> None:
        pass


def test_per_epoch_workers_stuck_after_the_last_batch_are_killed_before_the_epoch_ends(capfd) -> None:
    import multiprocessing
    import os
    import signal

    from nectargan_core.procfs import proc_state

    context = multiprocessing.get_context("fork")
    workers = [context.Process(target=time.sleep, args=(60,), daemon=True) for _ in range(2)]
    for worker in workers:
        worker.start()
    try:
        for worker in workers:
            os.kill(worker.pid, signal.SIGSTOP)
        while any(proc_state(w.pid)[0] != "T" for w in workers):
            time.sleep(0.01)
        ending = EndingEpoch(workers)
        assert list(bounded(ending, 5)) == []
        assert ending.shut_down_with == [False, False]
        note = capfd.readouterr().err.strip()
        assert note == (f"note: the data loader's worker process(es) pid {workers[0].pid} (stopped (SIGSTOP or a "
                        f"debugger)), pid {workers[1].pid} (stopped (SIGSTOP or a debugger)) did not answer as the "
                        "epoch's batches ended, with no batch left to deliver: killed them")
    finally:
        for worker in workers:
            if worker.is_alive():
                worker.kill()
            worker.join()
