"""Graceful stop on SIGINT/SIGTERM, and DataLoader workers that leave stopping to the trainer.

The first signal asks the trainer to finish its current step, write a
checkpoint and stop; a second SIGINT (Ctrl-C pressed twice) stops at once
(checkpoint writes are atomic, so nothing already saved is damaged). A
repeated SIGTERM changes nothing: service managers and launchers may deliver
one more (systemd and Slurm signal every process of the job, and torchrun's
agent forwards the one it got).

Services stop a job by signalling all of its processes at once (``docker
stop`` and Kubernetes signal the container, systemd and Slurm the control
group, a terminal's Ctrl-C the foreground process group), so DataLoader
worker processes get the signal too. Left alone, a worker dies of it (torch
installs a SIGTERM handler in workers that exits) and the trainer fails with
"DataLoader worker is killed by signal" instead of stopping cleanly; with
inherited handlers, every worker would also print its own "SIGINT received".
:func:`leave_stopping_to_main` makes a DataLoader's workers ignore both
signals unless their own parent sends them: the main process alone decides,
and shuts the workers down itself.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import threading
import weakref
from contextlib import contextmanager
from multiprocessing.context import ForkContext, ForkProcess, SpawnContext, SpawnProcess
from typing import Any, Callable, Iterator, Optional

from .batchwait import interrupt_wait, waiting

EXIT_CODES = {"SIGINT": 130, "SIGTERM": 143}
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


#: Set while a graceful stop is under way (the first SIGINT/SIGTERM seen by :func:`graceful_stop`).
_STOP_SIGNALLED = threading.Event()


def stop_signalled() -> bool:
    """Whether this process was asked to stop (Ctrl-C, SIGTERM) inside :func:`graceful_stop`.

    For long work before the first step (decoding a data cache): with no step
    to finish, it can end at once when this is true.
    """
    return _STOP_SIGNALLED.is_set()


@contextmanager
def graceful_stop(trainer: Any) -> Iterator[list[str]]:
    """Within the block, SIGINT/SIGTERM call ``trainer.request_stop``; yields the signals seen.

    Only the first signal is announced, and only by the process that writes the
    run (rank 0), so a stop prints one line however many processes got it.

    Signals are taken in the order they arrived. Python runs the handlers of
    signals that arrived while it was inside one long C call (a step's
    convolution) by signal number, SIGINT first; the order of arrival comes
    from the wakeup file descriptor, into which the C-level handler writes each
    signal's number as it arrives. So a SIGTERM followed by a Ctrl-C within one
    step is a stop by SIGTERM escalated at once, as it is when they are seconds
    apart.
    """
    received: list[str] = []
    owner = os.getpid()
    arrivals = _ArrivalOrder()

    def act(signum: int) -> None:
        name = signal.Signals(signum).name
        if received:
            if signum == signal.SIGINT:
                signal.signal(signal.SIGINT, signal.default_int_handler)
                raise KeyboardInterrupt
            return
        received.append(name)
        _STOP_SIGNALLED.set()
        trainer.request_stop(name, interrupted=True)
        if getattr(trainer, "is_main", True) and waiting():
            print(f"{name} received while waiting for the data loader: stopping now and saving a checkpoint",
                  file=sys.stderr, flush=True)
        elif getattr(trainer, "is_main", True):
            print(f"{name} received: stopping after the current step and saving a checkpoint "
                  "(press Ctrl-C again to stop at once)", file=sys.stderr, flush=True)
        interrupt_wait()  # waiting for a batch (no step under way): stop now, whether or not a worker answers

    def handler(signum: int, frame: Any) -> None:
        if os.getpid() != owner:  # a process forked from this one that kept the handler: default behaviour
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        for arrived in arrivals.take(signum):
            act(arrived)

    _STOP_SIGNALLED.clear()
    previous = {sig: signal.signal(sig, handler) for sig in STOP_SIGNALS}
    arrivals.start()
    try:
        yield received
    finally:
        arrivals.stop()
        for sig, old in previous.items():
            # After a graceful stop everything is saved and the process is exiting: a late
            # second signal must not turn the clean exit (130/143) into a death by signal.
            signal.signal(sig, signal.SIG_IGN if received else old)


def settle() -> None:
    """Ignore SIGINT/SIGTERM from now on: the run has ended and everything is saved, the process is only exiting.

    A Ctrl-C in those last moments (or the one a ``--nproc`` launcher passes on
    after the run finished) raised KeyboardInterrupt inside the interpreter's
    exit callbacks: tracebacks and exit 130 for a run that had finished.
    """
    if threading.current_thread() is threading.main_thread():
        for sig in STOP_SIGNALS:
            signal.signal(sig, signal.SIG_IGN)


class _ArrivalOrder:
    """The stop signals in the order they arrived, from Python's wakeup file descriptor.

    When the descriptor cannot be ours (not the main thread, or one already
    set by someone else, e.g. an event loop), each handler call is taken as its
    own arrival: Python's order.
    """

    def __init__(self) -> None:
        self._read: Optional[int] = None
        self._write: Optional[int] = None
        self._previous = -1

    def start(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        read, write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            previous = signal.set_wakeup_fd(write, warn_on_full_buffer=False)
        except ValueError:
            os.close(read), os.close(write)
            return
        if previous != -1:  # someone else's: give it back and keep Python's order
            signal.set_wakeup_fd(previous)
            os.close(read), os.close(write)
            return
        self._read, self._write = read, write
        _active_arrivals.add(self)

    def take(self, signum: int) -> list[int]:
        """The stop signals that arrived since the last call, oldest first (``[signum]`` without a descriptor).

        Empty when this handler's signal was already taken with an earlier one.
        """
        if self._read is None:
            return [signum]
        try:
            data = os.read(self._read, 4096)
        except BlockingIOError:
            data = b""
        return [number for number in data if number in STOP_SIGNALS]

    def stop(self) -> None:
        read, write, self._read, self._write = self._read, self._write, None, None
        _active_arrivals.discard(self)
        if read is None:
            return
        try:
            signal.set_wakeup_fd(-1)
        except ValueError:
            pass
        os.close(read), os.close(write)

    def _forget_in_child(self) -> None:
        """A forked child must not write its own signals into the parent's pipe."""
        try:
            signal.set_wakeup_fd(-1)
        except ValueError:
            pass
        self._read = self._write = None  # the descriptors are the parent's copies: left to the child's exit


_active_arrivals: "weakref.WeakSet[_ArrivalOrder]" = weakref.WeakSet()


def _forget_arrivals_in_child() -> None:
    for arrivals in list(_active_arrivals):
        arrivals._forget_in_child()
    _active_arrivals.clear()


os.register_at_fork(after_in_child=_forget_arrivals_in_child)


# -- DataLoader workers ----------------------------------------------------------------
class _QuietStart:
    """A worker process that starts with SIGINT and SIGTERM blocked.

    Blocking across the fork closes the window between the fork and the
    worker's ``worker_init_fn`` (:class:`WorkerInit`): a signal sent to the
    whole group in that window stays pending instead of killing the worker,
    and every thread the worker starts inherits the block.
    """

    def start(self) -> None:
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        try:
            super().start()  # type: ignore[misc]
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)


class QuietForkProcess(_QuietStart, ForkProcess):
    pass


class QuietSpawnProcess(_QuietStart, SpawnProcess):
    pass


class QuietForkContext(ForkContext):
    Process = QuietForkProcess  # type: ignore[assignment]


class QuietSpawnContext(SpawnContext):
    Process = QuietSpawnProcess  # type: ignore[assignment]


QUIET_CONTEXTS = {"fork": QuietForkContext, "spawn": QuietSpawnContext}


class WorkerInit:
    """A DataLoader ``worker_init_fn`` that leaves stopping to the main process, then calls the loader's own.

    SIGINT is ignored. SIGTERM stays blocked in every thread of the worker, and
    one thread takes each SIGTERM and obeys it only when the worker's parent
    sent it: that is how the DataLoader ends a worker that does not exit on
    request (and how multiprocessing ends persistent workers at exit), while a
    SIGTERM for the whole job is left to the main process. A class (not a
    closure) so that it pickles for ``spawn`` workers.
    """

    def __init__(self, inner: Optional[Callable[[int], Any]] = None) -> None:
        self.inner = inner

    def __call__(self, worker_id: int) -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
        if hasattr(signal, "sigwaitinfo"):  # Linux; elsewhere (macOS) SIGTERM keeps torch's handling
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
            threading.Thread(target=_sigterm_from_parent_only, name="nectargan-sigterm", daemon=True).start()
        else:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
        if self.inner is not None:
            self.inner(worker_id)


def _sigterm_from_parent_only() -> None:
    """Exit quietly on a SIGTERM from the parent (as torch's worker handler does); ignore any other."""
    while True:
        info = signal.sigwaitinfo({signal.SIGTERM})
        if info.si_pid == os.getppid():
            os._exit(0)


def leave_stopping_to_main(loader: Any) -> Any:
    """Make ``loader``'s worker processes ignore SIGINT/SIGTERM (a torch DataLoader; anything else is
    returned unchanged). Call it before the loader is first iterated; returns ``loader``.

    The trainer applies it to the train loader itself; call it for other loaders with workers.
    Workers started by a ``forkserver`` context keep that context (and only the worker_init part).
    """
    if getattr(loader, "num_workers", 0) <= 0 or not hasattr(loader, "worker_init_fn"):
        return loader
    if not isinstance(loader.worker_init_fn, WorkerInit):
        loader.worker_init_fn = WorkerInit(loader.worker_init_fn)
    context = loader.multiprocessing_context
    if not isinstance(context, (QuietForkContext, QuietSpawnContext)):
        method = context.get_start_method() if context is not None else multiprocessing.get_start_method()
        if method in QUIET_CONTEXTS:
            loader.multiprocessing_context = QUIET_CONTEXTS[method]()
    return loader
