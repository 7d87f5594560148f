"""One writer per run, and a resume that fails changes nothing.

* A second ``nectargan train --resume`` of a run that is being trained (in
  one process or with ``--nproc``) is refused with one line naming the
  holder, and the first run's metrics log stays intact (every step once).
* A run whose process was SIGKILLed shows as interrupted in ``nectargan
  runs`` (its status.json still says running) and is taken over by the next
  ``--resume``.
* ``--resume`` with overrides that build other networks fails with one line
  naming the networks and shapes, and leaves ``config.yaml``,
  ``status.json``, ``metrics.jsonl`` and every checkpoint byte for byte as
  they were; the same resume without the override then works.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support import run_cli

TOY = ["run.device=cpu", "visualizers=[]", "toy.samples=16", "toy.batch_size=4", "loop.log_every_steps=1",
       "run.output_dir=runs"]


def settings(*extra: str) -> list[str]:
    return [arg for s in (*TOY, *extra) for arg in ("--set", s)]


def start_training(tmp_path: Path, *extra: str) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NECTARGAN_")}
    exe = Path(sys.executable).with_name("nectargan")
    return subprocess.Popen([str(exe), "train", "--trainer", "toy", *settings(*extra)], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for_step(run_dir: Path, step: int, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()[1]
        try:
            if any(json.loads(line).get("step", 0) >= step for line in (run_dir / "metrics.jsonl").read_text()
                   .splitlines() if line.endswith("}")):
                return
        except OSError:
            pass
        time.sleep(0.05)
    pytest.fail("training did not reach the step")


def train_steps(run_dir: Path) -> list[int]:
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [r["step"] for r in records if r["kind"] == "train"]


@pytest.mark.slow
def test_a_second_writer_is_refused_and_the_first_runs_on_intact(tmp_path: Path) -> None:
    run_dir = tmp_path / "runs" / "run" / "version_0"
    first = start_training(tmp_path, "loop.epochs=1000", "toy.step_sleep=0.05", "checkpoint.every_steps=2")
    try:
        wait_for_step(run_dir, 4, first)
        holder = f"process {first.pid} on {socket.gethostname()} since "
        refusal = " is training this run; one process writes a run: wait for it to end, or stop it first"
        second = run_cli("train", "--resume", str(run_dir), "--set", "loop.max_steps=100000", cwd=tmp_path)
        launched = run_cli("train", "--resume", str(run_dir), "--nproc", "2", cwd=tmp_path)
        listed = run_cli("runs", "runs", cwd=tmp_path)
        assert first.poll() is None, "the first run ended before the others tried"
        first.send_signal(signal.SIGTERM)
        _, stderr = first.communicate(timeout=120)
    finally:
        if first.poll() is None:
            first.kill()
    for refused in (second, launched):
        assert refused.returncode == 1, refused.stderr
        lines = refused.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"error: {run_dir}: {holder}") and lines[0].endswith(refusal)
    assert " running " in listed.stdout.splitlines()[1], listed.stdout
    assert first.returncode == 143, stderr
    status = json.loads((run_dir / "status.json").read_text())
    assert status["status"] == "interrupted" and status["pid"] == first.pid
    assert train_steps(run_dir) == list(range(1, status["step"] + 1))  # every step once: nobody else wrote


@pytest.mark.slow
def test_the_lock_of_a_killed_run_is_taken_over(tmp_path: Path) -> None:
    run_dir = tmp_path / "runs" / "run" / "version_0"
    killed = start_training(tmp_path, "loop.epochs=100", "toy.step_sleep=0.05", "checkpoint.every_steps=2")
    wait_for_step(run_dir, 4, killed)
    killed.send_signal(signal.SIGKILL)
    killed.communicate()
    assert json.loads((run_dir / "status.json").read_text())["status"] == "running"  # nobody could say otherwise
    listed = run_cli("runs", "runs", "--json", cwd=tmp_path)
    summary = json.loads(listed.stdout)[0]
    assert (summary["status"], summary["note"]) == ("interrupted", "process gone")

    resumed = run_cli("train", "--resume", str(run_dir), "--set", "loop.max_steps=12", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert (f"note: process {killed.pid} on {socket.gethostname()} since ") in resumed.stderr
    assert ", which was training this run, is gone without saying so (killed?); this process takes the run over" \
        in resumed.stderr
    status = json.loads((run_dir / "status.json").read_text())
    assert (status["status"], status["step"]) == ("finished", 12)
    assert train_steps(run_dir) == list(range(1, 13))


@pytest.mark.slow
def test_a_deleted_lock_file_is_locked_again_and_still_refuses_a_second_writer(tmp_path: Path) -> None:
    run_dir = tmp_path / "runs" / "run" / "version_0"
    first = start_training(tmp_path, "loop.epochs=1000", "toy.step_sleep=0.05", "checkpoint.every_steps=2")
    try:
        wait_for_step(run_dir, 3, first)
        (run_dir / "run.lock").unlink()  # a cleanup script, rsync --delete
        step = json.loads((run_dir / "metrics.jsonl").read_text().splitlines()[-1])["step"]
        wait_for_step(run_dir, step + 2, first)  # the next writes find the file gone and lock a new one
        second = run_cli("train", "--resume", str(run_dir), "--set", "loop.max_steps=100000", cwd=tmp_path)
        assert first.poll() is None, "the first run ended before the second tried"
        first.send_signal(signal.SIGTERM)
        _, stderr = first.communicate(timeout=120)
    finally:
        if first.poll() is None:
            first.kill()
    assert second.returncode == 1 and second.stderr.startswith(f"error: {run_dir}: process {first.pid} "), \
        second.stderr
    assert "warning: runs/run/version_0/run.lock was deleted or replaced while this process trained the run; " \
        "locked it again" in stderr
    assert first.returncode == 143, stderr
    status = json.loads((run_dir / "status.json").read_text())
    assert status["status"] == "interrupted" and status["pid"] == first.pid
    assert train_steps(run_dir) == list(range(1, status["step"] + 1))


@pytest.mark.slow
def test_a_run_whose_lock_file_was_replaced_under_it_stops_without_writing(tmp_path: Path) -> None:
    """A second writer holds a new run.lock: the first process stops at its next write with one line naming
    it and writes nothing more (no status, no emergency checkpoint)."""
    run_dir = tmp_path / "runs" / "run" / "version_0"
    first = start_training(tmp_path, "loop.epochs=1000", "toy.step_sleep=0.2", "checkpoint.every_steps=2")
    try:
        wait_for_step(run_dir, 3, first)
        # A second writer's lock on a new file that replaced the run's (rsync, a restore from a backup): the
        # kernel's flock, as `nectargan train --resume` takes it, held by a helper process, then renamed in.
        replacement = tmp_path / "run.lock.new"
        holder = subprocess.Popen(
            [sys.executable, "-c", "import fcntl, os, sys, time; fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT); "
             "fcntl.flock(fd, fcntl.LOCK_EX); print('locked', flush=True); time.sleep(120)",
             str(replacement)], stdout=subprocess.PIPE, text=True)
        assert holder.stdout.readline().strip() == "locked"
        os.replace(replacement, run_dir / "run.lock")
        records = (run_dir / "metrics.jsonl").read_bytes()
        _, stderr = first.communicate(timeout=60)
        status = (run_dir / "status.json").read_bytes()
        listed = run_cli("runs", "runs", cwd=tmp_path)
    finally:
        for proc in (first, locals().get("holder")):
            if proc is not None and proc.poll() is None:
                proc.kill()
    assert first.returncode == 1, stderr
    lines = stderr.strip().splitlines()
    assert lines[-1] == (
        "error: runs/run/version_0/run.lock: the run's lock file was deleted or replaced while this process trained the "
        f"run, and process {holder.pid} on {socket.gethostname()} has taken the run since; this process stopped "
        "without writing anything more (two writers would mix the run's files); never delete run.lock of a live "
        "run"), stderr
    assert "Traceback" not in stderr
    # Nothing more was written by the first process: at most the one record being written as the lock went.
    after = (run_dir / "metrics.jsonl").read_bytes()
    assert after.startswith(records) and after.count(b"\n") <= records.count(b"\n") + 1
    assert json.loads(status)["status"] == "running"  # it did not mark the other writer's run failed
    assert not list((run_dir / "checkpoints").glob("emergency-*"))
    assert " running " in listed.stdout.splitlines()[1], listed.stdout


def snapshot(run_dir: Path) -> dict[str, bytes]:
    """Every file of the run directory (its lock file too) by relative path, with its bytes."""
    return {str(p.relative_to(run_dir)): p.read_bytes() for p in sorted(run_dir.rglob("*")) if p.is_file()}


@pytest.mark.slow
def test_a_resume_whose_networks_do_not_fit_changes_nothing(tmp_path: Path) -> None:
    """The case from the field: ``--resume RUN --set models.generator.ngf=16`` of a run trained with 8."""
    made = run_cli("data", "synth", str(tmp_path / "data"), "--count", "5", "--size", "32", "--val", "0.2",
                   "--test", "0")
    assert made.returncode == 0, made.stderr
    pix2pix = [f"data.root={tmp_path / 'data'}", "data.num_workers=0", "data.load_size=32", "data.crop_size=32",
               "models.generator.name=unet", "models.generator.depth=4", "models.generator.ngf=8",
               "models.discriminator.ndf=8", "run.device=cpu", "visualizers=[]", "loop.max_steps=2",
               "loop.log_every_steps=1", "run.output_dir=runs"]
    done = run_cli("train", "--trainer", "pix2pix", *(a for s in pix2pix for a in ("--set", s)), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    run_dir = tmp_path / "runs" / "run" / "version_0"
    checkpoint = run_dir / "checkpoints" / "epoch0000-step00000002.pt"
    before = snapshot(run_dir)

    failed = run_cli("train", "--resume", str(run_dir), "--set", "models.generator.ngf=16", "--set",
                     "loop.max_steps=3", cwd=tmp_path)
    assert failed.returncode == 1
    assert "Traceback" not in failed.stderr
    assert re.fullmatch(
        rf"error: {re.escape(str(checkpoint))}: the checkpoint's networks do not fit the ones this config builds: "
        r"'generator': \d+ tensor\(s\) differ in shape, e\.g\. '[\w.]+' is \[8, 3, 4, 4\] in the checkpoint but "
        r"\[16, 3, 4, 4\] here; the run's config \(with any --set\) must build the networks it was trained with; "
        rf"nothing in {re.escape(str(run_dir))} was changed", failed.stderr.strip()), failed.stderr
    assert snapshot(run_dir) == before  # config.yaml, status.json, metrics.jsonl, checkpoints: byte for byte

    resumed = run_cli("train", "--resume", str(run_dir), "--set", "loop.max_steps=3", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert "max_steps: 3" in (run_dir / "config.yaml").read_text() and "ngf: 8" in (run_dir / "config.yaml").read_text()
    assert train_steps(run_dir) == [1, 2, 3]
