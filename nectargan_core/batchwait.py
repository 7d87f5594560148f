"""Bounded waits for batches: a worker that never answers ends the run in one line, a stop signal ends the wait.

The main process of a run spends its waits on DataLoader workers: for the
next training batch, for validation batches. A worker that stops (SIGSTOP, a
hung network file system) left that wait without end, and a SIGTERM was only
acted on after the worker answered, so ``docker stop`` ended in SIGKILL. Here
every such wait has a bound (``loop.batch_timeout_s``: a ``BatchWaitTimeout``
naming the workers and their state), and a stop signal that arrives while the
main process waits interrupts the wait at once (``StopWhileWaiting``): no
batch is half-trained, so the checkpoint written then is exact. The workers
of an interrupted wait are killed: they only read, and a stopped process
cannot act on anything gentler (Python's exit would otherwise wait on it for
ever).
"""

from __future__ import annotations

import os
import re
import signal
import sys
import threading
import time
from contextlib import contextmanager
from typing import Any, Iterable, Iterator

from .errors import TrainingError
from .procfs import describe_state, proc_state

#: How long (s) killed workers get to be reaped before the run goes on exiting.
REAP_S = 2.0
#: How long (s) a failed fetch from a worker looks for that worker's death before taking the error as its own.
DEATH_S = 1.0


class StopWhileWaiting(BaseException):
    """A stop signal arrived while the main process waited for a batch (a BaseException, as KeyboardInterrupt
    is: code between the wait and the trainer must not take it for an error)."""


class LoaderFailure(TrainingError):
    """The data loader's workers failed the main process between two steps: the position can be saved."""


class BatchWaitTimeout(LoaderFailure):
    """No batch came within ``loop.batch_timeout_s``: one line naming the workers and what they are doing."""


class LimitTooLow(LoaderFailure):
    """A limit of this process (``ulimit -n``, ``ulimit -f``) is below what the workers need to hand over batches."""


class WorkerDied(LoaderFailure):
    """A worker process died (killed by a signal, the out-of-memory killer) while the main process waited."""


def worker_death(text: str) -> str:
    """torch's "DataLoader worker (pid 12) is killed by signal: Killed." as one phrase saying what to check."""
    pid = re.search(r"pid\(?s?\)? (\d+)", text)
    who = f"the data loader's worker process (pid {pid.group(1)})" if pid else "a data loader worker process"
    killed = re.search(r"killed by signal: (\w+)", text)
    status = re.search(r"exited with status (-?\d+)", text)
    if killed:
        return (f"{who} was killed by signal {killed.group(1)}: the out-of-memory killer or someone else ended it; "
                "check the memory (fewer data.num_workers, smaller batches)")
    how = f"exited with status {status.group(1)}" if status else "ended unexpectedly"
    return f"{who} {how}: check the dataset's code and the machine's logs"


_waiting = 0  # interruptible waits the main thread is inside (0 or 1)


@contextmanager
def interruptible() -> Iterator[None]:
    """Inside, a stop signal raises :class:`StopWhileWaiting` in the main thread (see :func:`interrupt_wait`)."""
    global _waiting
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _waiting += 1
    try:
        yield
    finally:
        _waiting -= 1


def open_files_needed(workers: int, prefetch: int) -> int:
    """File descriptors a process needs with ``workers`` DataLoader workers, ``prefetch`` batches ahead each.

    Each batch's tensors come from their worker as file descriptors (torch's
    ``file_descriptor`` sharing), held until the batch is unpickled. Measured
    with 2 workers, 2 batches ahead: 32 failed (thousands of lines of
    tracebacks, or a hang at exit), 48 trained.
    """
    return 32 + 8 * workers * max(prefetch, 1)


def file_size_line(exc: BaseException) -> str | None:
    """One line for a worker that could not hand over a batch under the file-size limit (``ulimit -f``): its
    shared-memory file could not grow ("unable to resize file ... File too large"); None for anything else."""
    if "File too large" not in str(exc):
        return None
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    except (ImportError, OSError):
        return None
    if soft == resource.RLIM_INFINITY:
        return None
    return (f"a data loader worker could not hand over a batch: the file size limit (ulimit -f) is {soft // 1024} "
            "KiB, below one batch in shared memory; raise it (ulimit -f unlimited) or set data.num_workers=0")


def ensure_open_files(workers: int, prefetch: int) -> None:
    """Raise the soft open-file limit to what the workers need when the hard limit allows; else refuse in one line."""
    try:
        import resource
    except ImportError:  # not on this platform
        return
    need = open_files_needed(workers, prefetch)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= need:
        return
    if hard == resource.RLIM_INFINITY or hard >= need:
        target = max(need, 1024) if hard == resource.RLIM_INFINITY else min(hard, max(need, 1024))
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            return
        except (OSError, ValueError):
            pass
    raise LimitTooLow(
        f"the open-file limit (ulimit -n) is {soft}, and {workers} data loader worker process(es) need at least "
        f"{need} (each batch comes from its worker as open files); raise it (ulimit -n 1024) or set "
        "data.num_workers=0")


def waiting() -> bool:
    """Whether the main thread is inside an interruptible wait for a batch (no step is under way)."""
    return bool(_waiting) and threading.current_thread() is threading.main_thread()


def interrupt_wait() -> None:
    """Called by the stop-signal handler: end the wait the main thread is in, if it is in one."""
    if _waiting and threading.current_thread() is threading.main_thread():
        raise StopWhileWaiting


def bounded(loader: Iterable[Any], timeout_s: float, *, interrupt: bool = True, what: str = "training",
            source: Any = None) -> Iterator[Any]:
    """The batches of ``loader``, each waited for at most ``timeout_s`` when worker processes deliver them
    (``source`` is the DataLoader when ``loader`` only iterates it, e.g. skipping a resumed epoch's start).

    The bound is a SIGALRM timer around each wait, so it also covers what
    torch's own ``timeout`` does not: unpickling a batch fetches its tensors'
    file descriptors from the worker that made it, which waits on that worker
    without end when it is stopped. (Off the main thread, torch's ``timeout``
    is the bound.) With ``interrupt``, a stop signal during a wait raises
    :class:`StopWhileWaiting` (single-process runs: in a distributed run
    every process must stop at the same step, so the stop waits for the step
    there). Loaders without workers read in this process: nothing to wait for.
    """
    source = loader if source is None else source
    workers = int(getattr(source, "num_workers", 0) or 0)
    if workers:
        ensure_open_files(workers, int(getattr(source, "prefetch_factor", None) or 2))
    if workers and getattr(source, "timeout", None) == 0:
        source.timeout = timeout_s  # torch's own bound on the queue
    alarm = bool(workers) and threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGALRM, _alarm_rang) if alarm else None
    guard = interruptible if interrupt else _nothing
    iterator: Any = None

    def wait(call: Any) -> Any:
        """``call()`` bounded (starting an epoch waits too: persistent workers acknowledge its start)."""
        global _deadline
        try:
            with guard():
                if alarm:
                    _deadline = time.monotonic() + timeout_s
                    signal.setitimer(signal.ITIMER_REAL, timeout_s)
                try:
                    return call()
                finally:
                    if alarm:
                        signal.setitimer(signal.ITIMER_REAL, 0)
        except StopWhileWaiting:
            kill_workers(iterator if iterator is not None else getattr(source, "_iterator", None))
            raise
        except (OSError, EOFError, RuntimeError) as exc:
            # A batch's tensors come from its worker over a socket, and torch checks its workers when a wait
            # fails: either way a dead worker is what to report.
            stuck = iterator if iterator is not None else getattr(source, "_iterator", None)
            dead = _dead_workers(stuck, DEATH_S if isinstance(exc, (OSError, EOFError)) else 0.0)
            if dead:
                kill_workers(stuck)
                code = dead[0].exitcode
                how = (f"is killed by signal: {_signal_name(-code)}" if isinstance(code, int) and code < 0
                       else f"exited with status {code}")
                raise WorkerDied(worker_death(f"DataLoader worker (pid {dead[0].pid}) {how}")) from None
            too_large = file_size_line(exc) if workers else None
            if too_large is not None:
                kill_workers(stuck)
                raise LimitTooLow(too_large) from None
            if not (isinstance(exc, RuntimeError) and workers and "DataLoader timed out" in str(exc)):
                raise
            raise timed_out(stuck) from None
        except _AlarmRang:
            raise timed_out(iterator if iterator is not None else getattr(source, "_iterator", None)) from None

    def timed_out(stuck: Any) -> BatchWaitTimeout:
        states = worker_states(stuck)
        ending = _delivered_all(stuck)
        kill_workers(stuck)
        if ending:
            return BatchWaitTimeout(
                f"the data loader's {workers} worker process(es) did not end within {timeout_s:g} s "
                f"(loop.batch_timeout_s) after the {what} epoch's last batch{': ' + states if states else ''}; "
                "check the data's file system")
        return BatchWaitTimeout(
            f"no {what} batch came from the data loader's {workers} worker process(es) in {timeout_s:g} s "
            f"(loop.batch_timeout_s){': ' + states if states else ''}; check the data's file system, "
            "or raise loop.batch_timeout_s if one batch really takes that long")

    try:
        before = signal.getsignal(signal.SIGCHLD) if alarm else None
        iterator = wait(lambda: iter(loader))
        if alarm:
            _keep_sigchld(before)
        while True:
            if _delivered_all(iterator) and not getattr(iterator, "_persistent_workers", True):
                # the next call only ends the epoch's workers, each joined for 5 s and more when one is stuck
                release_stuck(iterator, "as the epoch's batches ended, with no batch left to deliver")
            try:
                batch = wait(lambda: next(iterator))
            except StopIteration:
                return
            yield batch
    finally:
        if alarm:
            try:
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, previous if previous is not None else signal.SIG_DFL)
            except ValueError:  # finalised off the main thread: the timer is off already
                pass


class _AlarmRang(BaseException):
    """The SIGALRM of a wait's bound (internal: turned into BatchWaitTimeout)."""


_deadline = 0.0  # when the current wait's bound ends (time.monotonic())


def _alarm_rang(signum: int, frame: Any) -> None:
    if time.monotonic() >= _deadline - 0.05:  # a SIGALRM from anyone else before the bound changes nothing
        raise _AlarmRang


def _keep_sigchld(before: Any) -> None:
    """Undo torch's SIGCHLD handler, which raises "worker killed" wherever the main thread is (mid-step,
    mid-checkpoint write). Without it torch finds a dead worker where this process waits for its batches,
    which :func:`bounded` turns into one line with the position saved."""
    handler = signal.getsignal(signal.SIGCHLD)
    if handler is not before and getattr(handler, "__module__", "").startswith("torch.utils.data"):
        signal.signal(signal.SIGCHLD, before if before is not None else signal.SIG_DFL)


def _dead_workers(iterator: Any, wait_s: float) -> list[Any]:
    """The iterator's workers that have ended, looking for up to ``wait_s`` until one has.

    A worker's sockets close as it dies, a moment before it can be reaped:
    a batch being fetched from it fails with "connection reset" while its
    exit code is not known yet.
    """
    deadline = time.monotonic() + wait_s
    while True:
        dead = [p for p in getattr(iterator, "_workers", ()) if _ended(p)]
        if dead or time.monotonic() >= deadline:
            return dead
        time.sleep(0.02)


def _ended(process: Any) -> bool:
    try:
        return process.exitcode is not None
    except Exception:  # noqa: BLE001 - not a process we can ask
        return False


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name.removeprefix("SIG").capitalize() if number != 9 else "Killed"
    except ValueError:
        return str(number)


@contextmanager
def _nothing() -> Iterator[None]:
    yield


def worker_states(iterator: Any) -> str:
    """``worker pid 123 is stopped (SIGSTOP or a debugger), pid 124 is waiting``: what the workers are doing."""
    parts = []
    for process in getattr(iterator, "_workers", ()):
        pid = getattr(process, "pid", None)
        state = proc_state(pid)[0] if pid is not None else ""
        if state:
            parts.append(f"pid {pid} is {describe_state(state)}")
    return ("worker " + ", ".join(parts)) if parts else ""


#: States of a worker that will not answer: stopped (SIGSTOP, a debugger), or in an uninterruptible wait.
STUCK = ("T", "t", "D")


def release_stuck(iterator: Any, when: str) -> bool:
    """Kill ``iterator``'s workers if one is stuck (:data:`STUCK`), with a ``note:`` naming it; whether it did.

    For a moment when the workers owe nothing (an epoch's or the run's
    end): torch's own shutdown joins each for 5 s, and Python's exit joins a
    stopped one for ever (the run printed ``finished`` and never exited).
    """
    states = {p.pid: proc_state(p.pid)[0] for p in getattr(iterator, "_workers", ()) if getattr(p, "pid", None)}
    stuck = {pid: state for pid, state in states.items() if state in STUCK}
    if not stuck:
        return False
    kill_workers(iterator)
    named = ", ".join(f"pid {pid} ({describe_state(state)})" for pid, state in stuck.items())
    print(f"note: the data loader's worker process(es) {named} did not answer {when}: killed them",
          file=sys.stderr, flush=True)
    return True


def _delivered_all(iterator: Any) -> bool:
    """Whether a DataLoader iterator has yielded every batch of its epoch (its next call only ends it)."""
    try:
        return iterator is not None and iterator._num_yielded >= len(iterator)
    except (AttributeError, TypeError):  # no length (an iterable dataset), or not torch's iterator
        return False


def kill_workers(iterator: Any) -> None:
    """SIGKILL the worker processes of a DataLoader iterator that is being abandoned, and reap them.

    Their pids are first taken out of torch's SIGCHLD check, which would
    otherwise raise "worker killed by signal" at a random later point of
    this process.
    """
    processes = [p for p in getattr(iterator, "_workers", ()) if getattr(p, "pid", None)]
    if not processes:
        return
    if getattr(iterator, "_worker_pids_set", False):
        try:
            from torch.utils.data._utils import signal_handling

            signal_handling._remove_worker_pids(id(iterator))
            iterator._worker_pids_set = False
        except Exception:  # noqa: BLE001 - another torch: the SIGCHLD check may then name the killed worker
            pass
    for process in processes:
        try:
            os.kill(process.pid, signal.SIGKILL)
        except OSError:
            pass
    for process in processes:
        try:
            process.join(REAP_S)
        except Exception:  # noqa: BLE001 - reaping is best effort: the process is killed either way
            pass
    shutdown = getattr(iterator, "_shutdown_workers", None)
    if callable(shutdown):
        try:
            shutdown()  # its queues and threads; the workers are dead, so its joins return at once
        except Exception:  # noqa: BLE001
            pass
