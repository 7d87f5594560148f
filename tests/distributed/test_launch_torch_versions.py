"""The launcher builds its LaunchConfig from the fields the installed torch has.

torch 2.11 (measured on a GPU machine) has no ``shutdown_timeout``; passing it made every
``--nproc`` run fail with a TypeError before any rank started.
"""

from __future__ import annotations

import dataclasses

import pytest

torch_launcher = pytest.importorskip("torch.distributed.launcher.api")


def _capture(monkeypatch, config_class):
    from nectargan_core import launch

    seen = {}

    def fake_elastic_launch(config, entrypoint):
        seen["config"] = config
        return lambda *args: {0: None}

    monkeypatch.setattr(torch_launcher, "LaunchConfig", config_class)
    monkeypatch.setattr(torch_launcher, "elastic_launch", fake_elastic_launch)
    assert launch.launch(2, ["train"]) == 0
    return seen["config"]


def test_a_torch_without_shutdown_timeout_still_launches(monkeypatch):
    def spec(field):
        if field.default is not dataclasses.MISSING or field.default_factory is not dataclasses.MISSING:
            return (field.name, field.type,
                    dataclasses.field(default=field.default, default_factory=field.default_factory))
        return (field.name, field.type)

    # the same LaunchConfig, less the field that older torch releases lack
    Old = dataclasses.make_dataclass("LaunchConfig", [spec(f) for f in dataclasses.fields(torch_launcher.LaunchConfig)
                                                      if f.name != "shutdown_timeout"])
    config = _capture(monkeypatch, Old)
    assert config.nproc_per_node == 2
    assert not hasattr(config, "shutdown_timeout")


def test_a_torch_with_shutdown_timeout_gets_ours(monkeypatch):
    from nectargan_core.launch import SHUTDOWN_TIMEOUT_S

    if "shutdown_timeout" not in {f.name for f in dataclasses.fields(torch_launcher.LaunchConfig)}:
        pytest.skip("this torch's LaunchConfig has no shutdown_timeout")
    config = _capture(monkeypatch, torch_launcher.LaunchConfig)
    assert config.shutdown_timeout == SHUTDOWN_TIMEOUT_S
