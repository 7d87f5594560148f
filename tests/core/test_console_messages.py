"""What training says about itself: the setup it prints, where it stopped, what resume picked, the loss readout.

Epochs are counted from 1 in every message, as the progress bar counts them.
"""

from __future__ import annotations

import json

import pytest

from nectargan_core import Run, hookimpl
from nectargan_core.builtin.console import ConsoleVisualizer
from nectargan_core.losskeys import readout, repeated_terms
from runs_support import StopAt, toy_config
from support import run_cli

PIX2PIX_LOG = {"D/gan_d": 0.6002, "D/total": 0.6002, "D/gan_d.raw": 1.2004, "D/gan_d.weight": 0.5,
               "G/gan": 0.8704, "G/l1": 32.37, "G/total": 33.24, "G/l1.raw": 0.3237, "G/l1.weight": 100.0}


def test_the_readout_shows_each_total_once_and_the_terms_that_add_to_it():
    assert readout(PIX2PIX_LOG) == "D/total 0.6002  G/total 33.24 (gan 0.8704, l1 32.37)"
    assert repeated_terms(PIX2PIX_LOG) == {"D/gan_d": "D/total"}
    assert repeated_terms([3, None, "D/gan_d", "D/total"]) == {"D/gan_d": "D/total"}  # a log from another tool
    wgan = {"D/gan_d": -0.5, "D/gp": 0.25, "D/total": -0.25, "G/gan": 1.0, "G/l1": 20.0, "G/sobel": 0.0,
            "G/sobel.weight": 0.0, "G/l2": 3.0, "G/vgg": 4.0, "G/total": 28.0}
    assert readout(wgan, max_terms=3) == \
        "D/total -0.25 (gan_d -0.5, gp 0.25)  G/total 28 (gan 1, l1 20, l2 3, +1 more)"  # sobel: weight 0
    assert readout({"loss": 1.5, "noise": 0.25}) == "loss 1.5  noise 0.25"  # no networks, no totals


def console_run(tmp_path, capsys, *plugins, **options):
    """A toy run with the console printing plain lines to the captured stdout; returns (run, output)."""
    config = toy_config(tmp_path / "runs", samples=8, **options)
    config["visualizers"] = {"console": {"bar": "off"}}
    run = Run.create(config, plugins=plugins)
    run.fit()
    return run, capsys.readouterr().out


def test_an_interrupted_run_says_interrupted_and_where_with_epochs_from_one(tmp_path, capsys):
    run, out = console_run(tmp_path, capsys, StopAt(3))  # 2 batches per epoch: step 3 is batch 1 of epoch 2
    lines = out.splitlines()
    assert lines[-1].startswith("interrupted at epoch 2/3, batch 1/2 (step 3) in ")
    assert not [line for line in lines if line.startswith("done")]
    assert "epoch 1/3 done in" in out and "epoch 2/3 done" not in out
    assert run.trainer.position_text() == "epoch 2/3, batch 1/2 (step 3)"
    assert json.loads((run.dir / "status.json").read_text())["status"] == "interrupted"


def test_a_finished_run_says_done_with_its_epoch_count(tmp_path, capsys):
    _, out = console_run(tmp_path, capsys)
    assert out.splitlines()[-1].startswith("done: 3/3 epochs (6 steps) in ")


def test_the_setup_is_printed_at_start_and_written_to_the_run_directory(tmp_path, capsys):
    run, out = console_run(tmp_path, capsys)
    lines = out.splitlines()
    assert lines[0] == f"training 'toy' on cpu: 3 epochs, 2 batches/epoch -> {run.dir}"
    summary = json.loads((run.dir / "summary.json").read_text())
    rows = dict(summary["rows"])
    assert list(rows) == ["trainer", "device", "schedule", "seed"]
    assert rows["trainer"] == "toy" and rows["device"].startswith("cpu (") and rows["seed"] == "0"
    assert rows["schedule"] == ("3 epochs x 2 batches = 6 steps; validation every 1 epoch(s); checkpoint every "
                                "1 epoch(s), best.pt by val/mse (min)")
    width = max(map(len, rows))
    assert lines[1:5] == [f"  {label:<{width}}  {text}" for label, text in rows.items()]


class BarProbe:
    """Records the console's progress bar after the first step of a session."""

    def __init__(self, console: ConsoleVisualizer) -> None:
        self.console, self.seen = console, None

    @hookimpl
    def on_train_batch_end(self, trainer):
        if self.seen is None:
            task = self.console._progress.tasks[0]
            self.seen = (task.description, task.completed, task.total)


def test_the_progress_bar_is_there_right_after_a_mid_epoch_resume(tmp_path):
    config = toy_config(tmp_path / "runs", samples=8)
    config["checkpoint"]["every_steps"] = 1
    first = Run.create(config, plugins=[StopAt(3)])
    first.fit()
    console = ConsoleVisualizer(bar="on")
    probe = BarProbe(console)
    resumed = Run.resume(first.dir, plugins=[probe, console])  # the console's hooks run before the probe's
    assert resumed.trainer.batch_in_epoch == 1
    resumed.fit()
    assert probe.seen == ("epoch 2/3", 2, 2)  # the resumed epoch's bar, at its second batch


@pytest.mark.slow
def test_resuming_a_finished_run_trains_nothing_and_says_what_to_raise(tmp_path):
    run_dir = Run.create({**toy_config(tmp_path / "runs", samples=8, epochs=2), "visualizers": ["console"]}).fit().dir
    status, log = (run_dir / "status.json").read_text(), (run_dir / "metrics.jsonl").read_text()
    result = run_cli("train", "--resume", "latest", "--output-dir", str(tmp_path / "runs"))
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip().splitlines() == [
        f"{run_dir} (the most recently updated run under {tmp_path / 'runs'}): already finished (2/2 epochs, "
        "4 steps); nothing to train. Raise loop.epochs to train longer, e.g. --set loop.epochs=4"]
    assert result.stdout == ""  # no "training", no "resuming": nothing is trained
    assert (run_dir / "status.json").read_text() == status and (run_dir / "metrics.jsonl").read_text() == log


@pytest.mark.slow
def test_resume_latest_name_picks_the_newest_run_of_that_name(tmp_path):
    runs = tmp_path / "runs"
    older = Run.create(toy_config(runs, name="facades", samples=8, epochs=1)).fit().dir
    Run.create(toy_config(runs, name="maps", samples=8, epochs=1)).fit()  # newer, another name
    result = run_cli("train", "--resume", "latest:facades", "--output-dir", str(runs), "--set", "loop.epochs=2")
    assert result.returncode == 0, result.stderr
    assert (f"resuming {older} (the most recently updated run named 'facades' under {runs}) at end of epoch 1/2 "
            "(step 2)") in result.stderr
    assert (older / "checkpoints" / "epoch0002-step00000004.pt").is_file()
    missing = run_cli("train", "--resume", "latest:nothing", "--output-dir", str(runs))
    assert missing.returncode == 1
    assert missing.stderr.strip().splitlines() == [
        f"error: no runs named 'nothing' found under '{runs}'; start one with 'nectargan train'"]


@pytest.mark.slow
def test_a_run_stopped_by_max_steps_says_so_and_resuming_it_asks_for_more_steps(tmp_path):
    config = tmp_path / "toy.json"
    config.write_text(json.dumps(toy_config(tmp_path / "runs", samples=8)))
    done = run_cli("train", "-c", str(config), "--set", "loop.max_steps=3", "--set", "visualizers=[console]")
    assert done.returncode == 0, done.stderr
    run_dir = tmp_path / "runs" / "toy" / "version_0"
    assert done.stdout.splitlines()[-1].startswith("done: loop.max_steps=3 reached at epoch 2/3, batch 1/2 (step 3) in ")
    assert done.stderr.splitlines()[-1] == (
        f"finished: loop.max_steps=3 reached at epoch 2/3, batch 1/2 (step 3); results in {run_dir}")
    again = run_cli("train", "--resume", str(run_dir))
    assert again.returncode == 0, again.stderr
    assert again.stderr.strip().splitlines() == [
        f"{run_dir}: already finished (loop.max_steps=3 reached at step 3); nothing to train. Raise loop.max_steps "
        "to train longer, e.g. --set loop.max_steps=6"]
    assert again.stdout == ""
