"""The command line as users run it: real subprocesses of the installed console script."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from support import run_cli

NO_TORCH_PROBE = """
import atexit, sys
atexit.register(lambda: sys.stderr.write("TORCH-IMPORTED\\n" if "torch" in sys.modules else "TORCH-FREE\\n"))
from nectargan_core.cli.main import main
sys.argv = ["nectargan", *sys.argv[1:]]
main()
"""


@pytest.mark.parametrize("args", [["--help"], ["plugins", "list"], ["plugins", "list", "--json", "--all"],
                                  ["config", "--help"], ["train", "--help"], ["--version"]])
def test_help_and_listing_do_not_import_torch(args):
    result = subprocess.run([sys.executable, "-c", NO_TORCH_PROBE, *args], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip().splitlines()[-1] == "TORCH-FREE"


def test_version():
    result = run_cli("--version")
    assert result.returncode == 0 and result.stdout.strip() == "nectargan, version 0.1.0"


def test_every_command_has_help_with_examples():
    for args in (["plugins", "list"], ["plugins", "show"], ["config", "show"], ["config", "validate"],
                 ["config", "schema"], ["config", "init"], ["train"], ["runs"], ["plot"], ["report"]):
        result = run_cli(*args, "--help")
        assert result.returncode == 0
        assert "Example" in result.stdout, args


def write_config(tmp_path: Path, **loop) -> Path:
    loop = {"epochs": 2, "log_every_steps": 1, **loop}
    path = tmp_path / "toy.yaml"
    lines = ["trainer: toy", "run:", f"  output_dir: {tmp_path / 'runs'}", "  name: cli", "  device: cpu",
             "loop:", *[f"  {k}: {v}" for k, v in loop.items()], "toy:", "  samples: 8", "  batch_size: 4"]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_train_two_epochs_then_resume(tmp_path):
    config = write_config(tmp_path)
    result = run_cli("train", "-c", str(config))
    assert result.returncode == 0, result.stderr
    run_dir = tmp_path / "runs" / "cli" / "version_0"
    assert f"run directory: {run_dir}" in result.stderr
    assert "epoch 2/2 done in" in result.stdout  # console visualizer, plain lines (not a terminal)
    assert (run_dir / "config.yaml").is_file()
    assert json.loads((run_dir / "status.json").read_text())["status"] == "finished"
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records if r["kind"] == "train"] == [1, 2, 3, 4]
    assert (run_dir / "checkpoints" / "epoch0002-step00000004.pt").is_file()

    resumed = run_cli("train", "--resume", str(run_dir), "--set", "loop.epochs=3")
    assert resumed.returncode == 0, resumed.stderr
    assert f"resuming {run_dir} at end of epoch 2/3 (step 4)" in resumed.stderr
    assert (run_dir / "checkpoints" / "epoch0003-step00000006.pt").is_file()
    assert "epochs: 3" in (run_dir / "config.yaml").read_text()

    latest = run_cli("train", "--resume", "latest", "--output-dir", str(tmp_path / "runs"),
                     "--set", "loop.epochs=4")
    assert latest.returncode == 0, latest.stderr
    assert (run_dir / "checkpoints" / "epoch0004-step00000008.pt").is_file()


@pytest.mark.parametrize("args,message,code", [
    (["train", "-c", "missing.yaml"], "error: missing.yaml: config file not found", 2),
    (["train", "--set", "loop.epochs=0"], "error: --set loop.epochs=0: loop.epochs: Input should be greater than 0 (got 0)", 2),
    (["train"], "error: trainer: no trainer chosen; set 'trainer' in the config or use --trainer (installed: ", 2),
    (["train", "--trainer", "toyy"], "error: defaults: trainer: unknown trainer 'toyy' (did you mean 'toy'?); available: ", 2),
    (["train", "--resume", "nowhere"], "error: nowhere: run directory not found", 1),
    (["train", "--checkpoint", "x.pt"], "error: --checkpoint needs --resume RUN_DIR", 2),
    (["train", "--trainer", "toy", "--set", "run.device=cuda:7"],
     "error: run.device: 'cuda:7' requested but CUDA is not available; use run.device=cpu", 1),
])
def test_user_mistakes_give_one_line_and_nonzero_exit(args, message, code, tmp_path):
    result = run_cli(*args, cwd=tmp_path)
    assert result.returncode == code, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    if message.endswith(": "):  # a list of installed trainers follows; it depends on what is installed
        assert last.startswith(message) and "toy" in last[len(message):].replace(")", "").split(", ")
    else:
        assert last == message
    assert "Traceback" not in result.stderr


def test_resume_falls_back_to_previous_good_checkpoint(tmp_path):
    config = write_config(tmp_path)
    assert run_cli("train", "-c", str(config)).returncode == 0
    run_dir = tmp_path / "runs" / "cli" / "version_0"
    newest = run_dir / "checkpoints" / "epoch0002-step00000004.pt"
    newest.write_bytes(newest.read_bytes()[:100])
    result = run_cli("train", "--resume", str(run_dir), "--set", "loop.epochs=3")
    assert result.returncode == 0, result.stderr
    assert f"warning: skipping bad checkpoint: {newest}: truncated or corrupt checkpoint" in result.stderr
    assert f"resuming {run_dir} at end of epoch 1/3 (step 2)" in result.stderr
    # the records of steps 3-4 were dropped with the bad checkpoint: the lines printed for them are superseded
    assert ("resuming 'toy' at end of epoch 1/3 (step 2): lines printed before the stop for later steps are "
            "superseded\n") in result.stdout


@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signal_stops_gracefully_with_a_checkpoint(tmp_path, sig, code):
    config = write_config(tmp_path, epochs=1000)
    env = {k: v for k, v in os.environ.items() if not k.startswith("NECTARGAN_")}
    exe = Path(sys.executable).with_name("nectargan")
    proc = subprocess.Popen([str(exe), "train", "-c", str(config), "--set", "toy.step_sleep=0.02"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    metrics = tmp_path / "runs" / "cli" / "version_0" / "metrics.jsonl"
    deadline = time.time() + 60
    while time.time() < deadline and (not metrics.exists() or metrics.stat().st_size < 200):
        time.sleep(0.05)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    run_dir = metrics.parent
    status = json.loads((run_dir / "status.json").read_text())
    assert status["status"] == "interrupted"
    latest = sorted((run_dir / "checkpoints").glob("epoch*.pt"))[-1]
    assert latest.name.endswith(f"step{status['step']:08d}.pt")
    assert err.strip().splitlines()[-1] == (f"interrupted: checkpoint saved as {latest}; resume with: nectargan "
                                            f"train --resume {run_dir}")
    resumed = run_cli("train", "--resume", str(run_dir), "--set", f"loop.max_steps={status['step'] + 2}")
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads((run_dir / "status.json").read_text())["step"] == status["step"] + 2
    # The stop saved where it was: one "resuming" line, no note about superseded lines (that is for a kill).
    said = [line for line in resumed.stderr.splitlines() + resumed.stdout.splitlines() if "resuming" in line]
    assert len(said) == 1 and said[0].startswith(f"resuming {run_dir} at ") and "superseded" not in said[0], said


WORKERS_SCRIPT = """
import sys, time
import torch
from torch.utils.data import DataLoader, TensorDataset
from nectargan_core.signals import graceful_stop, leave_stopping_to_main

class Trainer:
    stop = None
    def request_stop(self, reason, interrupted=False):
        self.stop = reason

trainer = Trainer()
# as the trainer does with its train loader: the workers leave stopping to this process
data = leave_stopping_to_main(DataLoader(TensorDataset(torch.arange(10_000.0)), batch_size=1, num_workers=2))
with graceful_stop(trainer) as received:
    for i, _ in enumerate(data):  # the two workers are forked with the handler installed
        if i == 2:
            print("ready", flush=True)
        if trainer.stop:
            break
        time.sleep(0.01)
print("stopped:", trainer.stop, received, flush=True)
"""


def test_one_ctrl_c_in_a_terminal_prints_one_message_with_dataloader_workers():
    # A terminal's Ctrl-C signals the whole foreground process group: the trainer and its DataLoader workers.
    proc = subprocess.Popen([sys.executable, "-c", WORKERS_SCRIPT], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    assert proc.stdout.readline().strip() == "ready"
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert out.strip() == "stopped: SIGINT ['SIGINT']"
    assert err.count("SIGINT received") == 1, err


def test_second_sigint_stops_at_once_without_damage(tmp_path):
    from nectargan_core.checkpoint import load_checkpoint

    config = write_config(tmp_path, epochs=1000)
    env = {k: v for k, v in os.environ.items() if not k.startswith("NECTARGAN_")}
    exe = Path(sys.executable).with_name("nectargan")
    # every step sleeps 3 s, then writes a checkpoint, so the second signal lands mid-step or mid-write
    proc = subprocess.Popen([str(exe), "train", "-c", str(config), "--set", "toy.step_sleep=3.0", "--set", "toy.samples=64",
                             "--set", "checkpoint.every_steps=1"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    run_dir = tmp_path / "runs" / "cli" / "version_0"
    deadline = time.time() + 120
    lines: list[str] = []
    readers = [threading.Thread(target=lambda: lines.extend(iter(proc.stderr.readline, "")), daemon=True),
               threading.Thread(target=proc.stdout.read, daemon=True)]
    for reader in readers:
        reader.start()
    def checkpoints():
        return set((run_dir / "checkpoints").glob("epoch*.pt"))

    while time.time() < deadline and not checkpoints():
        time.sleep(0.02)
    # The first signal goes just after a checkpoint appears, as a step begins: the graceful stop then has most
    # of a 3 s step still to do, time enough for the second signal even on a loaded machine (CI runs two test
    # jobs on two cores; with 0.3 s and then 1 s steps the graceful stop sometimes finished first).
    first = checkpoints()
    while time.time() < deadline and checkpoints() == first:
        time.sleep(0.01)
    # The file appears before its write ends (sidecar, pruning), and a stop asked for then stops at once after
    # it: wait until the next step has begun.
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    # Two signals that arrive before Python runs its handler are one: send the second once the first is heard.
    while time.time() < deadline and not any("SIGINT received" in line for line in lines):
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    started = time.time()
    proc.wait(timeout=30)
    for reader in readers:
        reader.join(10)
    err = "".join(lines)
    assert time.time() - started < 10  # at once: the step in progress had seconds left
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert last.startswith("stopped at once after epoch 1/1000, batch "), err
    assert "; the step in progress was not saved; the last checkpoint is " in last and \
        last.endswith(f"; resume with: nectargan train --resume {run_dir}"), err
    assert json.loads((run_dir / "status.json").read_text())["status"] == "interrupted"
    files = sorted((run_dir / "checkpoints").iterdir())
    assert not [p for p in files if ".tmp-" in p.name]
    for checkpoint in (p for p in files if p.suffix == ".pt"):
        load_checkpoint(checkpoint)  # verified against its size and checksum


@pytest.mark.parametrize("args, line", [
    (["data", "synth", "out", "--size", "15"],
     "error: Invalid value for '--size': 15 is less than 16 (see: nectargan data synth --help)"),
    (["train", "--bogus"], "error: No such option '--bogus' (see: nectargan train --help)"),
    (["nosuch"], "error: No such command 'nosuch' (see: nectargan --help)"),
    (["data", "synth"], "error: Missing argument 'OUT_DIR' (see: nectargan data synth --help)"),
])
def test_a_usage_error_is_one_line_naming_the_help_to_read(tmp_path, args, line):
    """click's own block is four lines (Usage, Try, a blank line, Error) and not prefixed `error:`."""
    result = run_cli(*args, cwd=tmp_path)
    assert result.returncode == 2 and result.stderr == line + "\n" and result.stdout == "", result.stderr


@pytest.mark.parametrize("device, message", [
    ("cuda:99999999999999999999", "error: --set run.device=cuda:99999999999999999999: run.device: must be auto, cpu, cuda, cuda:N (N from 0 to 127) or "
                                  "mps"),
    pytest.param("cuda", "error: run.device: 'cuda' requested but CUDA is not available; use run.device=cpu",
                 marks=pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="this machine has CUDA")),
])
def test_a_device_that_cannot_be_used_is_one_line_before_a_run_directory_exists(tmp_path, device, message):
    """cuda:99999999999999999999 validated, then train died in torch.device with a traceback; an unavailable
    device left a run directory that `nectargan runs` listed as unknown."""
    result = run_cli("train", "--trainer", "toy", "--set", f"run.device={device}", "--set", "run.output_dir=runs",
                     cwd=tmp_path)
    assert result.returncode in (1, 2) and result.stderr.strip().splitlines() == [message], result.stderr
    assert not (tmp_path / "runs").exists()
