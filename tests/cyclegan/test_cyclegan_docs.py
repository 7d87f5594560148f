"""docs/plugins/cyclegan.md documents every config key of the trainer and the dataset; its config validates."""

from __future__ import annotations

import re

import pytest
import yaml

from nectargan_core.config import validate_config
from nectargan_core.plugins import get_plugins
from nectargan_translate.data.unpaired_options import UnpairedDataOptions
from nectargan_cyclegan.options import (CycleGANOptions, LossSection, ModelsSection, OptimSection, PoolSection,
                                        ValidationSection)
from nectargan_translate.data.options import PairedDataOptions
from nectargan_translate.options import ExamplesSection, PrecisionSection
from support import ROOT

PAGE = (ROOT / "docs" / "plugins" / "cyclegan.md").read_text()


@pytest.mark.parametrize("section", [ModelsSection, LossSection, PoolSection, OptimSection, PrecisionSection,
                                     ValidationSection, ExamplesSection])
def test_every_key_is_documented(section):
    for name in section.model_fields:
        assert f"| `{name}` |" in PAGE, (section.__name__, name)


def test_every_section_has_a_heading():
    for name in CycleGANOptions.model_fields:
        assert f"### `{name}`" in PAGE, name


def test_the_data_keys_of_the_unpaired_dataset_are_documented():
    data = PAGE.split("## Data", 1)[1].split("\n## ", 1)[0]
    own = [name for name in UnpairedDataOptions.model_fields if name not in PairedDataOptions.model_fields]
    assert own == ["serial"]
    for name in (*own, "layout", "in_channels", "out_channels", "direction"):  # new, or read by domain
        assert f"`{name}`" in data, name
    assert "translate-data.md#the-data-section" in data  # where the shared keys are


def test_the_page_s_config_is_the_reference_run():
    (body,) = re.findall(r"<!-- file: run.yaml -->\n```yaml\n(.*?)```", PAGE, re.S)
    config = validate_config(yaml.safe_load(body), get_plugins().registry)
    assert config.trainer == "cyclegan" and config.loop.epochs == 200
    assert config.models.generator.name == "resnet_9blocks" and config.pool.size == 50
    assert config.data.options["root"] == "datasets/horse2zebra"
