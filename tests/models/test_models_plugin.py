"""Registration: names, roles, torch-free loading, and options validated through the core config."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from nectargan_core.config import choice_of
from nectargan_core.plugins import get_plugins
from nectargan_models.options import (
    MultiScalePatchGANOptions,
    PatchGANOptions,
    PixelGANOptions,
    ResNet6Options,
    ResNet9Options,
    ResNetOptions,
    UNet128Options,
    UNet256Options,
    UNetOptions,
)

REGISTERED = {
    "unet_256": ("generator", UNet256Options),
    "unet_128": ("generator", UNet128Options),
    "unet": ("generator", UNetOptions),
    "resnet_9blocks": ("generator", ResNet9Options),
    "resnet_6blocks": ("generator", ResNet6Options),
    "resnet": ("generator", ResNetOptions),
    "patchgan_70": ("discriminator", PatchGANOptions),
    "patchgan": ("discriminator", PatchGANOptions),
    "patchgan_multiscale": ("discriminator", MultiScalePatchGANOptions),
    "pixelgan": ("discriminator", PixelGANOptions),
}


def test_plugin_loads_and_registers_every_model():
    host = get_plugins()
    info = host.get("nectargan-models")
    assert info.status == "loaded", info.error
    assert {c.name for c in info.components} == set(REGISTERED)
    for name, (role, options) in REGISTERED.items():
        component = host.registry.get("model", name)
        assert component.meta["role"] == role and component.options is options and component.description


def test_plugin_module_does_not_import_torch():
    code = "import sys, nectargan_models.plugin; sys.exit('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


@pytest.mark.parametrize("name", sorted(REGISTERED))
def test_factories_take_exactly_their_options(name):
    component = get_plugins().registry.get("model", name)
    defaults = component.options().model_dump(mode="json")
    factory = component.load()
    with torch.device("meta"):
        assert isinstance(factory(**defaults), torch.nn.Module)
        bare = factory()  # a bare name builds with the preset's defaults, not the generic ones
    if name.startswith("unet") or name.startswith("resnet"):
        assert bare.depth == defaults["depth"]
    if name.startswith("resnet"):
        assert len(bare.blocks) == defaults["n_blocks"]


def test_options_are_validated_and_filled_by_the_core_config():
    registry = get_plugins().registry
    Model = choice_of("model")
    choice = Model.model_validate({"name": "unet_128", "norm": "instance"}, context={"registry": registry})
    assert choice.options["depth"] == 7 and choice.options["norm"] == "instance"
    assert choice.options["dropout_layers"] == 2
    with pytest.raises(ValueError, match="model 'patchgan_70': n_layer: unknown key; did you mean 'n_layers'"):
        Model.model_validate({"name": "patchgan_70", "n_layer": 4}, context={"registry": registry})
    with pytest.raises(ValueError, match="dropout_layers: 3 is too many for depth 4"):
        Model.model_validate({"name": "unet_256", "depth": 4}, context={"registry": registry})


def test_docs_list_every_model_and_option():
    docs = (Path(__file__).parents[2] / "docs" / "plugins" / "models.md").read_text(encoding="utf-8")
    for name, (_, options) in REGISTERED.items():
        assert f"| `{name}` |" in docs
        for option in options.model_fields:
            assert f"| `{option}` |" in docs, f"docs/plugins/models.md lacks option {option} of {name}"
