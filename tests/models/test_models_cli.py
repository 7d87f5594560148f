"""``nectargan models list`` and ``nectargan models show``, in-process and as a real console script."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from nectargan_core.errors import ConfigError
from nectargan_core.plugins import get_plugins
from nectargan_models.cli import models_group
from support import cli_runner

NECTARGAN = Path(sys.executable).with_name("nectargan")
PRESETS = {"unet_256": 54_413_955, "unet_128": 41_828_995, "patchgan_70": 2_768_705,
           "resnet_9blocks": 11_378_179, "resnet_6blocks": 7_837_699, "pixelgan": 9_024}


def invoke(*args: str):
    result = cli_runner().invoke(models_group, list(args))
    if result.exception is not None and not isinstance(result.exception, (SystemExit, ConfigError)):
        raise result.exception
    return result


def test_list_json_covers_every_registered_model():
    result = invoke("list", "--json")
    assert result.exit_code == 0, result.output
    rows = {row["name"]: row for row in json.loads(result.output)}
    assert sorted(rows) == get_plugins().registry.names("model")
    for name, count in PRESETS.items():
        assert rows[name]["parameters"] == count and rows[name]["error"] is None
        assert rows[name]["provider"] == "models" and rows[name]["distribution"] == "nectargan-models"
    assert rows["unet"]["role"] == "generator" and rows["patchgan"]["role"] == "discriminator"


def test_list_table():
    result = invoke("list")
    assert result.exit_code == 0
    lines = result.output.splitlines()
    assert lines[0].split() == ["name", "role", "provider", "parameters", "description"]
    row = next(line for line in lines if line.startswith("unet_256 "))
    assert row.split()[:4] == ["unet_256", "generator", "models", "54,413,955"]


def test_show_discriminator_geometry_and_overrides():
    result = invoke("show", "patchgan", "--set", "n_layers=4", "--set", "norm=instance",
                    "--input-size", "512", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["receptive_field"] == 142 and data["output_size"] == 30 and data["input_size"] == 512
    assert data["options"]["n_layers"] == {
        "type": "int", "value": 4, "default": 3, "description": data["options"]["n_layers"]["description"],
    }
    assert data["options"]["norm"]["value"] == "instance" and data["options"]["norm"]["default"] == "batch"
    assert data["options"]["norm"]["type"] == "batch|instance|none|spectral"
    assert data["options"]["init_gain"]["type"] == "float|null"


def test_show_text():
    result = invoke("show", "patchgan_70")
    assert result.exit_code == 0
    assert "parameters: 2,768,705" in result.output
    assert "receptive field: 70x70" in result.output
    assert "input 256x256 -> output 30x30" in result.output
    assert any(line.split()[:4] == ["norm", "batch|instance|none|spectral", "batch", "batch"]
               for line in result.output.splitlines())


def test_show_generator_with_an_invalid_input_size():
    data = json.loads(invoke("show", "unet_256", "--input-size", "250", "--json").output)
    assert data["parameters"] == 54_413_955 and "receptive_field" not in data
    assert data["input_error"] == "input 250x250 is not a multiple of 2**8=256; nearest valid sizes: 256"
    data = json.loads(invoke("show", "unet", "--set", "depth=5", "--set", "dropout_layers=null", "--json").output)
    assert data["output_size"] == 256 and data["options"]["dropout_layers"]["value"] is None


@pytest.mark.parametrize(
    "override, message",
    [
        ("nrom=instance", r"^model 'unet_256': nrom: unknown key; did you mean 'norm'\?"),
        ("depth=deep", r"^model 'unet_256': depth: must be an integer \(got \"deep\"\)"),
        ("norm=group", r"^model 'unet_256': norm: Input should be 'batch', 'instance' or 'none'"),
        ("depth", r"^--set 'depth': expected option=value"),
    ],
)
def test_bad_options_are_one_line_config_errors(override, message):
    result = invoke("show", "unet_256", "--set", override)
    assert isinstance(result.exception, ConfigError)
    assert "\n" not in str(result.exception)
    assert re.search(message, str(result.exception))


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(NECTARGAN), *args], capture_output=True, text=True, timeout=120)


def test_console_script():
    assert NECTARGAN.exists(), f"{NECTARGAN} missing: install nectargan-core into this environment"
    done = run_cli("models", "show", "patchgan_70", "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert (data["parameters"], data["receptive_field"], data["output_size"]) == (2_768_705, 70, 30)

    done = run_cli("models", "show", "unet_128", "--set", "ngf=0")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == [
        "error: model 'unet_128': ngf: Input should be greater than or equal to 1 (got 0)"
    ]
