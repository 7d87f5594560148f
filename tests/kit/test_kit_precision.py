"""The kit's precision policy: ``self.kit.precision``, ``self.kit.autocast()`` and ``self.kit.scaler()`` follow the
config's ``precision.amp`` for any trainer on the kit, and a mode the device cannot train with is refused before the
run directory exists."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import kitgan_plugin
from nectargan_core import ConfigError, Precision, Run, TrainerKit
from support import finite


def config(tmp_path: Path, trainer: str = "kitgan", **precision) -> dict:
    data = {
        "trainer": trainer,
        "run": {"output_dir": str(tmp_path / "runs"), "name": "amp", "device": "cpu", "seed": 3},
        "loop": {"epochs": 1, "log_every_steps": 1, "val_every_epochs": None},
        "checkpoint": {"every_epochs": None, "save_last": True},
        "visualizers": [],
        "kitgan": {"samples": 4},
    }
    if precision:
        data["precision"] = precision
    return data


@pytest.fixture
def host(nectargan_plugin_host):
    return nectargan_plugin_host(kitgan_plugin)


def test_a_trainer_without_a_precision_section_trains_at_full_precision(host, tmp_path):
    trainer = Run.create(config(tmp_path), host=host).fit().trainer
    assert trainer.kit.precision.name == "fp32" and trainer.kit.precision.dtype is None
    assert trainer.forward_dtype is torch.float32
    assert not trainer.kit.scaler().is_enabled()


def test_bf16_autocasts_every_forward_pass_of_the_step_and_needs_no_scaler(host, tmp_path, monkeypatch):
    import nectargan_core.precision as precision

    monkeypatch.setattr(precision, "cpu_has_fast_bf16", lambda: True)  # no slow-kernel warning on this CPU
    run = Run.create(config(tmp_path, "kitgan_amp", amp="bf16"), host=host).fit()
    trainer = run.trainer
    assert trainer.kit.precision.name == "bf16" and trainer.forward_dtype is torch.bfloat16
    assert not trainer.kit.scaler().is_enabled()
    assert run.status()["status"] == "finished"
    assert all(finite(p) for p in trainer.generator.parameters())
    assert all(p.dtype is torch.float32 for p in trainer.generator.parameters())  # autocast: weights stay fp32
    with trainer.kit.autocast():
        assert trainer.generator(torch.zeros(1, 4)).dtype is torch.bfloat16
    assert trainer.generator(torch.zeros(1, 4)).dtype is torch.float32


def test_auto_is_full_precision_on_a_cpu(host, tmp_path):
    trainer = Run.create(config(tmp_path, "kitgan_amp", amp="auto"), host=host).fit().trainer
    assert trainer.kit.precision.name == "fp32" and trainer.forward_dtype is torch.float32


def test_fp16_on_a_cpu_is_refused_in_one_line_before_the_run_directory(host, tmp_path):
    with pytest.raises(ConfigError) as caught:
        Run.create(config(tmp_path, "kitgan_amp", amp="fp16"), host=host)
    assert str(caught.value) == ("precision.amp: fp16 autocast is not supported for training on CPU; "
                                 "use bf16 or off")
    assert not (tmp_path / "runs").exists()


def test_the_policy_is_decided_once_per_trainer_and_the_declaration_has_none(host, tmp_path):
    trainer = Run.create(config(tmp_path, "kitgan_amp", amp="off"), host=host).fit().trainer
    assert trainer.kit.precision is trainer.kit.precision and isinstance(trainer.kit.precision, Precision)
    with pytest.raises(RuntimeError, match="cannot read the precision on the TrainerKit declaration"):
        type(trainer).kit.autocast()
    with pytest.raises(RuntimeError, match="cannot read the precision on the TrainerKit declaration"):
        TrainerKit().precision


@pytest.mark.filterwarnings("ignore:torch.cuda.amp.GradScaler is enabled")
def test_fp16_gives_each_update_its_own_enabled_scaler():
    """Where fp16 can train (CUDA), every scaler the kit makes is enabled and independent."""
    policy = Precision("fp16", torch.device("cuda"))
    first, second = policy.scaler(), policy.scaler()
    assert policy.name == "fp16" and first is not second
    assert first.is_enabled() == torch.cuda.is_available()  # GradScaler disables itself without CUDA
