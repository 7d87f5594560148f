"""Numerical and environment faults: each ends in one clear line and never costs the last good checkpoint."""

from __future__ import annotations

import errno
import math
import os

import pytest
import torch

from nectargan_core import Run, load_checkpoint
from nectargan_core.errors import CheckpointError, RunDirError, TrainingError
from nectargan_core.rundir import RunDir
from support import make_fake_dist, run_cli


def assert_first_two_checkpoints_kept(run) -> None:
    files = sorted(os.listdir(run.dir / "checkpoints"))
    assert files == ["epoch0000-step00000001.pt", "epoch0000-step00000001.pt.json",
                     "epoch0000-step00000002.pt", "epoch0000-step00000002.pt.json"]  # nothing pruned, no temp file


def toy(tmp_path, loop=None, checkpoint=None, **toy_options):
    return {
        "trainer": "toy",
        "run": {"output_dir": str(tmp_path / "runs"), "name": "faults", "device": "cpu", "deterministic": True},
        "loop": {"epochs": 2, "log_every_steps": 4, **(loop or {})},
        "checkpoint": {"every_steps": 1, "keep_last": 2, **(checkpoint or {})},
        "toy": {"samples": 16, "batch_size": 4, **toy_options},
        "visualizers": [],
    }


def latest(run: Run):
    return RunDir(run.dir).latest_checkpoint()


# -- numerical faults ------------------------------------------------------
def test_nan_is_never_checkpointed_and_stops_the_run(tmp_path):
    run = Run.create(toy(tmp_path, nan_at_step=3))
    with pytest.raises(TrainingError, match=r"non-finite weights of 'model', loss loss at step 3; checkpoint not written; "
                                            r"the last good checkpoint is .*epoch0000-step00000002\.pt"):
        run.fit()
    good = load_checkpoint(latest(run))
    assert good["global_step"] == 2
    assert all(torch.isfinite(t).all() for t in good["state"]["model"].values())
    assert run.status()["status"] == "failed"


def test_nan_loss_found_at_the_logging_interval_names_steps_and_term(tmp_path):
    run = Run.create(toy(tmp_path, checkpoint={"every_steps": None}, nan_at_step=6))
    with pytest.raises(TrainingError, match=r"non-finite loss loss in steps 5-8; stopped \(loop.nonfinite=stop\)"):
        run.fit()
    assert latest(run).name == "epoch0001-step00000004.pt"  # the epoch-end checkpoint before the fault


def test_skip_policy_leaves_the_update_out_and_keeps_training(tmp_path, capsys):
    run = Run.create(toy(tmp_path, loop={"nonfinite": "skip"}, nan_at_step=6)).fit()
    assert "warning: non-finite loss loss in steps 5-8; left out of the epoch averages" in capsys.readouterr().err
    assert run.status()["status"] == "finished"
    final = load_checkpoint(latest(run))
    assert final["global_step"] == 8 and all(torch.isfinite(t).all() for t in final["state"]["model"].values())
    epoch_losses = [r["losses"] for r in run.metrics("epoch")]
    assert "loss" not in epoch_losses[1] and math.isfinite(epoch_losses[0]["loss"])


def test_nan_through_the_cli_is_one_line(tmp_path):
    config = tmp_path / "nan.yaml"
    config.write_text(f"trainer: toy\nrun: {{output_dir: {tmp_path / 'runs'}, device: cpu}}\n"
                      "checkpoint: {every_steps: 1}\ntoy: {nan_at_step: 2}\nvisualizers: []\n")
    result = run_cli("train", "-c", str(config), timeout=60)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("error: non-finite weights of 'model', loss loss at step 2;")


# -- environment faults ----------------------------------------------------
def test_output_dir_under_a_regular_file(tmp_path):
    (tmp_path / "file").write_text("")
    config = toy(tmp_path)
    config["run"]["output_dir"] = str(tmp_path / "file" / "runs")
    with pytest.raises(RunDirError, match="run.output_dir: cannot create"):
        Run.create(config)


def test_disk_full_during_checkpoint_write_keeps_the_previous_one(tmp_path, monkeypatch):
    run = Run.create(toy(tmp_path))
    real_save = torch.save

    def fill_disk_at_step_3(obj, handle):
        if obj["global_step"] == 3:
            handle.write(bytes(1024))
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_save(obj, handle)

    monkeypatch.setattr(torch, "save", fill_disk_at_step_3)
    with pytest.raises(CheckpointError, match=r"epoch0000-step00000003\.pt: could not write checkpoint "
                                              r"\(No space left on device\); earlier checkpoints are kept"):
        run.fit()
    assert_first_two_checkpoints_kept(run)
    assert load_checkpoint(latest(run))["global_step"] == 2
    assert run.status()["status"] == "failed"


OOM_TRAINER = """
import torch

from nectargan_core import hookimpl
from nectargan_toy.trainer import ToyTrainer
from nectargan_toy.options import ToyTrainerOptions


class HungryTrainer(ToyTrainer):
    @hookimpl(tryfirst=True)
    def train_step(self, batch, batch_idx):
        raise {error}


@hookimpl
def register_trainers(register):
    register("hungry", "hungry_plugin:HungryTrainer", options=ToyTrainerOptions)
"""


@pytest.mark.parametrize("error", ['torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")',
                                   'RuntimeError("DefaultCPUAllocator: can\'t allocate memory: out of memory")',
                                   # a real failed allocation (4 TiB): the CPU allocator's own words
                                   'RuntimeError() if torch.empty(2**40) is None else None'])
def test_out_of_memory_on_the_first_step_is_one_line(tmp_path, error):
    site = make_fake_dist(tmp_path / "site", "nectargan-hungry", "hungry_plugin", OOM_TRAINER.format(error=error))
    config = tmp_path / "oom.yaml"
    config.write_text(f"trainer: hungry\nrun: {{output_dir: {tmp_path / 'runs'}, device: cpu}}\nvisualizers: []\n")
    result = run_cli("train", "-c", str(config), env={"PYTHONPATH": str(site)}, timeout=60)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        "error: out of memory on cpu at step 1: use a smaller batch size or image size")


def test_resume_removes_temp_files_of_dead_writers_only(tmp_path, capsys):
    """A write killed midway leaves ``.NAME.tmp-PID``; resume deletes it unless PID is alive (a write in progress)."""
    import subprocess
    import sys

    run = Run.create(toy(tmp_path, loop={"max_steps": 2}))
    run.fit()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(dead.stdout)  # exited and reaped: no such process now
    checkpoints = run.dir / "checkpoints"
    stale = checkpoints / f".epoch0000-step00000003.pt.tmp-{dead_pid}"
    stale_status = run.dir / f".status.json.tmp-{dead_pid}"
    live = checkpoints / f".epoch0000-step00000003.pt.tmp-{os.getpid()}"
    for path in (stale, stale_status, live):
        path.write_bytes(bytes(100))
    capsys.readouterr()
    Run.resume(run.dir, overrides=["loop.max_steps=3"])
    assert not stale.exists() and not stale_status.exists()
    assert live.exists()  # its writer (this process) is alive
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"removed 2 temp file(s) left by an interrupted write: {stale_status.name}, "
                   f"checkpoints/{stale.name}"]


@pytest.mark.parametrize("features", [3, 30000], ids=["small-fails-in-flush", "large-fails-in-torch-save"])
def test_file_size_limit_during_checkpoint_write_keeps_the_previous_one(tmp_path, features):
    """A real kernel-enforced limit (RLIMIT_FSIZE; write() fails with EFBIG mid-file), no mount needed.

    The run is resumed in a subprocess whose file size limit is half a checkpoint: the small
    files (status, metrics, config) fit, and the first checkpoint it writes fails partway. A small
    checkpoint fails when the file's buffer is flushed (an OSError); a large one inside
    ``torch.save``, which reports it as a RuntimeError.
    """
    import resource
    import signal
    import subprocess
    import sys
    from pathlib import Path

    from nectargan_core.checkpoint import sha256_of, verify_checkpoint

    run = Run.create(toy(tmp_path, loop={"max_steps": 2}, model={"name": "toy_linear", "features": features}))
    run.fit()
    good = latest(run)
    assert good.name == "epoch0000-step00000002.pt"
    before = {p.name: sha256_of(p) for p in (run.dir / "checkpoints").iterdir()}
    limit = good.stat().st_size // 2
    assert max(p.stat().st_size for p in run.dir.iterdir() if p.is_file()) < limit // 2

    def limited() -> None:  # in the child, before exec: SIGXFSZ ignored, so write() returns EFBIG
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    env = {k: v for k, v in os.environ.items() if not k.startswith("NECTARGAN_")}
    exe = Path(sys.executable).with_name("nectargan")
    command = [str(exe)] if exe.exists() else [sys.executable, "-m", "nectargan_core"]
    result = subprocess.run(command + ["train", "--resume", str(run.dir), "--set", "loop.max_steps=4"], env=env,
                            capture_output=True, text=True, timeout=60, preexec_fn=limited)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.strip().splitlines()[1:] == [  # after "resuming ... at epoch 0, step 2"
        f"error: {run.dir / 'checkpoints' / 'epoch0000-step00000003.pt'}: could not write checkpoint (File too large); "
        "earlier checkpoints are kept; raise the file size limit (ulimit -f) or choose another run.output_dir"]
    # The previous checkpoints are byte for byte as they were, verify and load; no temp file, nothing pruned.
    assert {p.name: sha256_of(p) for p in (run.dir / "checkpoints").iterdir()} == before
    verify_checkpoint(good)
    assert load_checkpoint(good)["global_step"] == 2
    assert run.status()["status"] == "failed"


@pytest.mark.parametrize("code, fix", [(errno.ENOSPC, "free space"), (errno.EFBIG, "raise the file size limit (ulimit -f)")])
def test_disk_errors_outside_checkpoints_are_one_line(tmp_path, code, fix):
    """Any write the run makes (metrics, status, images) that hits a full disk or the file size limit."""
    run = Run.create(toy(tmp_path))
    error = run.trainer._user_error(OSError(code, os.strerror(code), "runs/x/metrics.jsonl"))
    assert isinstance(error, TrainingError)
    assert str(error) == f"runs/x/metrics.jsonl: cannot write: {os.strerror(code)}; {fix} or choose another run.output_dir"


@pytest.fixture
def small_tmpfs(tmp_path):
    """Mount a tmpfs of a given size (skips where mounting is not permitted, e.g. unprivileged CI containers)."""
    import shutil
    import subprocess

    mounted = []

    def mount(size: int):
        point = tmp_path / f"tmpfs{len(mounted)}"
        point.mkdir()
        if shutil.which("mount") is None:
            pytest.skip("no mount command")
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(point)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
        mounted.append(point)
        return point

    yield mount
    for point in mounted:
        subprocess.run(["umount", str(point)], check=False)


def test_real_full_tmpfs_during_checkpoint_write_keeps_the_previous_one(tmp_path, small_tmpfs):
    """A real full file system: room for the run after step 2 plus half a checkpoint."""
    page = os.sysconf("SC_PAGE_SIZE")
    pages = lambda n: -(-n // page) * page  # noqa: E731 - tmpfs allocates whole pages
    reference = Run.create(toy(tmp_path / "reference", loop={"max_steps": 2}))
    reference.fit()
    used = sum(pages(p.stat().st_size) for p in reference.dir.rglob("*") if p.is_file())
    checkpoint = pages(latest(reference).stat().st_size)
    mount = small_tmpfs(used + checkpoint // 2 + page)
    run = Run.create(toy(mount))
    with pytest.raises(CheckpointError, match=r"epoch0000-step00000003\.pt: could not write checkpoint "
                                              r"\(No space left on device\); earlier checkpoints are kept"):
        run.fit()
    assert_first_two_checkpoints_kept(run)
    load_checkpoint(latest(run))  # verifies size and SHA-256 first
    assert run.status()["status"] == "failed"
