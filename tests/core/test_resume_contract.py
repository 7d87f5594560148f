"""The resume contract: visualizers and callbacks are told where a resumed run restarts (``on_resume``)."""

from __future__ import annotations

import re

import pytest

from nectargan_core import Run, hookimpl
from support import killed_then_resumed, make_killer_dist


class Calls:
    """Records the resume-related hooks it receives."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    @hookimpl
    def on_load_checkpoint(self, checkpoint):
        self.calls.append(("on_load_checkpoint", checkpoint["global_step"]))

    @hookimpl
    def on_resume(self, trainer, checkpoint, step):
        self.calls.append(("on_resume", step, checkpoint["global_step"], trainer.global_step, trainer.epochs_done,
                           trainer.batch_in_epoch))

    @hookimpl
    def on_train_start(self, trainer):
        self.calls.append(("on_train_start", trainer.global_step))


def toy(tmp_path, **extra):
    return {"trainer": "toy", "run": {"output_dir": str(tmp_path / "runs"), "device": "cpu"},
            "loop": {"epochs": 2, "max_steps": 3}, "checkpoint": {"every_steps": 1}, "visualizers": [],
            "toy": {"samples": 8, "batch_size": 4}, **extra}


def test_on_resume_tells_where_the_run_restarts_once_and_only_on_resume(tmp_path):
    fresh = Calls()
    run = Run.create(toy(tmp_path), plugins=[fresh]).fit()
    assert fresh.calls == [("on_train_start", 0)]
    resumed = Calls()
    Run.resume(run.dir, overrides=["loop.max_steps=4"], plugins=[resumed]).fit()
    assert resumed.calls == [("on_load_checkpoint", 3), ("on_resume", 3, 3, 3, 1, 1), ("on_train_start", 3)]
    tuned = Calls()
    checkpoint = next((run.dir / "checkpoints").glob("*step00000003.pt"))
    Run.create(toy(tmp_path, run={"output_dir": str(tmp_path / "tuned"), "device": "cpu",
                                  "init_from": str(checkpoint)}), plugins=[tuned]).fit()
    assert tuned.calls == [("on_train_start", 0)]  # fine-tuning is a new run, not a resume


STEP = re.compile(r"^epoch \d+/\d+ \[\d+/\d+\] step (\d+)  (.*?)  [\d.]+ it/s", re.M)


@pytest.mark.slow
def test_console_prints_after_a_sigkill_what_an_uninterrupted_run_prints(tmp_path):
    site = make_killer_dist(tmp_path / "site")
    env = {"PYTHONPATH": str(site)}
    config = tmp_path / "run.yaml"
    config.write_text("trainer: toy\nrun: {device: cpu, deterministic: true, output_dir: runs}\n"
                      "loop: {epochs: 3, log_every_steps: 1}\ncheckpoint: {every_steps: 2}\n"
                      "toy: {samples: 16, batch_size: 4}\nvisualizers: {console: {every_logs: 3}}\n"
                      "callbacks: [sigkill]\n")
    straight = run_cli_train(config, env, tmp_path, "straight")
    killed, resumed = killed_then_resumed(tmp_path / "runs" / "killed" / "version_0",
                                          ["-c", str(config), "--set", "run.name=killed"], 5, env=env, cwd=tmp_path)
    # killed in step 5 before it was logged: nothing printed past the checkpoint, so nothing is superseded
    assert "superseded" not in resumed.stdout
    lines = {name: [(int(step), losses) for step, losses in STEP.findall(out.stdout)]
             for name, out in (("straight", straight), ("killed", killed), ("resumed", resumed))}
    assert [step for step, _ in lines["straight"]] == [3, 6, 9, 12]
    assert lines["killed"] == lines["straight"][:1]
    assert lines["resumed"] == lines["straight"][1:]  # every 3rd record, counted from the run's start


def run_cli_train(config, env, cwd, name):
    from support import run_cli

    done = run_cli("train", "-c", str(config), "--set", f"run.name={name}", env=env, cwd=cwd)
    assert done.returncode == 0, done.stderr
    return done
