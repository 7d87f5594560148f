"""A run's endings at their edges: signals that arrive on the last step, after the run ended, or to one rank.

The toy trainer sends the signal itself at a chosen moment (``toy.signal_at_step``
after that step's update, or ``toy.signal_at_exit`` as the interpreter exits
after ``nectargan train`` has ended the run), to itself or to the ``--nproc``
launcher, so each case is deterministic. An outside corpus found each of these
(142 ``--nproc 2`` runs): a Ctrl-C just after ``finished:`` printed
"Exception ignored in atexit callback" tracebacks and exited 130, a late signal
to the launcher turned a finished run's exit into 130/143, a SIGTERM to one
rank ended as "rank 1 failed: exit code 143" (exit 1), and a stop on the last
step left ``status.json`` at ``interrupted`` for good.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch

from support import run_cli

BASE = ("run.device=cpu", "visualizers=[]", "loop.epochs=2", "distributed.timeout_s=5")
TRACES = ("Traceback", "Exception ignored", "terminate called", "KeyboardInterrupt", "failed")


def train(tmp_path: Path, nproc: int, *settings: str):
    args = [a for s in (*BASE, *settings) for a in ("--set", s)]
    done = run_cli("train", "--trainer", "toy", *args, *(["--nproc", str(nproc)] if nproc > 1 else []),
                   cwd=tmp_path, timeout=180)
    status = json.loads((tmp_path / "runs/run/version_0/status.json").read_text())
    assert not any(trace in done.stderr for trace in TRACES), done.stderr
    return done, status


@pytest.mark.parametrize("nproc, settings", [
    (1, ("toy.signal_at_step=8",)),  # SIGTERM on the last step: the step finishes, and nothing is left to train
    (1, ("toy.signal_at_exit=true", "toy.signal_name=SIGINT")),  # Ctrl-C after the run ended, while exiting
    (2, ("toy.signal_at_step=4", "toy.signal_name=SIGINT", "toy.signal_to=launcher")),  # to the launcher, last step
    (2, ("toy.signal_at_exit=true", "toy.signal_name=SIGINT", "toy.signal_to=launcher")),  # to it, after the end
    (2, ("toy.signal_at_exit=true", "toy.signal_name=SIGINT", "toy.signal_rank=1")),  # to a rank, after the end
], ids=["last-step", "at-exit", "launcher-last-step", "launcher-at-exit", "rank-at-exit"])
def test_a_signal_that_arrives_when_nothing_is_left_to_train_ends_a_finished_run(tmp_path, nproc, settings):
    if nproc > 1 and not torch.distributed.is_available():
        pytest.skip("torch.distributed unavailable")
    done, status = train(tmp_path, nproc, *settings)
    steps = 8 // nproc
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().splitlines()[-1] == f"finished: 2/2 epochs, {steps} steps; results in runs/run/version_0"
    assert (status["status"], status["reason"], status["step"]) == ("finished", None, steps)


def test_a_sigterm_to_one_rank_stops_every_rank_as_an_interruption(tmp_path):
    if not torch.distributed.is_available():
        pytest.skip("torch.distributed unavailable")
    done, status = train(tmp_path, 2, "toy.signal_at_step=3", "toy.signal_rank=1")
    assert done.returncode == 143, done.stderr
    lines = done.stderr.strip().splitlines()
    assert "rank 1 received SIGTERM: every process stops after this step and saves a checkpoint" in lines
    assert re.fullmatch(r"interrupted: checkpoint saved as runs/run/version_0/checkpoints/epoch\d{4}-step00000003\.pt; "
                        r"resume with: nectargan train --resume runs/run/version_0 --nproc 2", lines[-1]), lines[-1]
    assert (status["status"], status["reason"], status["step"]) == ("interrupted", "SIGTERM", 3)
    resumed = run_cli("train", "--resume", "runs/run/version_0", "--nproc", "2", cwd=tmp_path, timeout=180)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads((tmp_path / "runs/run/version_0/status.json").read_text())["status"] == "finished"
