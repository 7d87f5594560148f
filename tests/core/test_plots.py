"""``nectargan plot`` and the curves it draws from the metrics log."""

from __future__ import annotations

import json
import math

import pytest

from nectargan_core.reporting.history import History, moving_average, network_of
from nectargan_core.rundir import RunDir
from runs_support import GanLosses, GanTotals, make_run, png_size
from support import run_cli

PANEL_WIDTH = 480  # pixels per subplot column (plots.PANEL_SIZE at 100 dpi)


@pytest.fixture(scope="module")
def gan_run(tmp_path_factory):
    """A finished toy run whose losses look like a GAN's (G/..., D/..., dotted detail keys)."""
    return make_run(tmp_path_factory.mktemp("plots") / "runs", GanLosses(), name="gan")


def test_plot_writes_one_figure_per_network_then_validation_and_learning_rates(gan_run):
    result = run_cli("plot", str(gan_run))
    assert result.returncode == 0, result.stderr
    names = ["losses-G", "losses-D", "validation", "learning-rates"]
    assert result.stdout.splitlines() == [f"wrote {gan_run / 'plots' / name}.png" for name in names]
    assert sorted(p.name for p in (gan_run / "plots").iterdir()) == sorted(f"{n}.png" for n in names)
    sizes = {name: png_size((gan_run / "plots" / f"{name}.png").read_bytes()) for name in names}
    assert sizes["losses-G"][0] == 2 * PANEL_WIDTH  # G/gan, G/l1; the detail key G/l1.raw is left out
    assert sizes["losses-D"][0] == 2 * PANEL_WIDTH  # D/real, D/fake; D/gan_d.weight is left out
    assert sizes["validation"][0] == PANEL_WIDTH and sizes["learning-rates"][0] == PANEL_WIDTH
    assert all((gan_run / "plots" / f"{name}.png").stat().st_size > 5000 for name in names)


def test_details_and_output_folder_and_smoothing_options(gan_run, tmp_path):
    out = tmp_path / "figures"
    result = run_cli("plot", str(gan_run), "-o", str(out), "--details", "--smooth", "1")
    assert result.returncode == 0, result.stderr
    assert len(result.stdout.splitlines()) == 4
    assert png_size((out / "losses-G.png").read_bytes())[0] == 3 * PANEL_WIDTH
    assert png_size((out / "losses-D.png").read_bytes())[0] == 3 * PANEL_WIDTH


def test_a_total_that_repeats_its_only_term_gets_one_panel(tmp_path):
    run_dir = make_run(tmp_path / "runs", GanTotals(), name="totals", epochs=1)
    history = History.read(RunDir(run_dir).metrics_file)
    assert history.repeated() == {"D/gan_d": "D/total"}
    result = run_cli("plot", str(run_dir), "--details")
    assert result.returncode == 0, result.stderr
    assert png_size((run_dir / "plots" / "losses-D.png").read_bytes())[0] == 2 * PANEL_WIDTH  # D/total, .weight
    assert png_size((run_dir / "plots" / "losses-G.png").read_bytes())[0] == 3 * PANEL_WIDTH  # gan, l1, total


def test_curves_are_indexed_by_fractional_epoch(gan_run):
    history = History.read(RunDir(gan_run).metrics_file)
    losses = history.losses()
    assert {network: list(curves) for network, curves in losses.items()} == {
        "G": ["G/gan", "G/l1"], "D": ["D/real", "D/fake"]}
    assert losses["G"]["G/gan"].x == [step / 4 for step in range(1, 13)]  # 4 steps per epoch, a log per step
    assert "G/l1.raw" in history.losses(details=True)["G"]
    validation = history.validation()
    assert list(validation) == ["mse"] and validation["mse"].x == [1.0, 2.0, 3.0]
    assert list(history.learning_rates()) == ["optimizer"]


def test_mid_epoch_validation_is_placed_between_train_records(tmp_path):
    log = tmp_path / "metrics.jsonl"
    records = [
        {"kind": "train", "epoch": 0, "step": 10, "epoch_progress": 0.5, "steps": 10, "losses": {"loss": "nan"}},
        {"kind": "train", "epoch": 0, "step": 20, "epoch_progress": 1.0, "steps": 10, "losses": {"loss": 1}},
        {"kind": "val", "epoch": 0, "step": 15, "metrics": {"psnr": "inf"}},
        {"kind": "val", "epoch": 0, "step": 20, "metrics": {"psnr": 20.0}},
    ]
    log.write_text("".join(json.dumps(r) + "\n" for r in records))
    history = History.read(log)
    assert history.validation()["psnr"].x == [0.75, 1.0]
    assert math.isinf(history.validation()["psnr"].y[0])
    assert math.isnan(history.losses()[""]["loss"].y[0])  # NaN is logged as the string "nan"
    assert history.best("val/psnr", "max") == 20.0 and history.best("psnr", "min") == 20.0


def test_moving_average_skips_values_that_are_not_finite():
    assert moving_average([1.0, math.nan, 3.0, 5.0], 2) == [1.0, 1.0, 2.0, 4.0]
    assert moving_average([2.0, 4.0], 1) == [2.0, 4.0]
    assert network_of("G/gan") == "G" and network_of("loss") == ""


@pytest.mark.parametrize("setup,message", [
    (lambda path: None, "run directory not found"),
    (lambda path: path.mkdir(), "not a NectarGAN run directory (no config.yaml)"),
    (lambda path: (path.mkdir(), (path / "config.yaml").write_text("trainer: toy\n")),
     "no metrics yet; plot again after the first logging interval"),
])
def test_plot_errors_are_one_line(tmp_path, setup, message):
    target = tmp_path / "run"
    setup(target)
    result = run_cli("plot", str(target))
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [f"error: {target}: {message}"]


def test_an_unwritable_output_folder_is_one_line(gan_run, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    result = run_cli("plot", str(gan_run), "-o", str(blocker / "plots"))
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"error: {blocker / 'plots'}: cannot write plots there (Not a directory); choose a folder with -o"]
