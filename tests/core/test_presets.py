"""Presets: named configs that plugins register (register_presets), used by config init/show and train."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
import yaml

from nectargan_core.config import load_config, load_file
from nectargan_core.errors import ConfigError, PluginError
from nectargan_core.plugins import get_plugins
from nectargan_core.presets import preset_data
from nectargan_core.registry import Component, Registry


@dataclass
class Result:
    code: int
    out: str
    err: str


@pytest.fixture
def nectargan(tmp_path, monkeypatch, capsys):
    """``nectargan(*args)`` in this process, in ``tmp_path``: exit code, stdout, stderr."""
    from nectargan_core.cli.main import main

    monkeypatch.chdir(tmp_path)

    def run(*args: str) -> Result:
        capsys.readouterr()
        try:
            main(list(args))
            code = 0
        except SystemExit as exit:
            code = exit.code
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return run


def test_a_plugins_preset_is_listed_and_read(nectargan):
    listed = nectargan("plugins", "list", "--json")
    toy = next(entry for entry in json.loads(listed.out) if entry["name"] == "toy")
    assert "register_presets" in toy["hooks"] and toy["components"]["preset"] == ["toy-quick"]


def test_config_init_writes_the_preset_with_every_key(nectargan, tmp_path):
    result = nectargan("config", "init", "--preset", "toy-quick", "-o", "quick.yaml")
    assert result.code == 0, result.err
    text = (tmp_path / "quick.yaml").read_text()
    assert text.startswith("# NectarGAN run config: preset 'toy-quick' of plugin 'toy' (nectargan-toy)\n"
                           "# Three short epochs of the toy trainer\n")
    data = yaml.safe_load(text)
    assert data["trainer"] == "toy" and data["loop"]["epochs"] == 3 and data["toy"]["lr"] == 0.1
    assert data["toy"]["batch_size"] == 4 and data["loop"]["log_every_steps"] == 50  # defaults where it sets none
    assert "  epochs: 3  # Number of epochs to train" in text  # commented like the plain starter file
    assert nectargan("config", "validate", "quick.yaml").code == 0
    registry = get_plugins().registry
    written = load_config(load_file(tmp_path / "quick.yaml"), (), registry).to_dict()
    assert written == load_config(preset_data(registry, "toy-quick"), (), registry).to_dict()


def test_config_show_and_train_take_a_preset(nectargan, tmp_path):
    shown = nectargan("config", "show", "--preset", "toy-quick", "--set", "loop.epochs=1", "--json")
    assert shown.code == 0, shown.err
    config = json.loads(shown.out)
    assert config["trainer"] == "toy" and config["loop"]["epochs"] == 1 and config["toy"]["samples"] == 8
    trained = nectargan("train", "--preset", "toy-quick", "--set", "run.device=cpu", "--set", "visualizers=[]")
    assert trained.code == 0, trained.err
    assert "finished: 3/3 epochs, 6 steps" in trained.err  # 8 samples, batch 4, 3 epochs


@pytest.mark.parametrize("args,error", [
    (["config", "init", "--preset", "toy-quik"],
     "error: --preset: unknown preset 'toy-quik' (did you mean 'toy-quick'?); available: "),
    (["config", "init", "--preset", "toy-quick", "--trainer", "pix2pix"],
     "error: --trainer pix2pix: preset 'toy-quick' is a config for trainer 'toy'"),
    (["config", "show", "--preset", "toy-quick", "-c", "run.yaml"],
     "error: -c/--config and --preset each give a whole config: use one (to edit a preset, write it to a file "
     "with nectargan config init --preset NAME -o FILE)"),
    (["train", "--resume", "runs/run/version_0", "--preset", "toy-quick"],
     "error: --resume uses the run's own config.yaml; drop -c/--config and --preset (use --set to change values)"),
])
def test_preset_mistakes_are_one_line_with_exit_2(nectargan, args, error):
    result = nectargan(*args)
    assert result.code == 2
    assert len(result.err.strip().splitlines()) == 1 and result.err.startswith(error), result.err


def test_a_malformed_preset_is_the_plugins_fault_in_one_line():
    registry = Registry()
    registry.add(Component("preset", "broken", {"loop": {"epochs": 3}}, "bad", distribution="nectargan-bad"))
    with pytest.raises(PluginError, match=r"^preset 'broken' from plugin 'bad' \(nectargan-bad\) is not a config "
                                          "mapping that names its trainer"):
        preset_data(registry, "broken")
    with pytest.raises(ConfigError, match="unknown preset 'nope'"):
        preset_data(registry, "nope")


def test_a_preset_is_copied_so_callers_cannot_change_it():
    registry = get_plugins().registry
    first = preset_data(registry, "toy-quick")
    first["loop"]["epochs"] = 99
    assert preset_data(registry, "toy-quick")["loop"]["epochs"] == 3
