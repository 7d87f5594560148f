"""Stops the way services send them: SIGTERM or SIGINT to the whole process group, at a random step.

``docker stop``, systemd, Slurm, Kubernetes and a terminal's Ctrl-C signal
every process of the job, DataLoader workers included. Each case starts
``nectargan train`` (pix2pix, tiny networks) in a process group of its own,
waits until the drawn step, signals the group with ``os.killpg`` and
requires the documented graceful stop: exit 143 (SIGTERM) or 130 (SIGINT),
the "received" line exactly once, no traceback, a verified checkpoint of the
step reached, ``status.json`` interrupted; then ``--resume`` continues from
that step. The cases come from ``cases.signal_plan``: a seeded sample by
default, the long series (0 and 2 workers, persistent or not, more steps)
with ``NECTARGAN_LONG_SERIES=1``.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cases import signal_plan
from nectargan_core.checkpoint import load_checkpoint
from series import SEED, long_series
from support import run_cli

CODES = {"SIGTERM": 143, "SIGINT": 130}
TINY = ("models.generator.name=unet", "models.generator.depth=4", "models.generator.ngf=8",
        "models.discriminator.ndf=8", "data.load_size=32", "data.crop_size=32", "run.device=cpu",
        "visualizers=[]", "examples.every_epochs=null", "loop.log_every_steps=1", "loop.epochs=1000",
        "loop.val_every_epochs=null")


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("signals") / "data"
    made = run_cli("data", "synth", str(root), "--count", "40", "--size", "32", "--val", "0.1", "--test", "0")
    assert made.returncode == 0, made.stderr
    return root


def train_steps(metrics: Path) -> list[int]:
    try:
        lines = metrics.read_text().splitlines()
    except OSError:
        return []
    return [json.loads(line)["step"] for line in lines if line.endswith("}") and '"kind":"train"' in line]


def stop_with_group_signal(tmp_path: Path, data: Path, name: str, step: int, workers: int,
                           persistent: bool = True) -> None:
    settings = [f"data.root={data}", f"data.num_workers={workers}", f"data.persistent_workers={persistent}",
                "run.output_dir=runs", *TINY]
    env = {k: v for k, v in os.environ.items() if not k.startswith("NECTARGAN_")}
    exe = Path(sys.executable).with_name("nectargan")
    # A session (and so a process group) of its own, as a service manager starts a job.
    proc = subprocess.Popen([str(exe), "train", "--trainer", "pix2pix", *(a for s in settings for a in ("--set", s))],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    run_dir = tmp_path / "runs" / "run" / "version_0"
    try:
        deadline = time.monotonic() + 120
        while not any(s >= step for s in train_steps(run_dir / "metrics.jsonl")):
            assert proc.poll() is None, proc.communicate()[1]
            assert time.monotonic() < deadline, "training did not reach the step"
            time.sleep(0.02)
        os.killpg(proc.pid, getattr(signal, name))
        _, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()

    case = f"{name} after step {step}, {workers} workers (persistent: {persistent})"
    assert proc.returncode == CODES[name], f"{case}: exit {proc.returncode}\n{stderr}"
    assert "Traceback" not in stderr and "DataLoader worker" not in stderr, f"{case}\n{stderr}"
    announced = [line for line in stderr.splitlines() if "received: stopping after the current step" in line]
    assert announced == [f"{name} received: stopping after the current step and saving a checkpoint "
                         "(press Ctrl-C again to stop at once)"], f"{case}\n{stderr}"
    last = stderr.strip().splitlines()[-1]
    assert re.fullmatch(rf"interrupted: checkpoint saved as {re.escape(str(Path('runs/run/version_0/checkpoints')))}"
                        rf"/epoch\d{{4}}-step\d{{8}}\.pt; resume with: nectargan train --resume "
                        rf"{re.escape(str(Path('runs/run/version_0')))}", last), f"{case}\n{stderr}"
    status = json.loads((run_dir / "status.json").read_text())
    assert status["status"] == "interrupted" and status["reason"] == name, status
    assert status["step"] >= step
    saved = load_checkpoint(tmp_path / status["checkpoint"])  # verified against its sidecar
    assert saved["global_step"] == status["step"]
    assert train_steps(run_dir / "metrics.jsonl")[-1] == status["step"]

    resumed = run_cli("train", "--resume", str(run_dir), "--set", f"loop.max_steps={status['step'] + 2}",
                      cwd=tmp_path)
    assert resumed.returncode == 0, f"{case}: resume failed\n{resumed.stderr}"
    # mid-epoch: "at epoch 1/1000, batch 5/36 (step 5)", epochs and batches counted from 1 as the console counts them
    assert re.search(rf"resuming {re.escape(str(run_dir))} at epoch 1/\d+, batch {status['step']}/\d+ "
                     rf"\(step {status['step']}\)", resumed.stderr), resumed.stderr
    after = json.loads((run_dir / "status.json").read_text())
    assert (after["status"], after["step"]) == ("finished", status["step"] + 2)
    assert train_steps(run_dir / "metrics.jsonl") == list(range(1, status["step"] + 3))  # each step logged once


@pytest.mark.slow
@pytest.mark.parametrize("name, step, workers", signal_plan(2, SEED), ids=lambda v: str(v))
def test_group_signal_stops_gracefully(tmp_path: Path, data: Path, name: str, step: int, workers: int) -> None:
    stop_with_group_signal(tmp_path, data, name, step, workers)


@long_series
@pytest.mark.parametrize("name, step, workers", signal_plan(10, SEED + 1, max_step=20), ids=lambda v: str(v))
@pytest.mark.parametrize("persistent", [True, False])
def test_long_series_of_group_signals(tmp_path: Path, data: Path, name: str, step: int, workers: int,
                                      persistent: bool) -> None:
    stop_with_group_signal(tmp_path, data, name, step, workers, persistent)
