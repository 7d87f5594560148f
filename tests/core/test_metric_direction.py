"""Which way a metric improves: told from its name for ``auto``, refused at config time when the name does not say."""

from __future__ import annotations

import pytest

from nectargan_core.config import load_config
from nectargan_core.errors import ConfigError
from nectargan_core.directions import direction, improved
from nectargan_core.plugins import get_plugins


@pytest.fixture
def registry():
    return get_plugins().registry


@pytest.mark.parametrize("metric, expected", [
    ("val/psnr", "max"), ("psnr", "max"), ("val/ssim", "max"), ("val/cycle_psnr", "max"), ("val/MS-SSIM", "max"),
    ("val/l1", "min"), ("val/mse", "min"), ("val/lpips", "min"), ("val/fid", "min"), ("val/G_loss", "min"),
    ("val/cycle_l1", "min"),
])
def test_auto_takes_the_direction_from_the_name(metric, expected):
    assert direction(metric) == expected
    assert direction(metric, "auto") == expected


@pytest.mark.parametrize("metric", ["val/foo", "val/G_A/total", "val/psnr_loss", "val/", ""])
def test_a_name_that_says_neither_or_both_is_refused_for_auto(metric):
    with pytest.raises(ValueError, match="whether higher or lower is better"):
        direction(metric)
    assert direction(metric, "min") == "min" and direction(metric, "max") == "max"  # said explicitly: kept


def test_improved_follows_the_direction_and_the_margin():
    assert improved(0.3, None, "val/l1")
    assert improved(0.3, 0.4, "val/l1") and not improved(0.5, 0.4, "val/l1")
    assert improved(25.0, 24.0, "val/psnr") and not improved(23.0, 24.0, "val/psnr")
    assert not improved(24.5, 24.0, "val/psnr", min_delta=1.0) and improved(25.5, 24.0, "val/psnr", min_delta=1.0)
    assert improved(23.0, 24.0, "val/psnr", "min")  # an explicit mode wins over the name


def test_a_best_metric_auto_cannot_resolve_is_one_line_naming_it(registry):
    with pytest.raises(ConfigError) as refused:
        load_config(None, ["checkpoint.best_metric=val/sharpness"], registry)
    assert str(refused.value) == (
        "--set checkpoint.best_metric=val/sharpness: checkpoint.best_metric: cannot tell from the name "
        "'val/sharpness' whether higher or lower is better; set checkpoint.best_mode: min or max")
    config = load_config(None, ["checkpoint.best_metric=val/sharpness", "checkpoint.best_mode=max"], registry)
    assert config.checkpoint.best_direction == "max"
    assert load_config(None, ["checkpoint.best_metric=val/psnr"], registry).checkpoint.best_direction == "max"
    assert load_config(None, [], registry).checkpoint.best_mode == "auto"


class _Metric:
    def __init__(self, name, direction):
        self.name, self.meta = name, {"direction": direction}


class _Registry:
    def __init__(self, *metrics):
        self.metrics = [_Metric(*m) for m in metrics]

    def all(self, kind):
        return self.metrics if kind == "metric" else []


@pytest.mark.parametrize("metric, expected", [
    ("val/sharpness", "max"),            # registered; the name says nothing
    ("val/My_Metric", "max"),            # registered in another case
    ("val/cycle_A_psnr_drop", "min"),    # the longest registered name that ends it: psnr_drop, not psnr
    ("val/cycle_loss_ratio", "max"),     # registered loss_ratio wins over the word "loss"
    ("val/cycle_psnr", "max"),           # a registered part
    ("val/l1", "min"),                   # not registered here: the name rule
])
def test_auto_takes_the_registered_direction_first(metric, expected):
    registry = _Registry(("sharpness", "max"), ("my_metric", "max"), ("psnr_drop", "min"), ("loss_ratio", "max"),
                         ("psnr", "max"))
    assert direction(metric, "auto", registry) == expected


def test_registered_parts_that_disagree_are_refused():
    with pytest.raises(ValueError, match="cannot tell from the name .val/sharpness_over_blur_ratio."):
        direction("val/sharpness_over_blur_ratio", "auto", _Registry(("sharpness", "max"), ("blur", "min")))
