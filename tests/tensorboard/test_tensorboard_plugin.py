"""Registration: the plugin loads cheaply, lists its visualizer, and validates its options."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from nectargan_core.config import load_config
from nectargan_core.errors import ConfigError
from nectargan_core.plugins import get_plugins
from nectargan_tensorboard.options import TensorBoardOptions


def test_plugins_list_shows_the_visualizer(cli):
    listed = cli("plugins", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    plugin = next(p for p in json.loads(listed.stdout) if p["name"] == "tensorboard")
    assert plugin["status"] == "loaded", plugin["error"]
    assert plugin["distribution"] == "nectargan-tensorboard"
    assert plugin["module"] == "nectargan_tensorboard.plugin"
    assert plugin["components"] == {"visualizer": ["tensorboard"]}


def test_plugin_module_imports_neither_torch_nor_tensorboard():
    code = ("import sys, nectargan_tensorboard.plugin; "
            "sys.exit(' '.join(m for m in ('torch', 'tensorboard', 'PIL') if m in sys.modules) or None)")
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr


def test_options_are_filled_with_their_defaults():
    config = load_config({"visualizers": ["tensorboard"]}, registry=get_plugins().registry)
    assert config.visualizers["tensorboard"] == TensorBoardOptions().model_dump()
    assert TensorBoardOptions().log_dir is None  # the run directory's tensorboard/ folder


@pytest.mark.parametrize("options,message", [
    ({"log_dir": "tb/{run}"}, "log_dir: unknown placeholder {run}; use {name}, {version}"),
    ({"log_dir": "tb/{"}, "log_dir: Single '{' encountered in format string"),
    ({"flush_secs": 0}, "flush_secs: Input should be greater than 0"),
    ({"images_every_epochs": 0}, "images_every_epochs: Input should be greater than 0"),
    ({"detail": True}, "detail: unknown key; did you mean 'details'"),
])
def test_bad_options_name_the_key(options, message):
    with pytest.raises(ConfigError) as info:
        load_config({"visualizers": {"tensorboard": options}}, registry=get_plugins().registry)
    assert f"visualizers: visualizer 'tensorboard': {message}" in str(info.value)
