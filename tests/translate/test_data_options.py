"""The data options model, its registration as the ``paired`` dataset, and a torch-free plugin module."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import BaseModel, Field, ValidationError

from nectargan_core.config import choice_of, describe_errors
from nectargan_core.plugins import get_plugins
from nectargan_translate.data import PairedDataOptions
from nectargan_translate.data.options import AUGMENTATIONS, HFlip, ValSplitOptions
from data_helpers import aligned_dataset


def errors(**options) -> list[str]:
    with pytest.raises(ValidationError) as info:
        PairedDataOptions(**options)
    return describe_errors(info.value, PairedDataOptions)


def test_defaults_match_the_reference():
    options = PairedDataOptions()
    assert (options.load_size, options.crop_size, options.direction) == (286, 256, "AtoB")
    assert options.augment == [HFlip(p=0.5)] and options.batch_size == 1
    assert (options.in_channels, options.out_channels, options.layout) == (3, 3, "auto")
    assert options.folder("train") == "train" and options.folder("val") == "val" and options.folder("test") == "test"
    partial = PairedDataOptions(val={"batch_size": 4}, test={"max_images": 2})
    assert (partial.val.folder, partial.val.batch_size, partial.test.folder) == ("val", 4, "test")


def test_augmentations_by_name_or_with_options():
    options = PairedDataOptions(augment=["vflip", {"name": "jpeg", "quality": [20, 40], "p": 1}])
    assert [a.name for a in options.augment] == ["vflip", "jpeg"]
    assert options.augment[1].quality == (20, 40)
    dumped = options.model_dump(mode="json")["augment"]
    assert PairedDataOptions(augment=dumped) == options
    assert {a.model_fields["name"].default for a in AUGMENTATIONS} == {
        "hflip", "vflip", "rot90", "affine", "elastic", "color_jitter", "gaussian_noise", "blur", "gamma",
        "grayscale", "jpeg"}
    assert {a.model_fields["name"].default for a in AUGMENTATIONS if a.paired} == {
        "hflip", "vflip", "rot90", "affine", "elastic"}


@pytest.mark.parametrize("options,expected", [
    ({"crop_size": 300}, "crop_size: 300 is larger than load_size 286"),
    ({"augment": ["spin"]}, "augment.0: Input tag 'spin' found using 'name' does not match"),
    ({"augment": [{"name": "blur", "kernel_size": 4}]}, "augment.0.blur.kernel_size: must be odd (got 4)"),
    ({"augment": [{"name": "gamma", "gamma": [2, 1]}]}, "augment.0.gamma.gamma: [2.0, 1.0] is not a range"),
    ({"augment": [{"name": "hflip", "p": 2}]}, "augment.0.hflip.p: Input should be less than or equal to 1"),
    ({"augment": [{"name": "hflip", "sigma": 1}]}, "augment.0.hflip.sigma: unknown key"),
    ({"in_channels": 2}, "in_channels: Input should be 1, 3 or 4"),
    ({"val": {"folder": "../elsewhere"}}, "val.folder: must be a plain name without path separators"),
    ({"layout": "zip"}, "layout: Input should be 'auto', 'aligned' or 'folders'"),
])
def test_bad_values_name_their_key(options, expected):
    assert any(line.startswith(expected) for line in errors(**options)), errors(**options)


def test_registered_as_the_paired_dataset_and_the_data_command():
    host = get_plugins()
    component = host.registry.get("dataset", "paired")
    assert component.options is PairedDataOptions and component.provider == "translate"
    assert component.distribution == "nectargan-translate"
    import click

    group = click.Group("nectargan")
    host.add_commands(group)
    assert set(group.commands["data"].commands) == {"synth", "pair", "split", "check", "download", "tile", "derive"}


def test_a_trainer_section_choosing_the_dataset_validates_and_builds(tmp_path):
    aligned_dataset(tmp_path, {"train": 3}, size=16)
    registry = get_plugins().registry
    choice = choice_of("dataset", default="paired")

    class Sections(BaseModel):
        data: choice = Field(default_factory=choice, validate_default=True)  # type: ignore[valid-type]

    validated = Sections.model_validate({"data": {"root": str(tmp_path), "load_size": 16, "crop_size": 8}},
                                        context={"registry": registry})
    assert validated.data.options["augment"] == [{"name": "hflip", "p": 0.5}]  # defaults filled in
    with pytest.raises(ValidationError, match="crop_size: 999 is larger than load_size 286"):
        Sections.model_validate({"data": {"crop_size": 999}}, context={"registry": registry})
    factory = registry.get("dataset", "paired").load()
    dataset = factory(split="train", seed=4, **validated.data.options)
    assert len(dataset) == 3 and dataset[0]["A"].shape == (3, 8, 8) and dataset.seed == 4


def test_plugin_module_and_data_package_do_not_import_torch():
    code = ("import sys, nectargan_pix2pix.plugin, nectargan_translate.data, nectargan_translate.data_cli; "
            "print(sorted(m for m in ('torch', 'torchvision', 'numpy', 'PIL') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_every_key_and_augmentation_is_documented_with_its_default():
    text = (Path(__file__).resolve().parents[2] / "docs" / "plugins" / "translate-data.md").read_text()
    for name, field in PairedDataOptions.model_fields.items():
        if name in {"augment", "val", "test"}:
            assert f"| `{name}` |" in text, name
            continue
        default = "null" if field.default is None else str(field.default)
        default = default.lower() if isinstance(field.default, bool) else default
        assert f"| `{default}` |" in text.split(f"| `{name}` |")[1].split("\n")[0], name
    for name in ValSplitOptions.model_fields:
        assert f"| `{name}` |" in text, name
    for model in AUGMENTATIONS:
        row = text.split(f"| `{model.model_fields['name'].default}` | ")[1].split("\n")[0]
        assert row.startswith("A and B" if model.paired else "A |"), row
        assert f"| {model.model_fields['p'].default} |" in row
        for option in set(model.model_fields) - {"name", "p"}:
            assert f"`{option}`" in row, (model, option)
    for command in ("synth", "pair", "split", "check", "download"):
        assert f"### `nectargan data {command} " in text
