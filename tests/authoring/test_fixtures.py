"""The pytest fixtures of nectargan_core.testing, used in-process (the scaffold tests use them in a subprocess)."""

from __future__ import annotations

import inspect
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, get_type_hints

import pytest
import yaml
from PIL import Image

from nectargan_core import hookimpl
from nectargan_core.testing import TrainingResult, merge_sections, tiny_preset
from support import ROOT


def loss_plugin(name: str) -> ModuleType:
    """A plugin module made on the fly, registering the loss ``name``."""
    module = ModuleType(f"fixture_plugin_{name}")

    @hookimpl
    def register_losses(register):
        register(name, "torch.nn:L1Loss")

    module.register_losses = register_losses
    return module


def test_plugin_host_registers_extra_plugins_for_one_test_only(nectargan_plugin_host):
    host = nectargan_plugin_host(loss_plugin("fixture_l1"))
    assert host.registry.get("loss", "fixture_l1").provider == "fixture_plugin_fixture_l1"
    assert host.registry.has("trainer", "toy")  # installed plugins too
    assert not nectargan_plugin_host().registry.has("loss", "fixture_l1")


def test_plugin_host_without_installed_plugins(nectargan_plugin_host):
    host = nectargan_plugin_host(loss_plugin("fixture_l1"), installed=False)
    assert {info.name for info in host.loaded()} == {"core", "fixture_plugin_fixture_l1"}


def test_plugin_host_fails_loudly_for_a_broken_plugin(nectargan_plugin_host):
    broken = ModuleType("broken")
    broken.register_lossess = hookimpl(lambda register: None)
    with pytest.raises(AssertionError, match="did you mean 'register_losses'"):
        nectargan_plugin_host(broken)


def test_tiny_paired_dataset_is_aligned_pairs(tiny_paired_dataset):
    files = {split: sorted((tiny_paired_dataset / split).glob("*.png")) for split in ("train", "val")}
    assert [len(files["train"]), len(files["val"])] == [8, 2]
    with Image.open(files["train"][0]) as image:
        assert image.size == (64, 32) and image.mode == "RGB"
        a, b = image.crop((0, 0, 32, 32)), image.crop((32, 0, 64, 32))
        assert a.transpose(Image.Transpose.FLIP_LEFT_RIGHT).tobytes() == b.tobytes()


def test_tiny_config_merges_sections(tiny_config, tmp_path):
    config = tiny_config("toy", loop={"epochs": 2}, toy={"samples": 8}, visualizers=["console"])
    assert config["loop"] == {"epochs": 2, "log_every_steps": 1}
    assert config["toy"] == {"samples": 8} and config["visualizers"] == ["console"]
    assert config["run"]["output_dir"] == str(tmp_path / "runs") and config["run"]["device"] == "cpu"


def test_run_training_returns_the_run_and_its_records(tiny_config, run_training, nectargan_plugin_host):
    result = run_training(tiny_config("toy", toy={"samples": 8}), overrides=["loop.epochs=2"],
                          host=nectargan_plugin_host())
    assert (result.dir / "config.yaml").is_file()
    assert [r["step"] for r in result.metrics if r["kind"] == "train"] == [1, 2, 3, 4]


def test_loading_the_pytest_plugin_does_not_import_torch():
    code = "import sys, nectargan_core.testing; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


# -- the documented signatures and the tiny presets (docs/plugins/testing.md) ----------------------------
TESTING_DOC = ROOT / "docs" / "plugins" / "testing.md"


def documented_signatures() -> dict[str, str]:
    """``fixture -> "(args) -> return"`` from the table of docs/plugins/testing.md."""
    rows = re.findall(r"^\| `(\w+)` \| `\1(\(.*\) -> .*)` \|$", TESTING_DOC.read_text(), re.M)
    return {name: signature.replace("\\|", "|") for name, signature in rows}


def test_the_documented_signatures_are_the_fixtures(nectargan_plugin_host, tiny_config, run_training):
    documented = documented_signatures()
    assert sorted(documented) == ["nectargan_plugin_host", "run_training", "tiny_config"]
    for name, value in [("nectargan_plugin_host", nectargan_plugin_host), ("tiny_config", tiny_config),
                        ("run_training", run_training)]:
        unquoted = re.sub("[\"']", "", documented[name])  # the code's annotations are strings (PEP 563)
        assert re.sub("[\"']", "", str(inspect.signature(value))) == unquoted, name
    assert "| `tiny_paired_dataset` | a `Path` (not a function) |" in TESTING_DOC.read_text()
    assert TrainingResult._fields == ("dir", "metrics")
    assert get_type_hints(TrainingResult) == {"dir": Path, "metrics": list[dict[str, Any]]}


def test_tiny_config_starts_from_the_trainers_tiny_preset(tiny_config, tiny_paired_dataset, run_training, tmp_path):
    config = tiny_config("pix2pix", data={"root": str(tiny_paired_dataset)}, loop={"epochs": 2})
    assert config["models"]["generator"] == {"name": "unet", "depth": 5, "ngf": 8, "max_width": 32}
    assert config["data"]["root"] == str(tiny_paired_dataset) and config["data"]["crop_size"] == 32
    assert config["loop"] == {"epochs": 2, "log_every_steps": 1} and config["visualizers"] == {}
    assert config["run"]["output_dir"] == str(tmp_path / "runs")
    result = run_training(config)
    assert isinstance(result, TrainingResult) and isinstance(result.dir, Path)
    assert [r["step"] for r in result.metrics if r["kind"] == "train"] == [1, 2, 3, 4]  # batches of 4
    saved = yaml.safe_load((result.dir / "config.yaml").read_text())
    assert saved["models"]["discriminator"]["n_layers"] == 2 and saved["data"]["load_size"] == 32
    assert sorted(p.name for p in (result.dir / "examples").iterdir()) == ["epoch0001.png", "epoch0002.png"]


def test_tiny_config_without_a_preset_or_with_another_part(tiny_config):
    assert "models" not in tiny_config("pix2pix", preset=None)
    assert "models" not in tiny_config("toy")  # the toy plugin registers no toy-tiny
    assert tiny_preset("toy") == {}
    mine = tiny_config("pix2pix", data={"name": "my_pairs", "batch_size": 2})
    assert mine["data"] == {"name": "my_pairs", "batch_size": 2}  # another part: the paired options go
    same = tiny_config("pix2pix", data={"name": "paired", "batch_size": 2})
    assert same["data"]["crop_size"] == 32 and same["data"]["batch_size"] == 2
    qualified = tiny_config("pix2pix", data={"name": "nectargan-translate:paired", "batch_size": 2})
    assert qualified["data"]["crop_size"] == 32 and qualified["data"]["name"] == "nectargan-translate:paired"
    reference = tiny_config("pix2pix", preset="pix2pix-reference")
    assert reference["models"]["generator"]["name"] == "unet_256" and reference["loop"]["epochs"] == 1


def test_tiny_config_merges_run_whatever_its_name(tiny_config, tmp_path):
    """run.name is the run's name, not a part: giving it keeps the temporary output folder and the CPU."""
    config = tiny_config("pix2pix", run={"name": "mine"})
    assert config["run"] == {"name": "mine", "output_dir": str(tmp_path / "runs"), "device": "cpu", "seed": 0}
    assert tiny_config("toy", run={"name": "other", "seed": 3})["run"]["output_dir"] == str(tmp_path / "runs")


def test_merge_sections_replaces_a_key_given_a_mapping():
    merged = merge_sections({"models": {"generator": {"name": "unet", "depth": 5}, "discriminator": {"ndf": 8}}},
                            {"models": {"generator": {"name": "mine"}}, "visualizers": ["console"]})
    assert merged == {"models": {"generator": {"name": "mine"}, "discriminator": {"ndf": 8}},
                      "visualizers": ["console"]}
    # only a choice section is replaced by a mapping that names another part
    assert merge_sections({"run": {"name": "a", "seed": 1}, "data": {"name": "paired", "root": "x"}},
                          {"run": {"name": "b"}, "data": {"name": "mine"}}) == \
        {"run": {"name": "b", "seed": 1}, "data": {"name": "mine"}}
    assert merge_sections({"head": {"name": "a", "k": 1}}, {"head": {"name": "b"}}, choices={"head"}) == \
        {"head": {"name": "b"}}
