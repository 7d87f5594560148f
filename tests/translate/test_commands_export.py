"""``nectargan export``: files that load, a dynamic batch axis, a parity check that can fail, and the sidecar."""

from __future__ import annotations

import importlib.util
import json
import sys

import pytest
import torch

from nectargan_core.errors import NectarGANError
from nectargan_translate import export
from nectargan_translate.export import export_generator, onnx_parity, quiet_jit
from nectargan_translate.inference import load_generator
from support import run_cli

needs_onnx = pytest.mark.skipif(not all(importlib.util.find_spec(m) for m in ("onnx", "onnxscript")),
                                reason="ONNX export needs nectargan-pix2pix[onnx]")


def batch(size, height=32, width=32):
    return torch.rand(size, 3, height, width) * 2 - 1


@pytest.fixture(scope="module")
def model(trained_run):
    return load_generator(trained_run.path, device="cpu").model


@pytest.fixture(scope="module")
def onnx_export(trained_run, tmp_path_factory):
    return export_generator(trained_run.path, fmt="onnx", size=(32, 48),
                            output=tmp_path_factory.mktemp("onnx") / "g.onnx")


def check_sidecar(path, fmt, trained_run, size):
    sidecar = json.loads(path.with_name(path.name + ".json").read_text())
    assert (sidecar["file"], sidecar["format"]) == (path.name, fmt)
    sides = ["height", "width"] if fmt == "onnx" else size  # ONNX: any multiples of the size multiple
    assert sidecar["input"]["shape"] == ["batch", 3, *sides] and sidecar["output"]["shape"] == ["batch", 3, *sides]
    assert sidecar["dynamic_size"] is (fmt == "onnx")
    assert sidecar["input"]["range"] == [-1.0, 1.0] and sidecar["output"]["range"] == [-1.0, 1.0]
    assert "* 2 - 1" in sidecar["normalisation"]
    assert sidecar["size_multiple"] == 16
    assert sidecar["checkpoint"] == str(trained_run.path / "checkpoints" / "epoch0002-step00000020.pt")
    assert (sidecar["epoch"], sidecar["global_step"]) == (2, 20)
    assert sidecar["generator"]["name"] == "unet" and sidecar["generator"]["depth"] == 4
    assert sidecar["parity"]["passed"] is True and sidecar["parity"]["batch_sizes"] == [2, 1]
    assert sidecar["parity"]["max_abs_diff"] <= 1e-5
    return sidecar


def test_torchscript_through_the_cli_loads_and_takes_any_batch(trained_run, model):
    result = run_cli("export", str(trained_run.path), "--format", "torchscript")
    assert result.returncode == 0, result.stderr
    path = trained_run.path / "export" / "epoch0002-step00000020.torchscript.pt"
    parity, wrote = result.stdout.strip().splitlines()
    assert parity.startswith("parity (torch.jit.load (torch ") and "max |export - pytorch| = " in parity
    assert wrote == (f"wrote {path} (32x32, dynamic batch; epoch0002-step00000020.pt (epoch 2, step 20)) "
                     f"and {path.name}.json")
    assert result.stderr == ""  # TorchScript's deprecation and tracer warnings are handled, not shown
    with quiet_jit():
        loaded = torch.jit.load(str(path))
    for size in (1, 3):
        inputs = batch(size)
        with torch.no_grad():
            torch.testing.assert_close(loaded(inputs), model(inputs), rtol=0, atol=1e-5)
    assert "opset" not in check_sidecar(path, "torchscript", trained_run, [32, 32])


@needs_onnx
def test_onnx_runs_in_onnxruntime_with_any_batch_and_size(onnx_export, trained_run, model):
    onnxruntime = pytest.importorskip("onnxruntime")
    assert onnx_export.sidecar == onnx_export.path.with_name("g.onnx.json")
    sidecar = check_sidecar(onnx_export.path, "onnx", trained_run, [32, 48])
    assert sidecar["opset"] == 18 and sidecar["parity"]["checked_with"].startswith("onnxruntime ")
    assert (sidecar["input"]["name"], sidecar["output"]["name"]) == ("input", "output")
    assert sidecar["parity"]["sizes"] == [[32, 48], [48, 80]]
    assert sidecar["sizes"] == "any height and width that are multiples of 16 (checked at 32x48 and 48x80)"
    session = onnxruntime.InferenceSession(str(onnx_export.path), providers=["CPUExecutionProvider"])
    for size, height, width in ((1, 32, 48), (3, 32, 48), (2, 64, 16), (1, 112, 96)):  # any batch, any size
        inputs = batch(size, height, width)
        (outputs,) = session.run(["output"], {"input": inputs.numpy()})
        with torch.no_grad():
            torch.testing.assert_close(torch.from_numpy(outputs), model(inputs), rtol=0, atol=1e-5)


@needs_onnx
def test_without_onnxruntime_parity_is_reported_as_not_checked(onnx_export, model, monkeypatch):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import fails as if not installed
    parity = onnx_parity(model, onnx_export.path, [batch(2, 32, 48)], 1e-4)
    assert parity.passed is None
    assert parity.describe() == ("parity not checked: onnxruntime is not installed "
                                 "(pip install onnx onnxscript onnxruntime)")


def test_a_difference_above_the_tolerance_fails_and_the_sidecar_says_so(trained_run, tmp_path, monkeypatch):
    monkeypatch.setattr(export, "max_difference", lambda outputs, expected: 0.5)
    with pytest.raises(NectarGANError, match=r"parity check failed: max \|export - pytorch\| = 0.5 is above the "
                                             r"tolerance 0.0001"):
        export_generator(trained_run.path, fmt="torchscript", output=tmp_path / "g.pt")
    assert json.loads((tmp_path / "g.pt.json").read_text())["parity"]["passed"] is False


def test_sizes_the_generator_cannot_take_are_refused(trained_run, tmp_path):
    with pytest.raises(NectarGANError, match="--size 40x32: height and width must be multiples of 16"):
        export_generator(trained_run.path, fmt="torchscript", size=(40, 32), output=tmp_path / "g.pt")


def test_onnx_without_its_packages_names_the_packages_to_install(trained_run, monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "onnxscript" else real(name, *a))
    with pytest.raises(NectarGANError, match=r"needs the onnx and onnxscript packages: pip install onnx onnxscript onnxruntime$"):
        export_generator(trained_run.path, fmt="onnx")


def test_an_onnxscript_too_old_for_this_torch_is_one_line_naming_the_versions(trained_run, monkeypatch, tmp_path):
    """onnxscript 0.5 with torch 2.11: the exporter imports onnxscript._framework_apis.torch_2_11, which 0.5 lacks."""
    def old_onnxscript(*args, **kwargs):
        raise ModuleNotFoundError("No module named 'onnxscript._framework_apis.torch_2_11'")

    monkeypatch.setattr(torch.onnx, "export", old_onnxscript)
    out = tmp_path / "g.onnx"
    with pytest.raises(NectarGANError) as caught:
        export_generator(trained_run.path, fmt="onnx", output=out)
    message = str(caught.value)
    assert message.startswith(f"ONNX export: torch {torch.__version__} cannot use the installed onnx ")
    assert "(No module named 'onnxscript._framework_apis.torch_2_11'); upgrade them: pip install -U onnx onnxscript" \
        in message and "\n" not in message
    assert not out.exists() and not list(tmp_path.iterdir())  # nothing half-written
