"""Data-parallel training: 2 processes on gloo (CPU), started by ``nectargan train --nproc 2``.

Every run here is real: torchrun's elastic agent starts two ``python -m
nectargan_core train`` workers that join a gloo process group on 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from nectargan_core.checkpoint import load_checkpoint, verify_checkpoint
from nectargan_core.rundir import RunDir
from support import alive, rank_pids, run_cli, start_cli

pytestmark = pytest.mark.skipif(not torch.distributed.is_available(), reason="torch.distributed unavailable")

#: A UNet and PatchGAN without normalisation or dropout: a step's gradients are then the
#: mean of per-sample gradients, so 2 processes x batch 1 must equal 1 process x batch 2.
PER_SAMPLE_MODELS = ("models.generator.name=unet", "models.generator.depth=4", "models.generator.ngf=8",
                     "models.generator.norm=none", "models.generator.dropout_layers=0",
                     "models.discriminator.ndf=8", "models.discriminator.norm=none")


@pytest.fixture(scope="module")
def pairs(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("ddp_data") / "data"
    made = run_cli("data", "synth", str(root), "--count", "12", "--size", "32", "--val", "0.25", "--test", "0")
    assert made.returncode == 0, made.stderr
    return root


def pix2pix_args(data: Path, *settings: str) -> list[str]:
    base = [f"data.root={data}", "data.load_size=32", "data.crop_size=32", "data.num_workers=0",
            "run.device=cpu", "run.deterministic=true", "visualizers=[]", "loop.log_every_steps=1",
            "examples.count=2", *PER_SAMPLE_MODELS, *settings]
    return ["train", "--trainer", "pix2pix", *(a for s in base for a in ("--set", s))]


def state(run_dir: Path) -> dict:
    """The newest periodic checkpoint's state of a run."""
    return load_checkpoint(RunDir(run_dir).periodic_checkpoints()[-1])


def assert_same_tensors(a, b, *, atol: float = 0.0, where: str = "") -> None:
    if isinstance(a, torch.Tensor):
        if atol:
            torch.testing.assert_close(a, b, atol=atol, rtol=0, msg=lambda m: f"{where}: {m}")
        else:
            assert torch.equal(a, b), where
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for key in a:
            assert_same_tensors(a[key], b[key], atol=atol, where=f"{where}.{key}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same_tensors(x, y, atol=atol, where=f"{where}[{i}]")
    else:
        assert a == b, where


def train_losses(run_dir: Path) -> list[dict]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [r["losses"] for r in map(json.loads, lines) if r["kind"] == "train"]


def val_metrics(run_dir: Path) -> list[dict]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [r["metrics"] for r in map(json.loads, lines) if r["kind"] == "val"]


@pytest.mark.parametrize("accumulation, steps", [(1, 3), (2, 4)], ids=["plain", "gradient-accumulation"])
def test_two_processes_of_batch_1_equal_one_process_of_batch_2(pairs: Path, tmp_path: Path, accumulation: int,
                                                               steps: int) -> None:
    common = ("loop.epochs=1", f"loop.max_steps={steps}", f"loop.val_every_steps={steps}",
              "loop.val_every_epochs=null", "examples.every_epochs=null", f"optim.gradient_accumulation={accumulation}")
    two = run_cli(*pix2pix_args(pairs, "data.batch_size=1", "run.output_dir=two", *common), "--nproc", "2",
                  cwd=tmp_path, timeout=240)
    assert two.returncode == 0, two.stderr
    assert "(2 processes, gloo)" in two.stderr
    one = run_cli(*pix2pix_args(pairs, "data.batch_size=2", "run.output_dir=one", *common), cwd=tmp_path)
    assert one.returncode == 0, one.stderr

    two_state, one_state = state(tmp_path / "two/run/version_0"), state(tmp_path / "one/run/version_0")
    assert two_state["global_step"] == one_state["global_step"] == steps
    for net in ("generator", "discriminator", "opt_g", "opt_d"):
        assert_same_tensors(two_state["state"][net], one_state["state"][net], atol=2e-6, where=net)
    updates = steps // accumulation
    assert int(two_state["state"]["opt_g"]["state"][0]["step"]) == updates  # real updates were compared
    # Each process validated half of the val split; the reduced metrics are those of the whole split.
    two_val, one_val = (val_metrics(tmp_path / f"{n}/run/version_0") for n in ("two", "one"))
    assert len(two_val) == len(one_val) == 1
    assert two_val[0] == pytest.approx(one_val[0], rel=1e-5, abs=1e-6)
    # The losses logged by the 2-process run are the means over both processes: the batch-2 losses.
    for two_loss, one_loss in zip(train_losses(tmp_path / "two/run/version_0"),
                                  train_losses(tmp_path / "one/run/version_0"), strict=True):
        for key in ("G/total", "D/total", "G/l1.raw"):
            assert two_loss[key] == pytest.approx(one_loss[key], rel=1e-5), key


def test_batch_norm_models_validate_and_stop_early_together(pairs: Path, tmp_path: Path) -> None:
    """The default (batch-norm) networks; early stopping decided by rank 0 after a mid-epoch validation."""
    settings = ["models.generator.name=unet", "models.generator.depth=4", "models.generator.ngf=8",
                "models.discriminator.ndf=8", "data.batch_size=2", "loop.epochs=5", "loop.val_every_steps=2",
                "validation.early_stop_metric=psnr", "validation.early_stop_patience=1",
                "validation.early_stop_min_delta=1000", "checkpoint.best_metric=val/psnr", "checkpoint.best_mode=max",
                f"data.root={pairs}", "data.load_size=32", "data.crop_size=32", "data.num_workers=0", "run.device=cpu",
                "visualizers=[]"]
    done = run_cli("train", "--trainer", "pix2pix", *(a for s in settings for a in ("--set", s)), "--nproc", "2",
                   cwd=tmp_path, timeout=240)
    assert done.returncode == 0, done.stderr
    version = tmp_path / "runs/run/version_0"
    status = json.loads((version / "status.json").read_text())
    assert status["status"] == "finished" and status["step"] == 3, status  # validated at step 2 and epoch end (3)
    assert "early stopping: val/psnr did not improve" in status["reason"]
    assert (version / "checkpoints/best.pt").exists()
    checkpoint = state(version)
    assert checkpoint["global_step"] == 3 and len(checkpoint["ranks"]) == 2
    assert any("running_mean" in key for key in checkpoint["state"]["generator"])  # plain BatchNorm keys


def test_a_two_process_run_writes_one_run_and_resumes_mid_epoch_exactly(pairs: Path, tmp_path: Path) -> None:
    # 9 train pairs, batch 2 per process (5 each, one padded): 3 steps per epoch. Stop after step 4 (mid-epoch 2), resume to the end.
    settings = ("data.batch_size=2", "loop.epochs=2", "checkpoint.best_metric=val/psnr", "checkpoint.best_mode=max")
    full = run_cli(*pix2pix_args(pairs, "run.output_dir=full", *settings), "--nproc", "2", cwd=tmp_path,
                   timeout=240)
    assert full.returncode == 0, full.stderr
    run = tmp_path / "full/run"
    assert sorted(p.name for p in run.iterdir()) == ["version_0"]
    version = run / "version_0"
    assert sorted(p.name for p in (version / "checkpoints").iterdir()) == [
        "best.pt", "best.pt.json", "epoch0001-step00000003.pt", "epoch0001-step00000003.pt.json",
        "epoch0002-step00000006.pt", "epoch0002-step00000006.pt.json"]
    assert sorted(p.name for p in (version / "examples").iterdir()) == ["epoch0001.png", "epoch0002.png"]
    records = [json.loads(line) for line in (version / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records if r["kind"] == "train"] == [1, 2, 3, 4, 5, 6]  # once each, not per rank
    assert [r["kind"] for r in records].count("val") == 2
    assert json.loads((version / "status.json").read_text())["status"] == "finished"
    assert full.stderr.count("finished: 2/2 epochs, 6 steps") == 1  # rank 0 reports, once

    part = run_cli(*pix2pix_args(pairs, "run.output_dir=part", "loop.max_steps=4", *settings), "--nproc", "2",
                   cwd=tmp_path, timeout=240)
    assert part.returncode == 0, part.stderr
    resumed_dir = tmp_path / "part/run/version_0"
    assert state(resumed_dir)["batch_in_epoch"] == 1  # stopped mid-epoch
    resumed = run_cli("train", "--resume", str(resumed_dir), "--set", "loop.max_steps=null", "--nproc", "2",
                      cwd=tmp_path, timeout=240)
    assert resumed.returncode == 0, resumed.stderr
    assert "resuming" in resumed.stderr and "(2 processes, gloo)" in resumed.stderr

    a, b = state(version), state(resumed_dir)
    assert_same_tensors(a["state"], b["state"], where="state")
    assert_same_tensors(a["ranks"], b["ranks"], where="ranks")
    assert train_losses(version) == train_losses(resumed_dir)
    assert (version / "examples/epoch0002.png").read_bytes() == (resumed_dir / "examples/epoch0002.png").read_bytes()


def toy_args(*settings: str) -> list[str]:
    base = ["run.device=cpu", "visualizers=[]", "toy.samples=64", "toy.batch_size=4", "loop.epochs=1000",
            "checkpoint.every_steps=5", "distributed.timeout_s=20", *settings]
    return ["train", "--trainer", "toy", *(a for s in base for a in ("--set", s)), "--nproc", "2"]


def start_toy_run(tmp_path: Path, *settings: str) -> subprocess.Popen:
    """A long 2-process toy run in the background; returns once it has written a checkpoint."""
    return start_cli(*toy_args("toy.step_sleep=0.05", *settings), cwd=tmp_path,
                     until=tmp_path / "runs/run/version_0/checkpoints")


def test_killing_one_rank_stops_every_rank_and_keeps_the_last_checkpoint(tmp_path: Path) -> None:
    launcher = start_toy_run(tmp_path)
    checkpoints = tmp_path / "runs/run/version_0/checkpoints"
    try:
        ranks = rank_pids(launcher.pid)
        assert sorted(ranks) == [0, 1]
        killed_at = time.monotonic()
        os.kill(ranks[1], signal.SIGKILL)
        _, stderr = launcher.communicate(timeout=60)
        took = time.monotonic() - killed_at
    finally:
        if launcher.poll() is None:
            launcher.kill()
    assert launcher.returncode != 0
    assert took < 20, f"the run took {took:.1f}s to stop after a rank died"
    assert not alive(ranks[0]), "rank 0 outlived the run"
    last = [line for line in stderr.splitlines() if line.strip()][-1]
    assert last.startswith("error: rank 1 ") and "killed by SIGKILL" in last, stderr
    assert "Traceback" not in stderr
    for checkpoint in sorted(checkpoints.glob("epoch*-step*.pt")):
        verify_checkpoint(checkpoint)


def test_an_error_in_one_rank_fails_the_run_naming_that_rank(tmp_path: Path) -> None:
    failed = run_cli(*toy_args("toy.fail_at_step=7", "toy.fail_rank=1"), cwd=tmp_path, timeout=120)
    assert failed.returncode != 0
    assert "toy failure at step 7" in failed.stderr
    last = [line for line in failed.stderr.splitlines() if line.strip()][-1]
    assert last.startswith("error: rank 1 "), failed.stderr
    assert failed.stderr.count("error:") == 1, failed.stderr  # one line for the run, not one per rank
    run_dir = (tmp_path / "runs/run/version_0").resolve()
    assert last.endswith(f"continue with nectargan train --resume {run_dir} --nproc 2"), last
    checkpoints = RunDir(tmp_path / "runs/run/version_0").periodic_checkpoints()
    assert [c.name for c in checkpoints] == ["epoch0000-step00000005.pt"]
    verify_checkpoint(checkpoints[0])


def test_a_run_that_failed_before_its_first_checkpoint_names_its_emergency_checkpoint(tmp_path: Path) -> None:
    failed = run_cli(*toy_args("toy.fail_at_step=2", "toy.fail_rank=0"), cwd=tmp_path, timeout=120)
    assert failed.returncode != 0 and failed.stderr.count("error:") == 1, failed.stderr
    assert "toy failure at step 2" in failed.stderr  # a plugin's bug: its traceback, from the rank
    last = [line for line in failed.stderr.splitlines() if line.strip()][-1]
    run_dir = (tmp_path / "runs/run/version_0").resolve()
    assert last.startswith("error: rank 0 "), last
    # no periodic checkpoint yet; rank 0 saved an emergency one: the line says how to continue from it
    emergency = RunDir(run_dir).emergency_checkpoints()
    assert len(emergency) == 1, list(run_dir.rglob("*.pt"))
    assert last.endswith(f"; an emergency checkpoint was saved: continue with nectargan train --resume {run_dir} "
                         f"--checkpoint {emergency[0]} --nproc 2"), last


def test_an_elastic_restart_resumes_the_same_run_exactly(tmp_path: Path) -> None:
    settings = ("loop.epochs=2", "toy.step_sleep=0")
    (tmp_path / "restarted").mkdir()
    restarted = run_cli(*toy_args(*settings, "toy.fail_at_step=13", "toy.fail_rank=1",
                                  "toy.fail_first_attempt_only=true"), "--max-restarts", "1",
                        cwd=tmp_path / "restarted", timeout=180)
    assert restarted.returncode == 0, restarted.stderr
    assert "toy failure at step 13" in restarted.stderr
    assert "torchrun restarted the processes: resuming" in restarted.stderr
    runs = tmp_path / "restarted/runs/run"
    assert sorted(p.name for p in runs.iterdir()) == ["version_0"]  # the restart continued the same run

    (tmp_path / "plain").mkdir()
    plain = run_cli(*toy_args(*settings), cwd=tmp_path / "plain", timeout=180)
    assert plain.returncode == 0, plain.stderr
    a, b = state(runs / "version_0"), state(tmp_path / "plain/runs/run/version_0")
    assert a["global_step"] == b["global_step"] == 16 and a["epoch"] == 2
    assert_same_tensors(a["state"], b["state"], where="state")
    assert train_losses(runs / "version_0") == train_losses(tmp_path / "plain/runs/run/version_0")


def test_ctrl_c_stops_every_rank_after_the_same_step_with_a_checkpoint(tmp_path: Path) -> None:
    launcher = start_toy_run(tmp_path)
    version = tmp_path / "runs/run/version_0"
    try:
        launcher.send_signal(signal.SIGINT)
        _, stderr = launcher.communicate(timeout=60)
    finally:
        if launcher.poll() is None:
            launcher.kill()
    assert launcher.returncode == 130, stderr
    assert "; resume with: nectargan train --resume" in stderr
    status = json.loads((version / "status.json").read_text())
    assert status["status"] == "interrupted"
    last = load_checkpoint(tmp_path / status["checkpoint"])
    assert last["global_step"] == status["step"] and len(last["ranks"]) == 2
    resumed = run_cli("train", "--resume", str(version), "--set", f"loop.max_steps={status['step'] + 3}",
                      "--nproc", "2", cwd=tmp_path, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    assert state(version)["global_step"] == status["step"] + 3


@pytest.mark.parametrize("first", [signal.SIGINT, pytest.param(signal.SIGTERM, marks=pytest.mark.slow)])
def test_a_second_ctrl_c_to_the_launcher_stops_every_rank_at_once(tmp_path: Path, first: signal.Signals) -> None:
    """The ranks run in process groups of their own, so a terminal's Ctrl-C reaches the launcher alone: a
    Ctrl-C after the first stop signal must reach the ranks as a SIGINT (stop at once, exit 130, as in one
    process), not as torch's SIGTERM (a repeat to them)."""
    launcher = start_toy_run(tmp_path, "toy.step_sleep=2", "checkpoint.every_steps=2")
    version = tmp_path / "runs/run/version_0"
    before = sorted(p.name for p in (version / "checkpoints").iterdir())
    try:
        launcher.send_signal(first)
        time.sleep(0.5)  # the ranks are inside their 2-second step: a graceful stop would finish it
        launcher.send_signal(signal.SIGINT)
        _, stderr = launcher.communicate(timeout=60)
    finally:
        if launcher.poll() is None:
            launcher.kill()
    assert launcher.returncode == 130, stderr
    assert stderr.count(f"{first.name} received") == 1, stderr
    assert stderr.splitlines()[-1].startswith("stopped at once after epoch "), stderr  # rank 0 alone says it
    assert stderr.count("stopped at once") == 1 and "aborted" not in stderr, stderr
    # Stopped inside the step: no checkpoint of it (a graceful stop writes one), nothing half-written.
    assert "Traceback" not in stderr and "checkpoint saved" not in stderr, stderr
    status = json.loads((version / "status.json").read_text())
    assert status["status"] == "interrupted" and "checkpoint" not in status
    assert sorted(p.name for p in (version / "checkpoints").iterdir()) == before
    resumed = run_cli("train", "--resume", str(version), "--set", "toy.step_sleep=0",
                      "--set", f"loop.max_steps={status['step'] + 2}", cwd=tmp_path, timeout=120)
    assert resumed.returncode == 0, resumed.stderr


def test_plain_torchrun_runs_the_same_command(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NECTARGAN_")}
    args = toy_args("loop.epochs=1")[:-2]  # without --nproc: torchrun starts the processes
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                           "-m", "nectargan_core", *args], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert "(2 processes, gloo)" in done.stderr
    assert state(tmp_path / "runs/run/version_0")["global_step"] == 8  # 64 samples / (2 x 4) per step


@pytest.mark.parametrize("args, message", [
    (("-c", "missing.yaml"), "error: missing.yaml: config file not found"),
    (("--trainer", "toy", "--set", "distributed.backend=mpi"),
     "error: --set distributed.backend=mpi: distributed.backend: String should match pattern '^(auto|gloo|nccl)$' (got 'mpi')"),
    (("--resume", "nowhere"), "error: nowhere: run directory not found"),
    (("--trainer", "pix2pix", "--set", "data.root=."),  # the trainer's own check: no train/ split here
     "error: train: split folder does not exist (found: no folders)"),
])
def test_config_mistakes_are_one_line_before_any_process_starts(tmp_path: Path, args, message: str) -> None:
    done = run_cli("train", *args, "--nproc", "2", cwd=tmp_path, timeout=60)
    assert done.returncode != 0
    assert done.stderr.strip().splitlines() == [message]  # once, not once per process
    assert not (tmp_path / "runs").exists()
