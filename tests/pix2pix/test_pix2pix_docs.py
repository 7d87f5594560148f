"""The trainer's doc page lists every config key of its sections."""

from __future__ import annotations

import pytest

from nectargan_pix2pix.options import Pix2pixOptions
from nectargan_translate.options import ExamplesSection, ModelsSection, OptimSection, \
    PrecisionSection, ValidationSection
from support import ROOT

PAGE = (ROOT / "docs" / "plugins" / "pix2pix.md").read_text()


@pytest.mark.parametrize("section", [ModelsSection, OptimSection, PrecisionSection, ValidationSection,
                                     ExamplesSection])
def test_every_key_is_documented(section):
    for name in section.model_fields:
        assert f"| `{name}` |" in PAGE, (section.__name__, name)


def test_every_section_has_a_heading():
    for name in Pix2pixOptions.model_fields:
        assert f"### `{name}`" in PAGE, name
