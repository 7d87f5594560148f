"""An emergency checkpoint left by a crash is found by ``--resume``, which says how to continue from it.

``--resume`` keeps to the newest periodic checkpoint (the emergency one may
hold part of the failed step's update), prints one line naming the newer
emergency checkpoint and the exact command, and that command continues from
it. A run that failed before its first periodic checkpoint gets the command
in its error line.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from support import run_cli


def crash(tmp_path: Path, fail_at: int, every: int) -> Path:
    settings = ["run.device=cpu", "visualizers=[]", "toy.samples=32", "toy.batch_size=4", "loop.epochs=3",
                "loop.log_every_steps=1", f"checkpoint.every_steps={every}", f"toy.fail_at_step={fail_at}",
                "run.output_dir=runs"]
    failed = run_cli("train", "--trainer", "toy", *(a for s in settings for a in ("--set", s)), cwd=tmp_path)
    assert failed.returncode != 0
    return tmp_path / "runs" / "run" / "version_0"


@pytest.mark.slow
def test_resume_names_a_newer_emergency_checkpoint_and_its_command_resumes_from_it(tmp_path: Path) -> None:
    run_dir = crash(tmp_path, fail_at=7, every=5)
    emergency = run_dir / "checkpoints" / "emergency-step00000006.pt"
    assert json.loads((run_dir / "status.json").read_text())["emergency_checkpoint"] == str(
        Path("runs/run/version_0/checkpoints/emergency-step00000006.pt"))
    assert emergency.is_file()

    periodic = run_cli("train", "--resume", str(run_dir), "--set", "toy.fail_at_step=null", "--set", "loop.max_steps=8",
                       cwd=tmp_path)
    assert periodic.returncode == 0, periodic.stderr
    command = f"nectargan train --resume {run_dir} --checkpoint {emergency}"
    assert (f"note: {emergency} (step 6), saved when the run failed, is newer than the checkpoint resumed from "
            f"(step 5); to continue from it instead: {command}") in periodic.stderr.splitlines()
    assert re.search(rf"resuming {re.escape(str(run_dir))} at epoch 1/\d+, batch \d+/\d+ \(step 5\)", periodic.stderr), \
        periodic.stderr

    # The command the note gives, as written (with the overrides this test needs).
    chosen = run_cli(*command.split()[1:], "--set", "toy.fail_at_step=null", "--set", "loop.max_steps=9",
                     cwd=tmp_path)
    assert chosen.returncode == 0, chosen.stderr
    assert re.search(rf"resuming {re.escape(str(run_dir))} at epoch 1/\d+, batch \d+/\d+ \(step 6\)", chosen.stderr), \
        chosen.stderr
    assert json.loads((run_dir / "status.json").read_text())["step"] == 9


@pytest.mark.slow
def test_a_run_with_only_an_emergency_checkpoint_gets_the_command(tmp_path: Path) -> None:
    run_dir = crash(tmp_path, fail_at=3, every=50)
    emergency = run_dir / "checkpoints" / "emergency-step00000002.pt"
    assert emergency.is_file()
    resumed = run_cli("train", "--resume", str(run_dir), cwd=tmp_path)
    assert resumed.returncode == 1
    assert resumed.stderr.strip().splitlines() == [
        f"error: {run_dir}: no periodic checkpoint to resume from, only the emergency checkpoint saved when the run "
        f"failed; continue from it with: nectargan train --resume {run_dir} --checkpoint {emergency}"]
