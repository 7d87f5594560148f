"""precision.cudnn_benchmark: how the config's choice reaches torch.backends.cudnn (nectargan_core.device)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from nectargan_core.device import cudnn_benchmark, set_deterministic
from support import run_cli


def config(mode=None, deterministic=False):
    precision = SimpleNamespace() if mode is None else SimpleNamespace(cudnn_benchmark=mode)
    return SimpleNamespace(precision=precision, run=SimpleNamespace(deterministic=deterministic))


@pytest.mark.parametrize("mode, deterministic, expected", [
    (None, False, None), ("auto", False, None), ("auto", True, None),  # auto: set_deterministic decides
    ("on", False, True), ("off", False, False), ("off", True, False),
])
def test_the_mode_maps_to_the_flag(mode, deterministic, expected):
    assert cudnn_benchmark(config(mode, deterministic)) is expected


def test_a_config_without_a_precision_section_is_auto():
    assert cudnn_benchmark(SimpleNamespace(run=SimpleNamespace(deterministic=False))) is None


def test_on_with_deterministic_algorithms_is_a_config_error_in_one_line(tmp_path):
    """Refused by the config itself: `config validate` (no torch) says it as train does, before any run."""
    (tmp_path / "det.yaml").write_text("trainer: pix2pix\nrun: {deterministic: true}\nprecision: {cudnn_benchmark: on}\n")
    (tmp_path / "off.yaml").write_text("trainer: pix2pix\nrun: {deterministic: true}\nprecision: {cudnn_benchmark: off}\n")
    refused = run_cli("config", "validate", "det.yaml", cwd=tmp_path)
    assert refused.returncode == 2 and refused.stderr.strip().splitlines() == [
        "error: det.yaml: precision.cudnn_benchmark: on picks convolution algorithms by timing them, which can "
        "differ between runs; it cannot go with run.deterministic: true (set precision.cudnn_benchmark to auto "
        "or off, or run.deterministic to false)"]
    assert run_cli("config", "validate", "off.yaml", cwd=tmp_path).returncode == 0
    late = run_cli("config", "validate", "off.yaml", "--set", "precision.cudnn_benchmark=on", cwd=tmp_path)
    assert late.returncode == 2 and "precision.cudnn_benchmark: on picks" in late.stderr


@pytest.mark.parametrize("deterministic, benchmark, expected", [
    (False, None, True), (True, None, False), (False, False, False), (False, True, True)])
def test_set_deterministic_sets_cudnn_benchmark(monkeypatch, deterministic, benchmark, expected):
    monkeypatch.setattr(torch.backends.cudnn, "is_available", lambda: True)  # a CPU build has no cuDNN
    cudnn, matmul = torch.backends.cudnn, torch.backends.cuda.matmul
    saved = (cudnn.benchmark, cudnn.deterministic, cudnn.allow_tf32, matmul.allow_tf32,
             torch.are_deterministic_algorithms_enabled())
    try:
        set_deterministic(deterministic, benchmark)
        assert cudnn.benchmark is expected and cudnn.deterministic is deterministic
    finally:
        cudnn.benchmark, cudnn.deterministic, cudnn.allow_tf32, matmul.allow_tf32 = saved[:4]
        torch.use_deterministic_algorithms(saved[4])
