"""Stop signals are taken in the order they arrived, also when they arrive within one step.

Python runs the handlers of signals that arrived while its main thread was
busy in C code (a long convolution) by signal number, SIGINT before SIGTERM.
So a service's SIGTERM followed by a user's Ctrl-C within one step used to be
taken as a Ctrl-C (graceful stop, exit 130) followed by a repeated SIGTERM
(ignored). Here the main thread is held in a lock while another thread
receives both signals, which is what a long C call does, and no timing is
involved.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

SCRIPT = r"""
import os, signal, sys, threading, time
from nectargan_core.signals import graceful_stop

class Trainer:
    is_main = False
    def __init__(self):
        self.requests = []
    def request_stop(self, name, interrupted):
        self.requests.append(name)

first, second = (getattr(signal, "SIG" + name) for name in sys.argv[1:3])
trainer, blocked, sent = Trainer(), threading.Event(), threading.Event()

def send():
    # This thread does not block the signals, the main thread does: the kernel delivers them here, their
    # C-level handler notes them in arrival order, and Python runs the handlers when the main thread
    # comes back to Python code: after both arrived.
    blocked.wait(30)
    os.kill(os.getpid(), first)
    time.sleep(0.1)  # two processes signalling: a moment apart (two of one kind at once would be one)
    os.kill(os.getpid(), second)
    time.sleep(0.1)
    sent.set()

outcome = "graceful"
try:
    with graceful_stop(trainer):
        sender = threading.Thread(target=send)
        sender.start()  # before the main thread blocks the signals: threads inherit the mask
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        blocked.set()
        sent.wait(30)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
        sender.join()
        for _ in range(1000):  # Python code: the pending handlers run here
            pass
except KeyboardInterrupt:
    outcome = "at once"
print(",".join(trainer.requests), outcome)
"""


@pytest.mark.parametrize("first, second, expected", [
    ("SIGTERM", "SIGINT", "SIGTERM at once"),     # a stop, then Ctrl-C: stop at once (was: a graceful SIGINT stop)
    ("SIGINT", "SIGTERM", "SIGINT graceful"),     # Ctrl-C, then a service's SIGTERM: a repeat, changes nothing
    ("SIGINT", "SIGINT", "SIGINT at once"),       # Ctrl-C twice
    ("SIGTERM", "SIGTERM", "SIGTERM graceful"),   # SIGTERM twice (systemd, then the launcher)
])
def test_two_signals_within_one_step_are_taken_in_arrival_order(first: str, second: str, expected: str) -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT, first.removeprefix("SIG"), second.removeprefix("SIG")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == expected
