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

import pytest
import torch

from nectargan_core.checkpoint import load_checkpoint
from nectargan_core.rundir import RunDir
from support import make_fake_dist

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
            if kill == ("write", 6):
                assert list((run_dirs[name] / "checkpoints").glob(".*.tmp-*")), "the kill missed the checkpoint write"
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
@pytest.mark.parametrize("chain", list(CHAINS))
def test_killed_and_resumed_run_equals_uninterrupted_run(runs, chain):
    expected, actual = final_state(runs["uninterrupted"]), final_state(runs[chain])
    assert actual["global_step"] == 12 and actual["epoch"] == 3
    # Weights, optimizer state (momentum buffers, LR), RNG states, loop counters, plugin state.
    assert_identical(expected, actual, "checkpoint")
    assert metrics_without_time(runs[chain]) == metrics_without_time(runs["uninterrupted"])
    assert RunDir(runs[chain]).read_status()["status"] == "finished"
