"""Registry-name fields in a plugin's own config section: checked at config time like the core's names."""

from __future__ import annotations

import sys

import pytest
import yaml

from nectargan_core.config import load_config
from nectargan_core.errors import ConfigError
from support import make_fake_dist

SECTION_PLUGIN = """
from pydantic import Field

from nectargan_core import hookimpl
from nectargan_core.config import Section, choice_of, name_of, parts_of

LossChoice = choice_of("loss", default="charbonnier")


class JudgeSection(Section):
    '''Settings of the judge plugin.'''

    metric: name_of("loss") = Field("l1", validate_default=True, description="Loss to report")
    extra: list[name_of("loss")] = Field(default_factory=list, description="More losses to report")
    weighted: LossChoice = Field(default_factory=LossChoice, validate_default=True)
    watchers: parts_of("callback") = Field(default_factory=dict, description="Callbacks it runs")


class JudgeOptions(Section):
    against: name_of("loss") = Field("l2", validate_default=True)


@hookimpl
def register_config_sections(register):
    register("judge", JudgeSection)


@hookimpl
def register_callbacks(register):
    register("judged", "judge_parts:Judged", options=JudgeOptions)
"""

PARTS = """
class Judged:
    def __init__(self, against="l2"):
        self.against = against
"""


@pytest.fixture
def judge(tmp_path, monkeypatch, host_factory):
    root = make_fake_dist(tmp_path / "site", "nectargan-judge", "judge_plugin", SECTION_PLUGIN, "judge")
    (root / "judge_parts.py").write_text(PARTS)
    monkeypatch.syspath_prepend(str(root))
    host = host_factory()
    assert host.get("judge").status == "loaded", host.get("judge").error
    yield host
    for module in ("judge_plugin", "judge_parts"):
        sys.modules.pop(module, None)


def error_of(host, data) -> str:
    with pytest.raises(ConfigError) as raised:
        load_config(data, registry=host.registry)
    assert raised.value.exit_code == 2
    return str(raised.value)


def test_defaults_are_checked_filled_and_recorded(judge):
    config = load_config({}, registry=judge.registry)
    assert config.to_dict()["judge"] == {"metric": "l1", "extra": [], "weighted": {"name": "charbonnier",
                                                                                   "eps": 0.001}, "watchers": {}}
    assert {(r.kind, r.name, r.distribution) for r in config.provenance} >= {
        ("loss", "l1", "nectargan-losses"), ("loss", "charbonnier", "nectargan-losses")}


def test_bare_names_names_with_options_and_qualified_names_are_accepted(judge):
    config = load_config({"judge": {"metric": "nectargan-losses:ssim", "extra": ["l2", "sobel"],
                                    "weighted": "ssim", "watchers": ["counter", {"name": "judged", "against": "l1"}]},
                          "callbacks": {"judged": {"against": "smooth_l1"}}}, registry=judge.registry)
    section = config.judge
    assert (section.metric, section.extra) == ("nectargan-losses:ssim", ["l2", "sobel"])
    assert (section.weighted.name, section.weighted.options) == ("ssim", {"kernel_size": 11, "sigma": 1.5,
                                                                          "gaussian": True})
    assert section.watchers == {"counter": {}, "judged": {"against": "l1"}}
    assert config.callbacks == {"judged": {"against": "smooth_l1"}}
    assert {r.name for r in config.provenance if r.kind == "loss"} >= {"ssim", "l2", "sobel", "l1", "smooth_l1"}


def test_a_typo_gets_the_same_message_as_the_cores_own_names(judge):
    assert error_of(judge, {"visualizers": ["consol"]}) == ("config: visualizers: unknown visualizer 'consol' (did "
                                                             "you mean 'console'?); available: console, tensorboard, "
                                                             "visdom")
    losses = "charbonnier, hinge, l1, l2, laplacian, lsgan, smooth_l1, sobel, ssim, toy_mse, vanilla, vgg, wgan-gp"
    assert error_of(judge, {"judge": {"metric": "l11"}}) == \
        f"config: judge.metric: unknown loss 'l11' (did you mean 'l1'?); available: {losses}"
    assert error_of(judge, {"judge": {"extra": ["l2", "sobl"]}}) == \
        f"config: judge.extra.1: unknown loss 'sobl' (did you mean 'sobel'?); available: {losses}"
    assert error_of(judge, {"judge": {"weighted": {"name": "charbonier"}}}) == \
        f"config: judge.weighted: unknown loss 'charbonier' (did you mean 'charbonnier'?); available: {losses}"
    assert error_of(judge, {"judge": {"weighted": {"name": "charbonnier", "eps": -1}}}) == \
        "config: judge.weighted: loss 'charbonnier': eps: Input should be greater than 0 (got -1)"
    assert error_of(judge, {"judge": {"watchers": ["countr"]}}).startswith(
        "config: judge.watchers: unknown callback 'countr' (did you mean 'counter'?); available: counter, judged, "
        "recorder")
    assert error_of(judge, {"callbacks": {"judged": {"against": "l3"}}}).startswith(
        "config: callbacks: callback 'judged': against: unknown loss 'l3'")


def test_a_name_two_plugins_provide_is_refused_in_a_plugin_section_too(judge, tmp_path, monkeypatch, host_factory):
    root = make_fake_dist(tmp_path / "rival", "nectargan-rival-l1", "rival_l1", """
from nectargan_core import hookimpl
@hookimpl
def register_losses(register):
    register("l1", "torch.nn:L1Loss")
""", "rival_l1")
    monkeypatch.syspath_prepend(str(root))
    host = host_factory()
    assert error_of(host, {"judge": {"metric": "l1"}}).startswith(
        "config: judge.metric: loss 'l1' is provided by 2 plugins: nectargan-losses 0.1.0 (plugin 'losses') and "
        "nectargan-rival-l1 0.1 (plugin 'rival_l1'); name one of them: 'nectargan-losses:l1' or "
        "'nectargan-rival-l1:l1'")
    assert load_config({"judge": {"metric": "nectargan-rival-l1:l1", "extra": ["nectargan-losses:l1"]}},
                       registry=host.registry).judge.extra == ["nectargan-losses:l1"]
    sys.modules.pop("rival_l1", None)


def test_the_cli_refuses_a_typo_in_a_plugin_section_before_a_run_directory(judge, cli, tmp_path):
    env = {"PYTHONPATH": str(tmp_path / "site")}
    (tmp_path / "run.yaml").write_text(yaml.safe_dump({"trainer": "toy", "judge": {"metric": "l11"}}))
    for args in (["config", "validate", "run.yaml"], ["train", "-c", "run.yaml"]):
        done = cli(*args, env=env, cwd=tmp_path)
        assert done.returncode == 2, done.stderr
        assert done.stderr.splitlines() == ["error: run.yaml: judge.metric: unknown loss 'l11' (did you mean 'l1'?); "
                                            "available: charbonnier, hinge, l1, l2, laplacian, lsgan, smooth_l1, "
                                            "sobel, ssim, toy_mse, vanilla, vgg, wgan-gp"]
    assert not (tmp_path / "runs").exists()
