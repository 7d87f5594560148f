"""DataLoader workers leave stopping to the main process (nectargan_core.signals.leave_stopping_to_main).

A child process iterates a real DataLoader with 2 persistent workers; the
test sends SIGTERM and SIGINT to the workers from outside (as a service
manager signalling every process would). They must ignore both and serve
every remaining sample; at exit their parent ends them (multiprocessing
sends SIGTERM, which a worker obeys from its parent only), without a hang or
a traceback.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from support import alive

CHILD = r"""
import os, sys, time
from torch.utils.data import DataLoader, Dataset
from nectargan_core.signals import leave_stopping_to_main

class Pids(Dataset):
    def __len__(self): return 24
    def __getitem__(self, index):
        time.sleep(0.05)
        return os.getpid()

loader = DataLoader(Pids(), num_workers=2, batch_size=1, persistent_workers=True)
if sys.argv[1] == "protected":
    leave_stopping_to_main(loader)
batches = iter(loader)
seen, pids = 0, set()
while len(pids) < 2:
    pids.add(int(next(batches))); seen += 1
print("PIDS", *sorted(pids), flush=True)
sys.stdin.readline()  # the test signals the workers now
rest = [int(pid) for pid in batches]
print("SERVED", seen + len(rest), "BY", *sorted(set(rest)), flush=True)
"""


def run_child(mode: str) -> tuple[subprocess.CompletedProcess, list[int]]:
    child = subprocess.Popen([sys.executable, "-c", CHILD, mode], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        first = child.stdout.readline().split()
        assert first and first[0] == "PIDS", child.communicate(timeout=30)[1]
        workers = [int(pid) for pid in first[1:]]
        for pid in workers:
            os.kill(pid, signal.SIGTERM)
            os.kill(pid, signal.SIGINT)
        time.sleep(0.3)
        out, err = child.communicate("go\n", timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
    return subprocess.CompletedProcess(child.args, child.returncode, first and " ".join(first) + "\n" + out, err), \
        workers


@pytest.mark.slow
def test_workers_ignore_outside_signals_and_end_with_their_parent():
    done, workers = run_child("protected")
    assert done.returncode == 0, done.stderr
    assert f"SERVED 24 BY {' '.join(map(str, sorted(workers)))}" in done.stdout, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and "Warning" not in done.stderr, done.stderr
    deadline = time.monotonic() + 5
    while any(alive(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(alive(pid) for pid in workers), "a worker outlived its parent"


@pytest.mark.slow
def test_without_it_an_outside_sigterm_kills_the_workers():
    """The behaviour leave_stopping_to_main exists to prevent (so the test above can fail)."""
    done, _ = run_child("plain")
    assert done.returncode != 0
    assert "DataLoader worker" in done.stderr and "killed by signal" in done.stderr
