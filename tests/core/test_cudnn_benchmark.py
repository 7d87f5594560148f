"""precision.cudnn_benchmark: how the config's choice reaches torch.backends.cudnn (nectargan_core.device)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from nectargan_core.device import cudnn_benchmark, set_deterministic
from nectargan_core.errors import ConfigError


def config(mode=None, deterministic=False):
    precision = SimpleNamespace() if mode is None else SimpleNamespace(cudnn_benchmark=mode)
    return SimpleNamespace(precision=precision, run=SimpleNamespace(deterministic=deterministic))


@pytest.mark.parametrize("mode, deterministic, expected", [
    (None, False, None), ("auto", False, None), ("auto", True, None),  # auto: set_deterministic decides
    ("on", False, True), ("off", False, False), ("off", True, False),
])
def test_the_mode_maps_to_the_flag(mode, deterministic, expected):
    assert cudnn_benchmark(config(mode, deterministic)) is expected


def test_on_with_deterministic_algorithms_is_refused_in_one_line():
    with pytest.raises(ConfigError) as raised:
        cudnn_benchmark(config("on", True))
    assert "\n" not in str(raised.value) and str(raised.value).startswith("precision.cudnn_benchmark: on ")


def test_a_config_without_a_precision_section_is_auto():
    assert cudnn_benchmark(SimpleNamespace(run=SimpleNamespace(deterministic=False))) is None


@pytest.mark.parametrize("deterministic, benchmark, expected", [
    (False, None, True), (True, None, False), (False, False, False), (False, True, True)])
def test_set_deterministic_sets_cudnn_benchmark(monkeypatch, deterministic, benchmark, expected):
    monkeypatch.setattr(torch.backends.cudnn, "is_available", lambda: True)  # a CPU build has no cuDNN
    for name in ("benchmark", "deterministic", "allow_tf32"):
        monkeypatch.setattr(torch.backends.cudnn, name, getattr(torch.backends.cudnn, name))
    monkeypatch.setattr(torch.backends.cuda.matmul, "allow_tf32", torch.backends.cuda.matmul.allow_tf32)
    try:
        set_deterministic(deterministic, benchmark)
        assert torch.backends.cudnn.benchmark is expected
    finally:
        torch.use_deterministic_algorithms(False)
