"""``nectargan test`` of a checkpoint with a generator each way on paired data: BtoA translates B and is scored
against A, and each direction has its own results folder (an outside author's report: BtoA ran G_BA on A and
replaced the AtoB results)."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

import nectargan_core.plugins as plugins
from nectargan_core import Run
from nectargan_translate import run_test
from twogen_trainer import TwoGenPlugin


@pytest.fixture
def twogen_run(tmp_path, make_synth, nectargan_plugin_host, monkeypatch):
    host = nectargan_plugin_host(TwoGenPlugin())
    monkeypatch.setattr(plugins, "_HOST", host)  # what the commands' get_plugins() returns
    data = make_synth(8, 32)
    config = {"trainer": "twogen", "run": {"output_dir": str(tmp_path / "runs"), "device": "cpu"},
              "loop": {"epochs": 1, "val_every_epochs": None}, "visualizers": [],
              "examples": {"every_epochs": None},
              "data": {"name": "paired", "root": str(data), "load_size": 32, "crop_size": 32, "num_workers": 0,
                       "test": {"preprocess": "none"}},
              "models": {"generator": {"name": "unet", "depth": 4, "ngf": 8}, "discriminator": {"ndf": 8}}}
    run = Run.create(config, host=host).fit()
    return run.dir, data


def test_btoa_translates_b_and_is_scored_against_a_in_its_own_folder(twogen_run):
    run_dir, data = twogen_run
    forward = run_test(run_dir, direction="AtoB")
    back = run_test(run_dir, direction="BtoA")
    assert forward.out_dir.name.endswith("-test-AtoB") and back.out_dir.name.endswith("-test-BtoA")
    assert forward.out_dir.is_dir() and back.out_dir.is_dir()  # neither replaced the other
    pair = sorted((data / "test").iterdir())[0]
    with Image.open(pair) as image:
        pixels = np.asarray(image)
    width = pixels.shape[1] // 2
    name = pair.with_suffix(".png").name
    for report, source, goal in ((forward, pixels[:, :width], pixels[:, width:]),
                                 (back, pixels[:, width:], pixels[:, :width])):
        with Image.open(report.out_dir / "inputs" / name) as shown, Image.open(report.out_dir / "targets" / name) \
                as target:
            np.testing.assert_allclose(np.asarray(shown, dtype=int), source, atol=1)
            np.testing.assert_allclose(np.asarray(target, dtype=int), goal, atol=1)
    assert back.generator.direction == "BtoA" and back.generator.tracked == "generator_back"
