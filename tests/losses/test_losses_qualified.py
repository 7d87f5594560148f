"""Qualified loss names (``distribution:name``, ``plugin:name``) in the ``loss`` section, with real distributions.

Two installed distributions register the loss ``tp_tv``: every place the
section takes a loss name accepts the qualified names, the refusal of the bare
name suggests something that is accepted where the bare name was written, and
a loss that is gone says which distribution and version to install.
"""

from __future__ import annotations

import os
import sys

import pytest

from nectargan_core.config import validate_config
from nectargan_core.errors import ConfigError
from nectargan_core.plugins import PluginHost
from nectargan_losses.manager import LossManager
from support import make_fake_dist

LOSS_PLUGIN = """
from nectargan_core import hookimpl

@hookimpl
def register_losses(register):
    register("tp_tv", "torch.nn:{cls}")
"""


@pytest.fixture
def dists(tmp_path, monkeypatch):
    """``dists("a", "b")``: a host seeing exactly those fake distributions besides the installed ones.

    a: nectargan-tpa 1.0.0 (plugin tpa, tp_tv = L1Loss); b: nectargan-tpb 2.0.0 (plugin tpb, tp_tv = MSELoss).
    """
    roots = {key: make_fake_dist(tmp_path / key, dist, module, LOSS_PLUGIN.format(cls=cls), module.split("_")[0],
                                 version=version)
             for key, dist, module, version, cls in (("a", "nectargan-tpa", "tpa_plugin", "1.0.0", "L1Loss"),
                                                     ("b", "nectargan-tpb", "tpb_plugin", "2.0.0", "MSELoss"))}
    original = list(sys.path)

    def install(*keys: str) -> PluginHost:
        monkeypatch.setattr(sys, "path", [str(roots[k]) for k in keys] + original)
        env = {k: v for k, v in os.environ.items() if not k.startswith("NECTARGAN_")}
        return PluginHost(env).load_entry_points()

    yield install
    for module in ("tpa_plugin", "tpb_plugin"):
        sys.modules.pop(module, None)


def validate(host: PluginHost, loss: dict, **extra):
    return validate_config({"trainer": "pix2pix", "loss": loss, **extra}, host.registry)


def built(host: PluginHost, config) -> dict[str, str]:
    manager = LossManager(config.loss, registry=host.registry)
    return {term.name: type(term.loss).__name__ for term in manager.terms if term.loss is not None}


@pytest.mark.parametrize("name, expected", [("nectargan-tpb:tp_tv", "MSELoss"), ("tpa:tp_tv", "L1Loss"),
                                            ("nectargan-losses:ssim", "SSIMLoss")])
def test_loss_add_accepts_qualified_names(dists, name, expected):
    host = dists("a", "b")
    config = validate(host, {"add": {"extra": {"loss": name, "weight": 2}}})
    assert config.loss.add["extra"].loss == name
    assert built(host, config)["extra"] == expected


def test_gan_mode_and_spec_accept_qualified_names(dists):
    host = dists("a", "b")
    config = validate(host, {"gan_mode": "nectargan-losses:lsgan", "spec": "nectargan-losses:basic"})
    manager = LossManager(config.loss, registry=host.registry)
    assert type(manager.objective).__name__ == "LSGAN"
    with pytest.raises(ConfigError) as raised:
        validate(host, {"gan_mode": "nectargan-tpa:lsgan"})
    assert str(raised.value) == ("config: loss: gan_mode: no plugin 'nectargan-tpa' provides a GAN objective "
                                 "'lsgan'; it is provided as 'nectargan-losses:lsgan'")


def test_the_refusal_of_a_shared_name_suggests_keys_that_work_where_it_was_written(dists):
    host = dists("a", "b")
    with pytest.raises(ConfigError) as raised:
        validate(host, {"add": {"tp_tv": {"weight": 1}}})
    assert str(raised.value) == (
        "config: loss: add.tp_tv.loss: loss 'tp_tv' is provided by 2 plugins: nectargan-tpa 1.0.0 (plugin 'tpa') "
        "and nectargan-tpb 2.0.0 (plugin 'tpb'); name one of them: 'nectargan-tpa:tp_tv' or 'nectargan-tpb:tp_tv'")
    config = validate(host, {"add": {"nectargan-tpa:tp_tv": {"weight": 1}}})  # the suggestion, as the key
    assert built(host, config) == {"l1": "L1Loss", "tp_tv": "L1Loss"}
    assert config.loss.resolve(host.registry).terms["tp_tv"].loss == "nectargan-tpa:tp_tv"
    config = validate(host, {"add": {"tp_tv": {"loss": "nectargan-tpb:tp_tv"}}})  # or under loss
    assert built(host, config)["tp_tv"] == "MSELoss"
    with pytest.raises(ConfigError, match=r"add.nectargan-tpb:tp_tv: add.nectargan-tpa:tp_tv already adds the "
                                          r"term 'tp_tv'; give one of them another key and its loss under loss$"):
        validate(host, {"add": {"nectargan-tpa:tp_tv": {}, "nectargan-tpb:tp_tv": {}}})


def test_available_names_show_the_qualified_names_of_shared_ones(dists):
    with pytest.raises(ConfigError) as raised:
        validate(dists("a", "b"), {"add": {"x": {"loss": "tp_tx"}}})
    assert str(raised.value) == (
        "config: loss: add.x.loss: unknown loss 'tp_tx'; available: charbonnier, l1, l2, laplacian, smooth_l1, "
        "sobel, ssim, toy_mse, nectargan-tpa:tp_tv, nectargan-tpb:tp_tv, vgg")


def test_a_recorded_loss_that_is_gone_says_what_to_install(dists):
    recorded = [{"kind": "loss", "name": "tp_tv", "plugin": "tpa", "distribution": "nectargan-tpa",
                 "version": "1.0.0"}]
    with pytest.raises(ConfigError) as raised:
        validate(dists(), {"add": {"tv": {"loss": "tp_tv"}}}, provenance=recorded)
    assert str(raised.value) == (
        "config: loss: add.tv.loss: unknown loss 'tp_tv'; this config used it from nectargan-tpa 1.0.0 (plugin "
        "'tpa'): pip install 'nectargan-tpa==1.0.0'; available: charbonnier, l1, l2, laplacian, smooth_l1, sobel, "
        "ssim, toy_mse, vgg")


def test_a_recorded_loss_now_from_another_distribution_is_refused_at_its_key(dists):
    recorded = [{"kind": "loss", "name": "tp_tv", "plugin": "tpa", "distribution": "nectargan-tpa",
                 "version": "1.0.0"}]
    with pytest.raises(ConfigError) as raised:
        validate(dists("b"), {"add": {"tv": {"loss": "tp_tv"}}}, provenance=recorded)
    assert str(raised.value) == (
        "config: loss: add.tv.loss: loss 'tp_tv': this config used nectargan-tpa 1.0.0 (plugin 'tpa'), but now "
        "nectargan-tpb 2.0.0 (plugin 'tpb') provides it; pip install 'nectargan-tpa==1.0.0' to get it back, or "
        "write 'nectargan-tpb:tp_tv' to use the other one on purpose")


SHADOW_L1 = """
from nectargan_core import hookimpl

@hookimpl
def register_losses(register):
    register("l1", "torch.nn:MSELoss")
"""


def test_a_spec_term_whose_loss_became_shared_is_fixed_under_terms_loss(tmp_path, monkeypatch):
    root = make_fake_dist(tmp_path / "shadow", "nectargan-shadow", "shadow_plugin", SHADOW_L1, "shadow",
                          version="1.0.0")
    monkeypatch.setattr(sys, "path", [str(root)] + sys.path)
    try:
        host = PluginHost({k: v for k, v in os.environ.items() if not k.startswith("NECTARGAN_")}).load_entry_points()
        with pytest.raises(ConfigError) as raised:
            validate(host, {})
        assert str(raised.value) == (
            "config: loss: terms.l1: loss 'l1' is provided by 2 plugins: nectargan-losses 0.1.0 (plugin 'losses') and "
            "nectargan-shadow 1.0.0 (plugin 'shadow'); name one of them: 'nectargan-losses:l1' or "
            "'nectargan-shadow:l1' (under terms.l1.loss)")
        config = validate(host, {"terms": {"l1": {"loss": "nectargan-shadow:l1"}}})
        assert built(host, config) == {"l1": "MSELoss"}
        assert config.loss.resolve(host.registry).terms["l1"].weight == 100.0  # the spec's weight stays
        with pytest.raises(ConfigError, match=r"terms.gan.loss: the 'gan' term's objective is chosen by gan_mode"):
            validate(host, {"terms": {"gan": {"loss": "nectargan-losses:lsgan"}}})
    finally:
        sys.modules.pop("shadow_plugin", None)
