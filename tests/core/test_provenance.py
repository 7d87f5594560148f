"""Provenance: runs record who provided each part; resume and init_from refuse substitutes."""

from __future__ import annotations

import json
import sys

import pytest
import yaml

from nectargan_core import Run, load_checkpoint, provenance
from nectargan_core.atomic import atomic_write_text
from nectargan_core.errors import ConfigError, NameConflictError
from nectargan_core.plugins import PluginHost
from support import make_fake_dist

LOSS_PLUGIN = """
from nectargan_core import hookimpl

@hookimpl
def register_losses(register):
    register("tp_tv", "torch.nn:{cls}")
"""


@pytest.fixture
def dists(tmp_path, monkeypatch):
    """Install and uninstall fake distributions: ``dists("a", "b2")`` puts exactly those on sys.path.

    a: nectargan-tpa 1.0.0, a11: nectargan-tpa 1.1.0 (both: tp_tv = L1Loss), b: nectargan-tpb 2.0.0 (MSELoss).
    """
    roots = {}
    for key, dist, module, version, cls in (("a", "nectargan-tpa", "tpa_plugin", "1.0.0", "L1Loss"),
                                            ("a11", "nectargan-tpa", "tpa_plugin", "1.1.0", "L1Loss"),
                                            ("b", "nectargan-tpb", "tpb_plugin", "2.0.0", "MSELoss")):
        roots[key] = make_fake_dist(tmp_path / key, dist, module, LOSS_PLUGIN.format(cls=cls),
                                    module.split("_")[0], version=version)
    original = list(sys.path)

    def install(*keys: str) -> PluginHost:
        monkeypatch.setattr(sys, "path", [str(roots[k]) for k in keys] + original)
        env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("NECTARGAN_")}
        return PluginHost(env).load_entry_points()

    yield install
    for module in ("tpa_plugin", "tpb_plugin"):
        sys.modules.pop(module, None)


def config(tmp_path, **extra):
    return {"trainer": "toy", "run": {"output_dir": str(tmp_path / "runs"), "device": "cpu", "name": "prov"},
            "loop": {"epochs": 1}, "toy": {"samples": 8, "loss": "tp_tv"}, "callbacks": ["counter"],
            "visualizers": [], **extra}


RECORDED = [
    {"kind": "trainer", "name": "toy", "plugin": "toy", "distribution": "nectargan-toy", "version": "0.1.0"},
    {"kind": "model", "name": "toy_linear", "plugin": "toy", "distribution": "nectargan-toy", "version": "0.1.0"},
    {"kind": "loss", "name": "tp_tv", "plugin": "tpa", "distribution": "nectargan-tpa", "version": "1.0.0"},
    {"kind": "callback", "name": "counter", "plugin": "toy", "distribution": "nectargan-toy", "version": "0.1.0"},
    {"kind": "config_section", "name": "toy_extra", "plugin": "toy", "distribution": "nectargan-toy",
     "version": "0.1.0", "defaults": "sha256:aac83f481075f7ca"},
]


@pytest.fixture
def trained(dists, tmp_path):
    """A finished one-epoch run made while nectargan-tpa 1.0.0 provided tp_tv."""
    run = Run.create(config(tmp_path), host=dists("a")).fit()
    return run.dir


def test_the_config_and_every_checkpoint_record_who_provided_each_part(trained):
    assert yaml.safe_load((trained / "config.yaml").read_text())["provenance"] == RECORDED
    assert (trained / "config.yaml").read_text().rstrip().endswith("defaults: sha256:aac83f481075f7ca")  # last
    for path in (trained / "checkpoints").glob("*.pt"):
        assert load_checkpoint(path)["config"]["provenance"] == RECORDED
        assert json.loads(path.with_name(path.name + ".json").read_text())["provenance"] == RECORDED


def test_resume_refuses_a_part_that_another_distribution_provides_now(dists, trained):
    metrics = (trained / "metrics.jsonl").read_bytes()
    with pytest.raises(ConfigError) as raised:
        Run.resume(trained, overrides=["loop.epochs=2"], host=dists("b"))
    assert str(raised.value) == (  # named by the run's config file, which holds the name
        f"{trained / 'config.yaml'}: toy.loss: loss 'tp_tv': this config used nectargan-tpa 1.0.0 (plugin 'tpa'), "
        "but now nectargan-tpb 2.0.0 "
        "(plugin 'tpb') provides it; pip install 'nectargan-tpa==1.0.0' to get it back, or write "
        "'nectargan-tpb:tp_tv' to use the other one on purpose")
    assert (trained / "metrics.jsonl").read_bytes() == metrics
    assert "epochs: 1" in (trained / "config.yaml").read_text()


def test_a_qualified_name_takes_the_other_provider_on_purpose(dists, trained):
    run = Run.resume(trained, overrides=["loop.epochs=2", "toy.loss=nectargan-tpb:tp_tv"], host=dists("b")).fit()
    assert type(run.trainer.loss).__name__ == "MSELoss"
    assert {"kind": "loss", "name": "tp_tv", "plugin": "tpb", "distribution": "nectargan-tpb",
            "version": "2.0.0"} in yaml.safe_load((trained / "config.yaml").read_text())["provenance"]


def test_resume_warns_in_one_line_when_only_the_version_differs(dists, trained, capsys):
    Run.resume(trained, overrides=["loop.epochs=2"], host=dists("a11")).fit()
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning:")]
    assert warnings == [
        f"warning: {trained / 'config.yaml'}: loss 'tp_tv': this config used nectargan-tpa 1.0.0 (plugin 'tpa'), "
        "now 1.1.0 is "
        "installed; results may differ (pip install 'nectargan-tpa==1.0.0' to reproduce them exactly)"]


def test_resume_says_what_to_install_when_a_part_is_gone(dists, trained):
    with pytest.raises(ConfigError) as raised:
        Run.resume(trained, host=dists())
    assert str(raised.value) == (
        f"{trained / 'config.yaml'}: toy.loss: unknown loss 'tp_tv'; this config used it from nectargan-tpa 1.0.0 "
        "(plugin 'tpa'): "
        "pip install 'nectargan-tpa==1.0.0'; available: charbonnier, hinge, l1, l2, laplacian, lsgan, smooth_l1, "
        "sobel, ssim, toy_mse, vanilla, vgg, wgan-gp")


def test_a_name_that_became_ambiguous_resumes_with_the_recorded_provider(dists, trained, tmp_path):
    host = dists("a", "b")
    run = Run.resume(trained, overrides=["loop.epochs=2"], host=host).fit()
    assert type(run.trainer.loss).__name__ == "L1Loss"
    assert run.trainer.epochs_done == 2
    with pytest.raises(ConfigError, match="loss 'tp_tv' is provided by 2 plugins"):  # a new run must choose
        Run.create(config(tmp_path), host=host)
    with pytest.raises(NameConflictError):
        host.registry.get("loss", "tp_tv")


def test_a_run_from_before_provenance_resumes_without_a_check(dists, trained):
    data = yaml.safe_load((trained / "config.yaml").read_text())
    del data["provenance"]
    atomic_write_text(trained / "config.yaml", yaml.safe_dump(data))
    run = Run.resume(trained, overrides=["loop.epochs=2"], host=dists("b")).fit()
    assert type(run.trainer.loss).__name__ == "MSELoss"


def test_init_from_refuses_a_checkpoint_trained_with_another_provider(dists, trained, tmp_path, capsys):
    checkpoint = next((trained / "checkpoints").glob("*.pt"))
    fresh = config(tmp_path, run={"output_dir": str(tmp_path / "tuned"), "device": "cpu",
                                  "init_from": str(checkpoint)})
    with pytest.raises(ConfigError) as raised:
        Run.create(fresh, host=dists("b"))
    assert str(raised.value) == (
        f"config: toy.loss: loss 'tp_tv': checkpoint {checkpoint} used nectargan-tpa 1.0.0 (plugin 'tpa'), but now "
        "nectargan-tpb 2.0.0 (plugin 'tpb') provides it; pip install 'nectargan-tpa==1.0.0' to get it back, or "
        "write 'nectargan-tpb:tp_tv' to use the other one on purpose")
    assert not (tmp_path / "tuned").exists()
    with pytest.raises(ConfigError, match=f"unknown loss 'tp_tv'; checkpoint {checkpoint} used it from "
                                          r"nectargan-tpa 1.0.0 \(plugin 'tpa'\): pip install 'nectargan-tpa==1.0.0'"):
        Run.create(fresh, host=dists())
    capsys.readouterr()
    tuned = Run.create(fresh, host=dists("a11"))  # another version: a warning, and the weights load
    assert sorted(tuned.init_report["model"]["loaded"]) == ["bias", "weight"]
    assert [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning:")] == [
        f"warning: config: loss 'tp_tv': checkpoint {checkpoint} used nectargan-tpa 1.0.0 (plugin 'tpa'), now 1.1.0 "
        "is installed; results may differ (pip install 'nectargan-tpa==1.0.0' to reproduce them exactly)"]


def test_a_broken_provenance_block_is_one_line(dists, tmp_path):
    from nectargan_core.config import load_config

    with pytest.raises(ConfigError) as raised:
        load_config({**config(tmp_path), "provenance": [{"kind": "loss"}]}, registry=dists("a").registry)
    assert str(raised.value) == ("config: provenance: 0.name: Field required (written by nectargan; remove the key "
                                 "to record it afresh)")


# -- a substitute with other options, several errors, config sections whose plugin is gone ------------------
RICH_PLUGIN = """
from pydantic import BaseModel, ConfigDict
from nectargan_core import hookimpl

class CsvOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    filename: str = "steps.csv"

class Quiet:
    '''Watches nothing.'''

    def __init__(self, **options):
        self.options = options

class SectionOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    level: int = 1

@hookimpl
def register_visualizers(register):
    register("tp_csv", Quiet, {options})

@hookimpl
def register_losses(register):
    register("tp_tv", "torch.nn:{cls}")

@hookimpl
def register_config_sections(register):
    {section}
"""


@pytest.fixture
def rich(tmp_path, monkeypatch):
    """r: nectargan-tpr 1.0.0 (tp_csv with a filename option, tp_tv = L1Loss, config section tpsec);
    s: nectargan-tps 2.0.0 (tp_csv without options, tp_tv = MSELoss, no section)."""
    roots = {
        "r": make_fake_dist(tmp_path / "r", "nectargan-tpr", "tpr_plugin", RICH_PLUGIN.format(
            options="options=CsvOptions", cls="L1Loss", section='register("tpsec", SectionOptions)'),
            "tpr", version="1.0.0"),
        "s": make_fake_dist(tmp_path / "s", "nectargan-tps", "tps_plugin", RICH_PLUGIN.format(
            options="", cls="MSELoss", section="pass"), "tps", version="2.0.0"),
    }
    original = list(sys.path)

    def install(*keys: str) -> PluginHost:
        for module in ("tpr_plugin", "tps_plugin"):
            sys.modules.pop(module, None)
        monkeypatch.setattr(sys, "path", [str(roots[k]) for k in keys] + original)
        env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("NECTARGAN_")}
        return PluginHost(env).load_entry_points()

    yield install
    for module in ("tpr_plugin", "tps_plugin"):
        sys.modules.pop(module, None)


def test_a_substitute_is_refused_where_it_is_named_before_its_options_are_checked(rich, tmp_path):
    data = config(tmp_path, visualizers={"tp_csv": {"filename": "mine.csv"}})
    run = Run.create(data, host=rich("r")).fit()
    with pytest.raises(ConfigError) as raised:
        Run.resume(run.dir, host=rich("s"))
    # One line per part, at its key, and never the substitute's option errors ("takes no options").
    assert str(raised.value).splitlines() == [
        f"{run.dir / 'config.yaml'}: visualizers: visualizer 'tp_csv': this config used nectargan-tpr 1.0.0 "
        "(plugin 'tpr'), but now "
        "nectargan-tps 2.0.0 (plugin 'tps') provides it; pip install 'nectargan-tpr==1.0.0' to get it back, or "
        "write 'nectargan-tps:tp_csv' to use the other one on purpose",
        f"{run.dir / 'config.yaml'}: toy.loss: loss 'tp_tv': this config used nectargan-tpr 1.0.0 (plugin 'tpr'), "
        "but now nectargan-tps 2.0.0 (plugin 'tps') provides it; pip install 'nectargan-tpr==1.0.0' to get it back, "
        "or write 'nectargan-tps:tp_tv' to use the other one on purpose"]


def test_a_refusal_is_kept_beside_the_other_errors(rich, tmp_path):
    run = Run.create(config(tmp_path), host=rich("r")).fit()
    with pytest.raises(ConfigError) as raised:
        Run.resume(run.dir, overrides=["loop.epochs=0"], host=rich("s"))
    lines = str(raised.value).splitlines()
    assert "--set loop.epochs=0: loop.epochs: Input should be greater than 0 (got 0)" in lines  # named by its --set
    assert sum(line.startswith(f"{run.dir / 'config.yaml'}: toy.loss: loss 'tp_tv': this config used "
                               "nectargan-tpr 1.0.0") for line in lines) == 1


def test_a_section_of_a_removed_plugin_that_holds_its_defaults_is_left_out_with_a_warning(rich, dists, tmp_path,
                                                                                          capsys):
    run = Run.create(config(tmp_path, toy={"samples": 8, "loss": "toy_mse"}), host=rich("r")).fit()
    assert {"kind": "config_section", "name": "tpsec", "plugin": "tpr", "distribution": "nectargan-tpr",
            "version": "1.0.0", "defaults": provenance.digest({"level": 1})} in \
        yaml.safe_load((run.dir / "config.yaml").read_text())["provenance"]
    capsys.readouterr()
    resumed = Run.resume(run.dir, overrides=["loop.epochs=2"], host=rich()).fit()
    assert resumed.trainer.epochs_done == 2
    assert [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning:")] == [
        f"warning: {run.dir / 'config.yaml'}: tpsec: the config section of nectargan-tpr 1.0.0 (plugin 'tpr') is "
        "left out: that plugin "
        "is not loaded now and the section holds only its defaults (pip install 'nectargan-tpr==1.0.0' to keep it)"]
    assert "tpsec" not in yaml.safe_load((run.dir / "config.yaml").read_text())


def test_a_section_of_a_removed_plugin_with_settings_is_refused_naming_what_to_install(rich, tmp_path):
    data = config(tmp_path, toy={"samples": 8, "loss": "toy_mse"}, tpsec={"level": 5})
    run = Run.create(data, host=rich("r")).fit()
    saved = (run.dir / "config.yaml").read_bytes()
    with pytest.raises(ConfigError) as raised:
        Run.resume(run.dir, overrides=["loop.epochs=2"], host=rich())
    assert str(raised.value) == (
        f"{run.dir / 'config.yaml'}: tpsec: this config section comes from nectargan-tpr 1.0.0 (plugin 'tpr'), "
        "which is not loaded now, "
        "and holds settings other than its defaults; pip install 'nectargan-tpr==1.0.0' to use it")
    assert (run.dir / "config.yaml").read_bytes() == saved
