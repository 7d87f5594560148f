"""The quickstart: its config is valid, and a reduced run of it clearly beats the trivial baseline."""

from __future__ import annotations

import shutil

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
    assert "quickstart.yaml" in (ROOT / "examples" / "quickstart.sh").read_text()


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
