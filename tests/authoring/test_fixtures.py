"""The pytest fixtures of nectargan_core.testing, used in-process (the scaffold tests use them in a subprocess)."""

from __future__ import annotations

import subprocess
import sys
from types import ModuleType

import pytest
from PIL import Image

from nectargan_core import hookimpl


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
