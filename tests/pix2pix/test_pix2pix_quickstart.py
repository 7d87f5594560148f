"""The quickstart: its config is valid, and a reduced run of it clearly beats the trivial baseline."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from nectargan_core import Run
from nectargan_core.config import load_config, load_file
from nectargan_core.plugins import get_plugins
from nectargan_translate.data.paired import PairedDataset
from nectargan_translate.data.loader import build_dataloader
from nectargan_translate.data_cli import data_group
from nectargan_translate.evaluation import MetricAccumulator
from nectargan_translate.inference import load_generator
from support import ROOT, cli_runner

QUICKSTART = ROOT / "examples" / "quickstart.yaml"


def test_quickstart_config_is_valid_and_uses_the_reference_objective():
    config = load_config(QUICKSTART, registry=get_plugins().registry)
    assert config.trainer == "pix2pix"
    assert config.loss.spec == "basic" and config.loss.gan_mode == "vanilla"
    assert config.data.options["crop_size"] == 64
    script = (ROOT / "examples" / "quickstart.sh").read_text()
    assert "quickstart.yaml" in script
    assert "--resume latest:quickstart --output-dir quickstart/runs" in script  # run again after a stop: resume
    assert '${TORCH_INDEX:+--extra-index-url "$TORCH_INDEX"}' in script  # the CPU build of torch, when asked


def test_reduced_quickstart_beats_output_equals_input(tmp_path):
    data = tmp_path / "data"
    made = cli_runner().invoke(data_group, ["synth", str(data), "--count", "120", "--size", "32", "--seed", "3"])
    assert made.exit_code == 0, made.output
    config = load_file(QUICKSTART)
    config["run"].update(output_dir=str(tmp_path / "runs"), device="cpu")
    config["data"].update(root=str(data), load_size=36, crop_size=32, num_workers=0)
    config["models"]["generator"].update(depth=5, ngf=16)
    config["models"]["discriminator"].update(ndf=16)
    config["loop"].update(epochs=3)
    config["visualizers"] = []
    run = Run.create(config).fit()

    generator = load_generator(run.dir, "best").model
    test_set = PairedDataset(config["data"], "test")
    ours, baseline = MetricAccumulator(["l1", "psnr"]), MetricAccumulator(["l1", "psnr"])
    with torch.no_grad():
        for batch in build_dataloader(test_set):
            ours.update(generator(batch["A"]), batch["B"])
            baseline.update(batch["A"], batch["B"])
    ours, baseline = ours.compute(), baseline.compute()
    assert ours["l1"] < 0.5 * baseline["l1"], (ours, baseline)
    assert ours["psnr"] > baseline["psnr"] + 6.0, (ours, baseline)
    shutil.rmtree(tmp_path / "runs")


@pytest.mark.parametrize("script, name", [("quickstart.sh", "quickstart"),
                                          ("quickstart-cyclegan.sh", "quickstart-cyclegan")])
def test_running_a_quickstart_again_resumes_its_run(tmp_path, script, name):
    """The scripts' train-or-resume step, run as bash runs it (`nectargan` replaced by a script that echoes): no run ->
    train from the example config; a run of that name under quickstart/runs -> resume it."""
    import re
    import subprocess
    import sys

    from nectargan_core import RunDir

    text = (ROOT / "examples" / script).read_text()
    step = re.search(r"^if \"\$venv/bin/python\" -c .*?^fi$", text, re.S | re.M).group(0)
    venv = Path(sys.executable).parent.parent
    fake = tmp_path / "nectargan"
    fake.write_text('#!/bin/sh\necho nectargan "$@"\n')
    fake.chmod(0o755)
    program = f'set -euo pipefail\nvenv="{venv}"\nnectargan="{fake}"\nthreads=1\n{step}\n'

    def run() -> str:
        done = subprocess.run(["bash", "-c", program], cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return done.stdout.splitlines()[-1]

    assert run() == f"nectargan train -c examples/{name}.yaml --set run.threads=1"
    made = RunDir.create(tmp_path / "quickstart" / "runs", name)
    (made.path / "config.yaml").write_text("trainer: pix2pix\n")  # what makes a folder a run
    assert run() == f"nectargan train --resume latest:{name} --output-dir quickstart/runs --set run.threads=1"
    assert 'threads=$("$venv/bin/python" examples/fastest_threads.py)' in text  # measured before that step


def test_the_quickstarts_thread_count_is_measured_here():
    """examples/fastest_threads.py: one thread or one per usable core, whichever ran a quickstart-sized step faster."""
    import os
    import re
    import subprocess
    import sys

    done = subprocess.run([sys.executable, str(ROOT / "examples" / "fastest_threads.py")], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    cores = len(os.sched_getaffinity(0))
    assert int(done.stdout) in {1, cores}
    line = re.fullmatch(r"==> training with (\d+) torch threads?, the fastest here now \(a quickstart-sized step: "
                        r"1 thread (\d+) ms(?:, (\d+) threads (\d+) ms)?\)\n", done.stderr)
    assert line and int(line.group(1)) == int(done.stdout)
    if cores > 1:  # the count printed is the faster of the two timed
        one, many = int(line.group(2)), int(line.group(4))
        assert int(line.group(3)) == cores
        if one != many:  # (equal after rounding to milliseconds: either)
            assert int(done.stdout) == (1 if one < many else cores)
