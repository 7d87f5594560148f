"""The CycleGAN quickstart: its config is valid, and a reduced run of it translates each domain's look."""

from __future__ import annotations

import pytest
import torch

from nectargan_core import Run
from nectargan_core.config import load_config, load_file
from nectargan_core.plugins import get_plugins
from nectargan_translate.data.unpaired import UnpairedDataset
from nectargan_translate.data_cli import data_group
from nectargan_translate.inference import load_generator
from support import ROOT, cli_runner

QUICKSTART = ROOT / "examples" / "quickstart-cyclegan.yaml"


def test_quickstart_config_is_valid_and_the_script_uses_it():
    config = load_config(QUICKSTART, registry=get_plugins().registry)
    assert config.trainer == "cyclegan" and config.loss.gan_mode == "lsgan" and config.pool.size == 50
    assert config.models.generator.name == "resnet_6blocks" and config.data.options["crop_size"] == 64
    script = (ROOT / "examples" / "quickstart-cyclegan.sh").read_text()
    assert "quickstart-cyclegan.yaml" in script and "--unpaired" in script
    assert '"$nectargan" test "$run_dir" --grid' in script  # --direction both, the default
    assert "--resume latest:quickstart-cyclegan --output-dir quickstart/runs" in script  # run again: resume


@pytest.mark.slow  # two short epochs of training
def test_a_reduced_quickstart_gives_each_domain_the_other_s_look(tmp_path):
    """The two domains differ most in brightness: A has a dark background, B a light floor. After two short
    epochs, G_A(A) must already be as bright as B, and G_B(B) as dark as A."""
    data = tmp_path / "data"
    made = cli_runner().invoke(data_group, ["synth", str(data), "--unpaired", "--count", "50", "--size", "32",
                                           "--seed", "3", "--val", "0", "--test", "0.2"])
    assert made.exit_code == 0, made.output
    config = load_file(QUICKSTART)
    config["run"].update(output_dir=str(tmp_path / "runs"), device="cpu", threads=1)
    config["data"].update(root=str(data), load_size=36, crop_size=32, num_workers=0)
    config["loop"].update(epochs=2)
    config["models"]["generator"].update(ngf=8)
    config["examples"].update(every_epochs=None)
    config["visualizers"] = []
    run = Run.create(config).fit()

    test = UnpairedDataset({**config["data"]}, "test")
    real = {domain: torch.stack([item["image"] for item in test.domain(domain)]) for domain in "AB"}
    with torch.no_grad():
        fake_b = load_generator(run.dir, direction="AtoB").model(real["A"])
        fake_a = load_generator(run.dir, direction="BtoA").model(real["B"])
    brightness = {name: float(images.mean()) for name, images in
                  {"A": real["A"], "B": real["B"], "fake_B": fake_b, "fake_A": fake_a}.items()}
    gap = brightness["B"] - brightness["A"]
    assert gap > 0.5, brightness  # the domains are far apart to begin with
    assert abs(brightness["fake_B"] - brightness["B"]) < 0.25 * gap, brightness
    assert abs(brightness["fake_A"] - brightness["A"]) < 0.25 * gap, brightness
