"""docs/plugins/translate-commands.md documents every option, and its pipeline example gives predict's pixels."""

from __future__ import annotations

import importlib.util
import re

import click
import numpy as np
import pytest
from PIL import Image

from nectargan_translate.commands import COMMANDS
from nectargan_translate.export import export_generator
from nectargan_translate.predictor import predict
from support import ROOT

PAGE = ROOT / "docs" / "plugins" / "translate-commands.md"


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c.name)
def test_every_option_is_documented(command):
    text = PAGE.read_text()
    assert f"## `nectargan {command.name}`" in text
    for param in command.params:
        if isinstance(param, click.Option):
            assert all(f"`{opt}`" in text for opt in param.opts), (command.name, param.opts)


def pipeline_example():
    (code,) = re.findall(r"<!-- file: pipeline.py -->\n```python\n(.*?)```", PAGE.read_text(), re.S)
    namespace: dict = {}
    exec(compile(code, str(PAGE), "exec"), namespace)
    return namespace


@pytest.mark.filterwarnings("ignore:`torch.jit.load` is deprecated:FutureWarning")  # the example's own call
@pytest.mark.parametrize("fmt", ["torchscript", "onnx"])
def test_pipeline_example_matches_predict(trained_run, tmp_path, fmt):
    if fmt == "onnx" and not all(importlib.util.find_spec(m) for m in ("onnx", "onnxscript", "onnxruntime")):
        pytest.skip("the ONNX example needs nectargan-pix2pix[onnx]")
    image = tmp_path / "photo.png"
    shape = (32, 32, 3) if fmt == "torchscript" else (40, 57, 3)  # ONNX: any size, padded as predict pads
    Image.fromarray(np.random.default_rng(3).integers(0, 256, shape, dtype=np.uint8)).save(image)
    exported = export_generator(trained_run.path, fmt=fmt, output=tmp_path / f"g.{fmt}")
    pipeline_example()[f"translate_{fmt}"](str(exported.path), str(image), str(tmp_path / "example.png"))
    predict(trained_run.path, [image], tmp_path / "predicted")
    example = np.array(Image.open(tmp_path / "example.png"), dtype=np.int16)
    predicted = np.array(Image.open(tmp_path / "predicted" / "photo.png"), dtype=np.int16)
    assert np.abs(example - predicted).max() <= 1  # float32 rounding may flip one 8-bit level
