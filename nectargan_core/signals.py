"""Graceful stop on SIGINT/SIGTERM.

The first signal asks the trainer to finish its current step, write a
checkpoint and stop; a second SIGINT stops at once (checkpoint writes are
atomic, so nothing already saved is damaged).

A Ctrl-C in a terminal reaches the whole foreground process group, DataLoader
workers included; they inherit the handler when forked, and ignore the signal
(the main process stops them), so one Ctrl-C prints one message.
"""

from __future__ import annotations

import os
import signal
import sys
from contextlib import contextmanager
from typing import Any, Iterator

EXIT_CODES = {"SIGINT": 130, "SIGTERM": 143}


@contextmanager
def graceful_stop(trainer: Any) -> Iterator[list[str]]:
    """Within the block, SIGINT/SIGTERM call ``trainer.request_stop``; yields the signals seen."""
    received: list[str] = []
    owner = os.getpid()

    def handler(signum: int, frame: Any) -> None:
        if os.getpid() != owner:  # a forked worker: the process that trains handles the stop
            return
        name = signal.Signals(signum).name
        if received:
            signal.signal(signal.SIGINT, signal.default_int_handler)
            raise KeyboardInterrupt
        received.append(name)
        trainer.request_stop(name, interrupted=True)
        print(f"{name} received: stopping after the current step and saving a checkpoint "
              "(press Ctrl-C again to stop at once)", file=sys.stderr, flush=True)

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield received
    finally:
        for sig, old in previous.items():
            # After a graceful stop everything is saved and the process is exiting: a late
            # second signal must not turn the clean exit (130/143) into a death by signal.
            signal.signal(sig, signal.SIG_IGN if received else old)
