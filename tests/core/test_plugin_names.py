"""Names two plugins share: both stay loaded, bare names are refused at config time, qualified names work."""

from __future__ import annotations

import json
import sys

import pytest
import yaml

from nectargan_core.config import load_config
from nectargan_core.errors import ConfigError, NameConflictError, PluginError
from support import make_fake_dist

# The same trainer, loss and command names as the toy plugin; "aa" loads before "toy", "zz" after.
RIVAL = """
import click
from nectargan_core import hookimpl

@hookimpl
def register_trainers(register):
    register("toy", "nectargan_toy.trainer:ToyTrainer", options="nectargan_toy.options:ToyTrainerOptions")

@hookimpl
def register_losses(register):
    register("toy_mse", "torch.nn:L1Loss", description="not a mean squared error at all")

@click.command("toy-hello")
def hello():
    click.echo("hello from {module}")

@hookimpl
def register_commands(cli):
    cli.add_command(hello)
"""


def rival(root, prefix: str) -> None:
    module = f"{prefix}_rival"
    make_fake_dist(root, f"nectargan-{prefix}-rival", module, RIVAL.format(module=module), prefix, version="2.0.0")


@pytest.fixture
def rivals(tmp_path, monkeypatch):
    """Two rival plugins, loaded before and after the toy plugin."""
    root = tmp_path / "site"
    rival(root, "aa")
    rival(root, "zz")
    monkeypatch.syspath_prepend(str(root))
    yield root
    for module in ("aa_rival", "zz_rival"):
        sys.modules.pop(module, None)


def test_a_shared_name_disables_no_plugin_whatever_the_load_order(rivals, host_factory):
    host = host_factory()
    assert [host.get(name).status for name in ("aa", "toy", "zz")] == ["loaded"] * 3
    assert {c.name for c in host.get("toy").components} >= {"toy", "toy_mse", "toy_linear", "recorder"}
    assert [c.distribution for c in host.registry.providers("loss", "toy_mse")] == \
        ["nectargan-aa-rival", "nectargan-toy", "nectargan-zz-rival"]
    with pytest.raises(NameConflictError) as raised:
        host.registry.get("loss", "toy_mse")
    assert str(raised.value) == (
        "loss 'toy_mse' is provided by 3 plugins: nectargan-aa-rival 2.0.0 (plugin 'aa') and "
        "nectargan-toy 0.1.0 (plugin 'toy') and nectargan-zz-rival 2.0.0 (plugin 'zz'); name one of them: "
        "'nectargan-aa-rival:toy_mse' or 'nectargan-toy:toy_mse' or 'nectargan-zz-rival:toy_mse'")
    assert raised.value.exit_code == 2


@pytest.mark.parametrize("name,provider", [("nectargan-toy:toy_mse", "toy"), ("nectargan_toy:toy_mse", "toy"),
                                           ("toy:toy_mse", "toy"), ("zz:toy_mse", "zz"),
                                           ("nectargan-zz-rival:toy_mse", "zz")])
def test_every_part_is_reachable_by_distribution_or_plugin(rivals, host_factory, name, provider):
    assert host_factory().registry.get("loss", name).provider == provider


def test_a_wrong_qualifier_names_the_real_providers(rivals, host_factory):
    registry = host_factory().registry
    with pytest.raises(PluginError) as raised:
        registry.get("loss", "nectargan-losses:toy_mse")
    assert str(raised.value) == ("no plugin 'nectargan-losses' provides a loss 'toy_mse'; it is provided as "
                                 "'nectargan-aa-rival:toy_mse' or 'nectargan-toy:toy_mse' or "
                                 "'nectargan-zz-rival:toy_mse'")


def test_each_plugin_lists_what_it_shares(rivals, host_factory):
    toy = host_factory().get("toy")
    assert "loss 'toy_mse' is also provided by nectargan-aa-rival 2.0.0 (plugin 'aa') and nectargan-zz-rival " \
           "2.0.0 (plugin 'zz'): configs must name 'nectargan-toy:toy_mse' or 'nectargan-aa-rival:toy_mse' or " \
           "'nectargan-zz-rival:toy_mse'" in toy.conflicts
    assert any(line.startswith("trainer 'toy' is also provided by") for line in toy.conflicts)


def test_a_bare_shared_name_is_a_config_error_naming_both(rivals, host_factory):
    registry = host_factory().registry
    with pytest.raises(ConfigError) as raised:
        load_config({"trainer": "nectargan-toy:toy", "toy": {"loss": {"name": "toy_mse"}}}, registry=registry)
    assert str(raised.value) == (
        "config: toy.loss: loss 'toy_mse' is provided by 3 plugins: nectargan-aa-rival 2.0.0 (plugin 'aa') and "
        "nectargan-toy 0.1.0 (plugin 'toy') and nectargan-zz-rival 2.0.0 (plugin 'zz'); name one of them: "
        "'nectargan-aa-rival:toy_mse' or 'nectargan-toy:toy_mse' or 'nectargan-zz-rival:toy_mse'")
    with pytest.raises(ConfigError, match=r"^config: trainer: trainer 'toy' is provided by 3 plugins"):
        load_config({"trainer": "toy"}, registry=registry)


def test_a_run_with_qualified_names_uses_exactly_those_parts(rivals, host_factory, tmp_path):
    from nectargan_core import Run

    host = host_factory()
    config = {"trainer": "zz:toy", "run": {"output_dir": str(tmp_path / "runs"), "device": "cpu"},
              "loop": {"epochs": 1}, "toy": {"loss": "nectargan-zz-rival:toy_mse", "samples": 8},
              "visualizers": ["nectargan-core:console"], "callbacks": ["nectargan-toy:counter"]}
    run = Run.create(config, host=host).fit()
    assert type(run.trainer.loss).__name__ == "L1Loss"  # zz's, not the toy's MSELoss
    saved = yaml.safe_load((run.dir / "config.yaml").read_text())
    assert saved["toy"]["loss"] == {"name": "nectargan-zz-rival:toy_mse"}
    assert {(r["kind"], r["name"], r["distribution"]) for r in saved["provenance"]} == {
        ("trainer", "toy", "nectargan-zz-rival"), ("model", "toy_linear", "nectargan-toy"),
        ("loss", "toy_mse", "nectargan-zz-rival"), ("visualizer", "console", "nectargan-core"),
        ("callback", "counter", "nectargan-toy"), ("config_section", "toy_extra", "nectargan-toy")}


def test_two_distributions_may_use_one_plugin_name(tmp_path, monkeypatch, host_factory):
    root = tmp_path / "site"
    for dist, module in (("nectargan-one", "one_mod"), ("nectargan-two", "two_mod")):
        make_fake_dist(root, dist, module, f"""
from nectargan_core import hookimpl
@hookimpl
def register_losses(register):
    register("{module}_loss", "torch.nn:L1Loss")
""", entry_name="same")
    monkeypatch.syspath_prepend(str(root))
    host = host_factory()
    first, second = host.plugins["same"], host.plugins["same@nectargan-two"]
    assert (first.status, second.status) == ("loaded", "loaded")
    assert host.registry.get("loss", "two_mod_loss").provider == "same@nectargan-two"
    assert host.get("nectargan-two") is second
    with pytest.raises(NameConflictError, match="plugin name 'same' is used by 2 distributions"):
        host.get("same")
    assert "plugin name 'same' is also used by nectargan-two: this one is 'same'; name plugins by distribution" \
        in first.conflicts


def test_cli_lists_conflicts_and_commands_and_refuses_the_ambiguous_command(rivals, cli, tmp_path):
    env = {"PYTHONPATH": str(rivals)}
    listed = cli("plugins", "list", env=env)
    assert listed.returncode == 0, listed.stderr
    toy = listed.stdout.split("toy (nectargan-toy 0.1.0) [loaded]\n", 1)[1].split("\nzz ", 1)[0]
    assert "  commands: nectargan-toy:toy-hello\n" in toy
    assert "  conflict: command 'toy-hello' is also added by plugin 'aa' (nectargan-aa-rival 2.0.0) and plugin " \
           "'zz' (nectargan-zz-rival 2.0.0): run this one as 'nectargan nectargan-toy:toy-hello'\n" in toy
    as_json = {p["name"]: p for p in json.loads(cli("plugins", "list", "--json", env=env).stdout)}
    assert as_json["aa"]["commands"] == ["nectargan-aa-rival:toy-hello"]
    assert len(as_json["zz"]["conflicts"]) == 3  # trainer, loss and command

    ambiguous = cli("toy-hello", env=env)
    assert ambiguous.returncode == 2
    assert ambiguous.stderr == (
        "error: command 'toy-hello' is added by 3 plugins: plugin 'aa' (nectargan-aa-rival 2.0.0) and plugin 'toy' "
        "(nectargan-toy 0.1.0) and plugin 'zz' (nectargan-zz-rival 2.0.0); run 'nectargan nectargan-aa-rival:toy-hello'"
        " or 'nectargan nectargan-toy:toy-hello' or 'nectargan nectargan-zz-rival:toy-hello'\n")
    assert cli("nectargan-zz-rival:toy-hello", env=env).stdout == "hello from zz_rival\n"
    assert cli("nectargan-toy:toy-hello", "--name", "you", env=env).stdout == "hello you from toy\n"

    (tmp_path / "run.yaml").write_text("trainer: nectargan-toy:toy\ntoy: {loss: toy_mse}\n")
    refused = cli("train", "-c", str(tmp_path / "run.yaml"), env=env, cwd=tmp_path)
    assert refused.returncode == 2
    assert refused.stderr.startswith(f"error: {tmp_path / 'run.yaml'}: toy.loss: loss 'toy_mse' is provided by 3 ")
    assert len(refused.stderr.splitlines()) == 1 and not (tmp_path / "runs").exists()


def test_a_plugin_cannot_take_a_core_command(tmp_path, cli):
    root = tmp_path / "site"
    make_fake_dist(root, "nectargan-taker", "taker_mod", """
import click
from nectargan_core import hookimpl

@click.command("runs")
def runs():
    click.echo("not the core's runs")

@hookimpl
def register_commands(cli):
    cli.add_command(runs)
""", entry_name="taker")
    env = {"PYTHONPATH": str(root)}
    core = cli("runs", str(tmp_path / "none"), env=env)
    assert "not the core's runs" not in core.stdout
    assert cli("nectargan-taker:runs", env=env).stdout == "not the core's runs\n"
    taker = {p["name"]: p for p in json.loads(cli("plugins", "list", "--json", env=env).stdout)}["taker"]
    assert taker["conflicts"] == ["command 'runs' is also added by the core: run this one as "
                                  "'nectargan nectargan-taker:runs'"]


def test_a_qualified_name_works_as_a_set_key_and_a_list_item(host_factory):
    registry = host_factory().registry
    config = load_config({"visualizers": ["nectargan-core:console"]},
                         ["visualizers.nectargan-core:console.every_logs=2", "callbacks=[toy:counter]"], registry)
    assert config.visualizers == {"nectargan-core:console": {"bar": "auto", "every_logs": 2}}
    assert config.callbacks == {"toy:counter": {}}
