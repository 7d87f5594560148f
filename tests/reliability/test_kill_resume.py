"""Exact resume after SIGKILL: a killed and resumed run ends bit for bit like an uninterrupted one.

Each run is a real ``nectargan train`` subprocess of the toy trainer. A fake
plugin distribution adds a ``killer`` callback that SIGKILLs its own process
at a chosen step and phase (so the kill point is exact, not a race); one kill
comes from outside at whatever point the run has reached. Each chain is killed
and resumed several times, so resuming a resumed run is covered too.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import pytest
import torch

from nectargan_core.checkpoint import load_checkpoint
from nectargan_core.rundir import RunDir
from support import cli_runner, make_fake_dist

KILLER = """
import os
import signal

from nectargan_core import hookimpl


def die():
    os.kill(os.getpid(), signal.SIGKILL)


class Killer:
    '''SIGKILLs this process at step KILL_STEP in phase KILL_PHASE (step, write or validate).'''

    def __init__(self):
        self.phase = os.environ.get("KILL_PHASE")
        self.step = int(os.environ.get("KILL_STEP", "0"))

    def due(self, phase, trainer):
        return self.phase == phase and trainer.global_step == self.step

    @hookimpl
    def on_train_batch_end(self, trainer):
        if self.due("step", trainer):
            die()

    @hookimpl
    def on_validation_start(self, trainer):
        if self.due("validate", trainer):
            die()

    @hookimpl
    def on_save_checkpoint(self, trainer):
        if self.due("write", trainer):
            import torch

            def half_then_die(obj, handle):
                handle.write(b"PK\\x03\\x04" + bytes(4096))
                handle.flush()
                os.fsync(handle.fileno())
                die()

            torch.save = half_then_die


@hookimpl
def register_callbacks(register):
    register("killer", "killer_plugin:Killer", description="SIGKILLs the run at a chosen point")
"""

# 3 epochs of 4 batches; validation every 3 steps and at each epoch end; a checkpoint every step.
CONFIG = """\
trainer: toy
run:
  output_dir: {out}
  name: exact
  device: cpu
  deterministic: true
loop:
  epochs: 3
  log_every_steps: 2
  val_every_steps: 3
checkpoint:
  every_steps: 1
  keep_last: 2
callbacks: [killer, counter]
toy:
  samples: 16
  batch_size: 4
  step_sleep: 0.02
"""

#: Two chains of kills, each resumed after every kill: (KILL_PHASE, KILL_STEP), or None for a
#: SIGKILL from outside two checkpoints after the resume (a point the test does not choose).
CHAINS = {
    "step5-then-epoch-end-validation8": [("step", 5), ("validate", 8)],
    "write6-then-mid-epoch-validation9-then-outside": [("write", 6), ("validate", 9), None],
}
TIMEOUT = 90
#: Per chain, after each round: (the round's kill, its stderr, the temp files left in checkpoints/).
ROUNDS: dict[str, list[tuple[object, str, list[str]]]] = {}


def nectargan(*args: str, site: Path, **env: str) -> subprocess.Popen:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("NECTARGAN_", "KILL_"))}
    full_env.update(env, PYTHONPATH=os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])))
    exe = Path(sys.executable).with_name("nectargan")
    command = [str(exe)] if exe.exists() else [sys.executable, "-m", "nectargan_core"]
    return subprocess.Popen(command + list(args), env=full_env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)


def kill_from_outside(proc: subprocess.Popen, run_dir: Path, steps: int) -> None:
    """SIGKILL ``proc`` once it has checkpointed ``steps`` more steps: wherever it then is."""
    def step() -> int:
        latest = RunDir(run_dir).latest_checkpoint()
        return int(latest.stem.rsplit("step", 1)[1]) if latest else 0

    target = step() + steps
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline and proc.poll() is None:
        if step() >= target:
            proc.kill()
            return
        time.sleep(0.001)
    raise AssertionError(f"run ended or stalled before the kill: {proc.communicate()[1][-2000:]}")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Run dirs of the uninterrupted run and of each chain, killed and resumed until it finished.

    The chains advance together, one process each per round, to use both cores.
    """
    root = tmp_path_factory.mktemp("kill")
    site = make_fake_dist(root / "site", "nectargan-killer", "killer_plugin", KILLER)
    run_dirs = {}
    for name in ("uninterrupted", *CHAINS):
        out = root / name
        out.mkdir()
        (out / "run.yaml").write_text(CONFIG.format(out=out / "runs"))
        run_dirs[name] = out / "runs" / "exact" / "version_0"
    plans = {"uninterrupted": ["finish"], **{name: [*kills, "finish"] for name, kills in CHAINS.items()}}
    for round_ in range(max(map(len, plans.values()))):
        procs = {}
        for name, plan in plans.items():
            if round_ >= len(plan):
                continue
            kill = plan[round_]
            args = ["-c", str(root / name / "run.yaml")] if round_ == 0 else ["--resume", str(run_dirs[name])]
            env = {"KILL_PHASE": kill[0], "KILL_STEP": str(kill[1])} if isinstance(kill, tuple) else {}
            procs[name] = (kill, nectargan("train", *args, site=site, **env))
        for name, (kill, proc) in procs.items():  # outside kills first: they watch a live run
            if kill is None:
                kill_from_outside(proc, run_dirs[name], 2)
        for name, (kill, proc) in procs.items():
            _, err = proc.communicate(timeout=TIMEOUT)
            expected = 0 if kill == "finish" else -signal.SIGKILL
            assert proc.returncode == expected, f"{name} round {round_} ({kill}): exit {proc.returncode}\n{err[-3000:]}"
            temps = sorted(p.name for p in (run_dirs[name] / "checkpoints").glob(".*.tmp-*"))
            ROUNDS.setdefault(name, []).append((kill, err, temps))
            if kill == ("write", 6):
                assert temps, "the kill missed the checkpoint write"
    return run_dirs


def assert_identical(a, b, where: str) -> None:
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape, where
        assert torch.equal(a, b), f"{where}: tensors differ"
    elif isinstance(a, dict):
        assert isinstance(b, dict) and sorted(map(str, a)) == sorted(map(str, b)), f"{where}: keys differ"
        for key in a:
            assert_identical(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, (list, tuple)):
        assert isinstance(b, (list, tuple)) and len(a) == len(b), f"{where}: lengths differ"
        for index, (x, y) in enumerate(zip(a, b)):
            assert_identical(x, y, f"{where}[{index}]")
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"


def final_state(run_dir: Path) -> dict:
    checkpoint = load_checkpoint(RunDir(run_dir).latest_checkpoint())
    del checkpoint["saved_at"]
    del checkpoint["config"]["run"]["output_dir"]  # each run has its own folder
    return checkpoint


def metrics_without_time(run_dir: Path) -> list[dict]:
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in record.items() if k not in ("time", "elapsed")} for record in records]


@pytest.mark.slow
def test_resume_removes_the_temp_file_of_the_killed_write(runs):
    (kill, _, left), (_, resume_err, after_resume) = ROUNDS["write6-then-mid-epoch-validation9-then-outside"][:2]
    assert kill == ("write", 6) and len(left) == 1 and left[0].startswith(".epoch0001-step00000006.pt.tmp-")
    assert after_resume == [], "the resumed run left the dead writer's temp file"
    assert f"removed 1 temp file(s) left by an interrupted write: checkpoints/{left[0]}" in resume_err


@pytest.mark.slow
@pytest.mark.parametrize("chain", list(CHAINS))
def test_killed_and_resumed_run_equals_uninterrupted_run(runs, chain):
    expected, actual = final_state(runs["uninterrupted"]), final_state(runs[chain])
    assert actual["global_step"] == 12 and actual["epoch"] == 3
    # Weights, optimizer state (momentum buffers, LR), RNG states, loop counters, plugin state.
    assert_identical(expected, actual, "checkpoint")
    assert metrics_without_time(runs[chain]) == metrics_without_time(runs["uninterrupted"])
    assert RunDir(runs[chain]).read_status()["status"] == "finished"


# -- a GAN trainer's run killed and resumed, beside an uninterrupted one (pix2pix, CycleGAN) -------------
def run_side_by_side(root: Path, site: Path, config: str, plans: dict[str, list],
                     check_killed: Callable[[Path, tuple[str, int]], None]) -> dict[str, Path]:
    """The run of each plan, from ``config`` (written to ``root/NAME/run.yaml``), the plans' rounds side by side.

    A plan is a list of rounds: ``(phase, step)``, SIGKILLed there by the killer plugin, or ``"finish"``;
    each round after the first resumes. ``check_killed(run_dir, kill)`` checks a killed run's checkpoints.
    """
    run_dirs = {}
    for name in plans:
        (root / name).mkdir()
        (root / name / "run.yaml").write_text(config.format(out=root / name / "runs", data=root / "data"))
        run_dirs[name] = root / name / "runs" / "exact" / "version_0"
    for round_ in range(max(len(plan) for plan in plans.values())):
        procs = {}
        for name, plan in plans.items():
            if round_ < len(plan):
                kill = plan[round_]
                args = ["-c", str(root / name / "run.yaml")] if round_ == 0 else ["--resume", str(run_dirs[name])]
                env = {"KILL_PHASE": kill[0], "KILL_STEP": str(kill[1])} if isinstance(kill, tuple) else {}
                procs[name] = (kill, nectargan("train", *args, site=site, **env))
        for name, (kill, proc) in procs.items():
            _, err = proc.communicate(timeout=TIMEOUT)
            expected = 0 if kill == "finish" else -signal.SIGKILL
            assert proc.returncode == expected, f"{name} round {round_} ({kill}): exit {proc.returncode}\n{err[-3000:]}"
            if isinstance(kill, tuple):
                check_killed(run_dirs[name], kill)
    return run_dirs


def assert_resumed_equals_uninterrupted(runs: dict[str, Path]) -> dict:
    """The killed and resumed run ends as the uninterrupted one: state, metrics, example PNGs; its final state.

    A resumed run re-reads config.yaml, which fills in the schedule's default options (epoch_count: 1) that
    the first run left implicit: the configs are compared as resolved, the rest bit for bit.
    """
    from nectargan_core.config import load_config
    from nectargan_core.plugins import get_plugins

    expected, actual = final_state(runs["uninterrupted"]), final_state(runs["killed"])
    assert actual["global_step"] == 12 and actual["epoch"] == 2
    registry = get_plugins().registry
    configs = [state.pop("config") for state in (expected, actual)]
    assert configs[0]["callbacks"] == configs[1]["callbacks"] == {"killer": {}}
    resolved = [load_config({**config, "callbacks": {}}, (), registry).to_dict() for config in configs]
    assert resolved[0] == resolved[1]
    # Weights and BatchNorm statistics, Adam states, schedules, scalers, plugin state, RNG states, loop counters.
    assert_identical(expected, actual, "checkpoint")
    assert metrics_without_time(runs["killed"]) == metrics_without_time(runs["uninterrupted"])
    for image in ("epoch0001.png", "epoch0002.png"):
        assert (runs["killed"] / "examples" / image).read_bytes() == \
               (runs["uninterrupted"] / "examples" / image).read_bytes(), image
    assert RunDir(runs["killed"]).read_status()["status"] == "finished"
    return actual


# -- pix2pix: a real GAN step (fused Adam, BatchNorm, dropout, validation, example PNGs) ------------
# 12 train pairs of 16x16 in batches of 2 (6 steps an epoch), 2 epochs; a checkpoint every 2 steps.
PIX2PIX_CONFIG = """\
trainer: pix2pix
run: {{output_dir: {out}, name: exact, device: cpu, seed: 5, deterministic: true, threads: 1}}
loop: {{epochs: 2, log_every_steps: 2}}
checkpoint: {{every_steps: 2, keep_last: 2}}
data: {{root: {data}, load_size: 16, crop_size: 16, num_workers: 0, batch_size: 2}}
models:
  generator: {{name: unet, depth: 4, ngf: 8, dropout_layers: 2}}
  discriminator: {{name: patchgan, ndf: 8, n_layers: 2}}
examples: {{every_epochs: 1, count: 2}}
callbacks: [killer]
visualizers: []
"""
#: A SIGKILL between steps, one step after a mid-epoch checkpoint (step 4 of 6 in epoch 0), before any
#: example image is written: the resumed process writes both.
PIX2PIX_KILLS = [("step", 5)]


@pytest.fixture(scope="module")
def pix2pix_runs(tmp_path_factory):
    from nectargan_translate.data_cli import data_group

    root = tmp_path_factory.mktemp("kill_pix2pix")
    site = make_fake_dist(root / "site", "nectargan-killer", "killer_plugin", KILLER)
    made = cli_runner().invoke(data_group, ["synth", str(root / "data"), "--count", "16", "--size", "16"])
    assert made.exit_code == 0, made.output
    plans = {"uninterrupted": ["finish"], "killed": [*PIX2PIX_KILLS, "finish"]}

    def check_killed(run_dir: Path, kill: tuple[str, int]) -> None:  # one step after the mid-epoch checkpoint
        assert RunDir(run_dir).latest_checkpoint().name.endswith(f"-step{kill[1] - 1:08d}.pt")

    return run_side_by_side(root, site, PIX2PIX_CONFIG, plans, check_killed)


@pytest.mark.slow
def test_killed_and_resumed_pix2pix_run_equals_uninterrupted_run(pix2pix_runs):
    assert_resumed_equals_uninterrupted(pix2pix_runs)  # G and D, their Adam states, the schedules, scalers


# -- CycleGAN: two generators, two discriminators, image pools drawing from their own random stream ------
# 12 unpaired train images per domain of 16x16 in batches of 2 (6 steps an epoch), 2 epochs; a checkpoint
# every 2 steps. Pools of 3 images: full after the second step, so later steps swap fakes in and out.
CYCLEGAN_CONFIG = """\
trainer: cyclegan
run: {{output_dir: {out}, name: exact, device: cpu, seed: 5, deterministic: true, threads: 1}}
loop: {{epochs: 2, log_every_steps: 2}}
checkpoint: {{every_steps: 2, keep_last: 2}}
data: {{root: {data}, load_size: 20, crop_size: 16, num_workers: 0, batch_size: 2}}
models:
  generator: {{name: resnet, n_blocks: 2, ngf: 8}}
  discriminator: {{ndf: 8, n_layers: 2}}
pool: {{size: 3}}
examples: {{every_epochs: 1, count: 2}}
callbacks: [killer]
visualizers: []
"""


@pytest.fixture(scope="module")
def cyclegan_runs(tmp_path_factory):
    from nectargan_translate.data_cli import data_group

    root = tmp_path_factory.mktemp("kill_cyclegan")
    site = make_fake_dist(root / "site", "nectargan-killer", "killer_plugin", KILLER)
    made = cli_runner().invoke(data_group, ["synth", str(root / "data"), "--unpaired", "--count", "16", "--size", "16",
                                           "--val", "0.125", "--test", "0.125"])
    assert made.exit_code == 0, made.output
    plans = {"uninterrupted": ["finish"], "killed": [("step", 5), "finish"]}

    def check_killed(run_dir: Path, kill: tuple[str, int]) -> None:  # one step after the mid-epoch checkpoint at step 4
        latest = load_checkpoint(RunDir(run_dir).latest_checkpoint())
        assert latest["global_step"] == 4 and latest["batch_in_epoch"] == 4
        assert len(latest["state"]["fake_A_pool"]["images"]) == 3  # the pools were saved full

    return run_side_by_side(root, site, CYCLEGAN_CONFIG, plans, check_killed)


@pytest.mark.slow
def test_killed_and_resumed_cyclegan_run_equals_uninterrupted_run(cyclegan_runs):
    # G_A, G_B, D_A, D_B, both Adam states, schedules, scalers, the pools' images and random state, RNG, counters.
    actual = assert_resumed_equals_uninterrupted(cyclegan_runs)
    assert not torch.equal(actual["state"]["fake_B_pool"]["images"][0], actual["state"]["fake_A_pool"]["images"][0])
