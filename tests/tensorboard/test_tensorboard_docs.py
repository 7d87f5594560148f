"""The plugin's page documents every option with its default, every tag, and config examples that validate."""

from __future__ import annotations

import re

import pytest
import yaml

from nectargan_core.config import load_config
from nectargan_core.plugins import get_plugins
from nectargan_tensorboard.options import TensorBoardOptions
from nectargan_tensorboard.visualizer import CONFIG_TAG, IMAGE_TAG
from support import ROOT

PAGE = (ROOT / "docs" / "plugins" / "tensorboard.md").read_text()


@pytest.mark.parametrize("name", sorted(TensorBoardOptions.model_fields))
def test_every_option_is_documented_with_its_default(name):
    default = TensorBoardOptions.model_fields[name].default
    shown = "null" if default is None else str(default).lower()
    assert f"| `{name}` | `{shown}` |" in PAGE


@pytest.mark.parametrize("tag", ["`<loss key>`", "`lr/<optimizer>`", "`val/<metric>`", "`epoch/<loss key>`",
                                 f"`{IMAGE_TAG}` (image)", f"`{CONFIG_TAG}` (text)", "hparams"])
def test_every_tag_has_a_row(tag):
    assert f"\n| {tag}" in PAGE


def test_yaml_examples_are_valid_configs():
    blocks = re.findall(r"```yaml\n(.*?)```", PAGE, re.S)
    assert len(blocks) == 2
    for block in blocks:
        load_config(yaml.safe_load(block), registry=get_plugins().registry)


def test_how_to_open_it():
    assert "tensorboard --logdir runs" in PAGE
