"""benchmarks/e2e.py: its pure parts, the reference wrapper, and one whole --small run on the CPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FAKE_REFERENCE = Path(__file__).resolve().parent / "fake_reference"
sys.path.insert(0, str(ROOT / "benchmarks"))
import e2e  # noqa: E402


def stamped(t: float, text: str) -> str:
    return f"@@{t:.6f} {text}"


def test_reference_lines_give_epoch_ends_start_and_losses_by_step():
    lines = [
        stamped(100.0, "----------------- Options ---------------"),
        "a line the wrapper did not stamp (stderr)",
        stamped(101.0, "The number of training images = 10"),
        stamped(102.5, "-----------------------------------------------"),
        stamped(103.0, "(epoch: 1, iters: 8, time: 0.010, data: 0.001) G_GAN: 0.812 G_L1: 30.125 D_real: 0.700 D_fake: 0.690 "),
        stamped(104.0, "End of epoch 1 / 2 \t Time Taken: 1 sec"),
        stamped(104.0, "learning rate 0.0002000 -> 0.0002000"),
        stamped(105.0, "(epoch: 2, iters: 8, time: 0.010, data: 0.001) G_GAN: 0.900 G_L1: 25.000 D_real: 0.650 D_fake: 0.640 "),
        stamped(105.5, "saving the model at the end of epoch 2, iters 20"),
        stamped(106.0, "End of epoch 2 / 2 \t Time Taken: 1 sec"),
    ]
    parsed = e2e.parse_reference_output(lines, batch=4, images=10)
    assert parsed["ends"] == [104.0, 106.0]
    assert parsed["train_start"] == 102.5  # the last line before the first loss line
    assert parsed["first_log"] == 103.0
    assert parsed["steps"] == 3  # ceil(10 / 4): the last batch is partial
    # iters counts images within the epoch: 8 images at batch 4 is step 2 of the epoch
    assert parsed["curves"]["step"] == [2, 5]
    assert parsed["curves"]["losses"] == {"G_GAN": [0.812, 0.9], "G_L1": [30.125, 25.0], "D_real": [0.7, 0.65],
                                          "D_fake": [0.69, 0.64]}


def test_epoch_figures_first_and_warm_epochs():
    figures = e2e.epoch_figures([10.0, 13.0, 15.0, 18.0], start=4.0, steps=20, batch=2)
    assert figures["epoch_s"] == [6.0, 3.0, 2.0, 3.0]
    assert figures["first_epoch_s"] == 6.0
    assert figures["warm_epoch_s"] == 3.0  # median of the epochs after the first
    assert figures["it_per_s"] == pytest.approx(20 / 3)
    assert figures["img_per_s"] == pytest.approx(40 / 3)
    assert figures["warm_window"] == [10.0, 18.0]  # from the end of the first epoch to the end of the last
    single = e2e.epoch_figures([10.0], start=4.0, steps=20, batch=2)
    assert single["warm_epoch_s"] is None and single["warm_window"] == [None, None]


def test_gpu_samples_are_kept_inside_the_warm_window_only():
    samples = [(9.9, 5.0, 1000.0), (10.0, 80.0, 3000.0), (12.0, 100.0, 3100.0), (14.0, 60.0, 3050.0),
               (14.1, 0.0, 3200.0)]
    assert e2e.samples_in_window(samples, 10.0, 14.0) == samples[1:4]
    assert e2e.samples_in_window(samples, None, 14.0) == []
    assert e2e.samples_in_window(samples, 14.0, 10.0) == []
    figures = e2e.gpu_figures(samples, (10.0, 14.0), idle_mib=500.0)
    assert figures["gpu_busy"] == pytest.approx(0.8)
    assert figures["gpu_samples_warm"] == 3
    assert figures["peak_mib"] == 2700.0  # the whole run's peak, less the idle level
    assert e2e.gpu_figures([], (10.0, 14.0), None)["gpu_busy"] is None


def test_the_sampler_reads_nvidia_smi_lines_with_host_time_stamps(tmp_path, monkeypatch):
    fake = tmp_path / "bin" / "nvidia-smi"  # what `nvidia-smi --query-gpu=... -lms 200` prints, without a GPU
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\nwhile true; do echo '37, 1234'; sleep 0.05; done\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}:{os.environ['PATH']}")
    monkeypatch.setitem(sys.modules, "pynvml", None)  # NVML unavailable: the nvidia-smi fallback
    sampler = e2e.GpuSampler(enabled=True, period=0.05)
    assert sampler.source == "nvidia-smi"
    before = time.time()
    assert sampler.idle_level(0.5) == 1234.0
    samples = sampler.start().stop() or [(before, 37.0, 1234.0)]
    assert all(s[1:] == (37.0, 1234.0) and s[0] >= before for s in samples)
    assert e2e.GpuSampler(enabled=False).idle_level() is None


def test_a_run_past_run_timeout_is_killed_and_counts_as_failed(tmp_path, monkeypatch):
    monkeypatch.setattr(e2e, "RUN_TIMEOUT", 0.5)
    started = time.time()
    proc = e2e.run_process([sys.executable, "-c", "import time; print('started', flush=True); time.sleep(30)"],
                           tmp_path / "run.log", e2e.GpuSampler(enabled=False))
    assert proc["returncode"] == -9 and time.time() - started < 20
    assert proc["samples"] == []


def test_variants_go_to_the_scenarios_of_their_model():
    assert e2e.variant_for(["--preset", "pix2pix-reference", "--set", "precision.amp=off"], "pix2pix") == [
        "--preset", "pix2pix-reference", "--set", "precision.amp=off"]
    assert e2e.variant_for(["--preset", "pix2pix-reference"], "cyclegan") is None
    assert e2e.variant_for(["--set", "precision.amp=bf16"], "cyclegan") == ["--trainer", "cyclegan", "--set",
                                                                            "precision.amp=bf16"]
    assert e2e.parse_scenario("pix2pix-256x16", small=False).images == 960
    assert e2e.parse_scenario("cyclegan-256x1", small=False).load_size == 286


def test_recipe_only_and_no_defaults_choose_the_default_runs():
    extra = {"heuristics": ["--preset", "pix2pix-reference", "--set", "precision.cudnn_benchmark=off"]}
    assert list(e2e.scenario_variants("pix2pix", extra)) == ["reference-recipe", "defaults", "heuristics"]
    assert list(e2e.scenario_variants("pix2pix", extra, recipe_only=True)) == ["reference-recipe", "heuristics"]
    assert list(e2e.scenario_variants("pix2pix", extra, defaults=False)) == ["heuristics"]
    assert e2e.scenario_variants("cyclegan", extra, recipe_only=True) == {
        "reference-recipe": ["--preset", "cyclegan-reference"]}


@pytest.mark.parametrize("specs, message", [
    (["a/b=--set x=1"], "--variant 'a/b=--set x=1': expected NAME=ARGS"),
    (["reference=--x"], "--variant 'reference=--x': expected NAME=ARGS"),
    (["u=--set \"x"], "--variant u: '--set \"x': No closing quotation"),
    (["q=--x", "q=--y"], "--variant q: given more than once"),
    (["n=--set run.name=zzz"], "--variant n: run.name=zzz moves the run where the benchmark does not look"),
    (["n=--set=run.name=zzz"], "--variant n: --set=run.name=zzz moves the run"),
    (["n=--set 'run={name: zzz}'"], "--variant n: run={name: zzz} moves the run"),
    (["n=--set 'run={output_dir: x}'"], "--variant n: run={output_dir: x} moves the run"),
])
def test_variants_that_cannot_be_run_or_read_are_refused_in_one_line(specs, message):
    with pytest.raises(SystemExit) as refused:
        e2e.parse_variants(specs)
    assert str(refused.value).startswith(message) and "\n" not in str(refused.value)
    assert e2e.parse_variants(["ok-1.x=--set 'run.notes=a b=c'"]) == {"ok-1.x": ["--set", "run.notes=a b=c"]}


@pytest.mark.parametrize("args, message", [
    (["--scenarios", ""], "--scenarios '': no scenario given"),
    (["--scenarios", "pix2pix-15x1"], "scenario 'pix2pix-15x1': the size must be a multiple of 4"),
    (["--scenarios", "pix2pix-32x1,pix2pix-32x1"], "--scenarios: pix2pix-32x1 given more than once"),
    (["--epochs", "0"], "--epochs 0: must be at least 1"),
    (["--run-timeout", "0"], "--run-timeout 0.0: must be a number of seconds above 0"),
    (["--run-timeout", "nan"], "--run-timeout nan: must be a number of seconds above 0"),
    (["--workers", "-1"], "--workers -1: must be 0 or more"),
    (["--scenarios", "pix2pix-32x1", "--no-defaults", "--variant", "c=--preset cyclegan-reference"],
     "scenario pix2pix-32x1: nothing to run"),
    (["--json", "/nonexistent-folder/x.json"], "--json /nonexistent-folder/x.json: its folder does not exist"),
])
def test_arguments_that_would_fail_later_are_refused_before_any_run(tmp_path, args, message):
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "e2e.py"), "--small", "--device", "cpu",
                           "--work-dir", str(tmp_path / "work"), *args], capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and proc.stderr.strip().splitlines()[-1].startswith(message), proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "work" / "runs").exists()


def test_the_wrapper_stamps_every_printed_line_of_the_reference(tmp_path):
    data = tmp_path / "data" / "train"
    data.mkdir(parents=True)
    for i in range(6):
        (data / f"{i:05d}.png").write_bytes(b"")
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "e2e_reference.py"), str(FAKE_REFERENCE), "--dataroot",
         str(tmp_path / "data"), "--model", "pix2pix", "--n_epochs", "2", "--n_epochs_decay", "0", "--batch_size", "2",
         "--print_freq", "2", "--display_id", "0", "--no_html", "--gpu_ids", "-1", "--checkpoints_dir",
         str(tmp_path / "ckpt")],
        capture_output=True, text=True, timeout=120, check=True)
    lines = out.stdout.splitlines()
    assert lines and all(line.startswith("@@") for line in lines)
    parsed = e2e.parse_reference_output(lines, batch=2, images=6)
    assert len(parsed["ends"]) == 2 and parsed["ends"][0] < parsed["ends"][1]
    assert parsed["curves"]["step"] == [1, 2, 3, 4, 5, 6]
    assert set(parsed["curves"]["losses"]) == {"G_GAN", "G_L1", "D_real", "D_fake"}


@pytest.mark.slow  # five short trainings and three fake reference runs: 40-100 s on 2 busy cores
def test_small_cpu_run_with_the_fake_reference(tmp_path):
    out = tmp_path / "e2e.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "e2e.py"), "--small", "--device", "cpu", "--reference",
         str(FAKE_REFERENCE), "--json", str(out), "--work-dir", str(tmp_path / "work")],
        capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    results = json.loads(out.read_text())
    assert set(results["scenarios"]) == {"pix2pix-32x1", "pix2pix-32x4", "cyclegan-32x1"}
    assert set(results["scenarios"]["pix2pix-32x1"]["runs"]) == {"reference-recipe", "defaults", "reference"}
    assert set(results["scenarios"]["cyclegan-32x1"]["runs"]) == {"reference-recipe", "reference"}
    for scenario in results["scenarios"].values():
        for name, run in scenario["runs"].items():
            assert len(run["epoch_s"]) == 2 and all(s > 0 for s in run["epoch_s"]), name
            assert run["first_epoch_s"] > 0 and run["warm_epoch_s"] > 0 and run["img_per_s"] > 0
            assert run["start_to_first_epoch_s"] >= run["first_epoch_s"]  # launch comes before the start
            assert run["curves"]["step"] and all(run["curves"]["losses"].values()), name
            if name != "reference":
                assert run["warm_epoch_vs_reference"] > 0 and run["img_per_s_vs_reference"] > 0
                assert 0 < run["start_to_first_step_s"] < run["start_to_first_epoch_s"], name
    assert "| variant | launch to 1st step s | launch to 1st epoch end s | first epoch s | warm epoch s |" in proc.stdout
    assert "every figure depends on the CPU" in proc.stdout


def test_the_parser_reads_the_2025_reference_format_too():
    """Since its DDP rewrite (2a7afba, the commit issue 21 measured), the reference prefixes the rank and
    separates the losses with commas."""
    lines = ["@@100.0 learning rate 0.0002000 -> 0.0002000",
             "@@101.0 [Rank 0] (epoch: 1, iters: 2, time: 0.100, data: 0.010) , G_GAN: 0.738, G_L1: 41.008, "
             "D_real: 0.800, D_fake: 0.843",
             "@@102.5 End of epoch 1 / 2 \t Time Taken: 1 sec",
             "@@103.0 [Rank 0] (epoch: 2, iters: 2, time: 0.100, data: 0.010) , G_GAN: 0.7, G_L1: 40.5, "
             "D_real: 0.8, D_fake: 0.9",
             "@@104.0 End of epoch 2 / 2 \t Time Taken: 1 sec"]
    parsed = e2e.parse_reference_output(lines, batch=1, images=2)
    assert parsed["ends"] == [102.5, 104.0] and parsed["train_start"] == 100.0
    assert parsed["curves"]["step"] == [2, 4]
    assert parsed["curves"]["losses"] == {"G_GAN": [0.738, 0.7], "G_L1": [41.008, 40.5], "D_real": [0.8, 0.8],
                                          "D_fake": [0.843, 0.9]}
