"""The table of what the project's own distributions provide (nectargan_core.first_party) is what they register,
and a part or command of one that is not installed says which distribution to install."""

from __future__ import annotations

import os
from collections import defaultdict

import click
import pytest

from nectargan_core.errors import PluginError
from nectargan_core.first_party import PROVIDED
from nectargan_core.plugins import PluginHost
from support import run_cli


def test_the_table_is_what_the_installed_distributions_register():
    host = PluginHost({k: v for k, v in os.environ.items() if not k.startswith("NECTARGAN_")}).load_entry_points()
    registered: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for info in host.plugins.values():
        if info.distribution in PROVIDED:
            registered[info.distribution]["plugin"].add(info.name)
            for component in info.components:
                registered[info.distribution][component.kind].add(component.name)
    host.add_commands(click.Group("nectargan"))
    for info in host.plugins.values():
        if info.distribution in PROVIDED and info.commands:
            registered[info.distribution]["command"].update(info.commands)
    assert set(registered) == set(PROVIDED)
    for distribution, kinds in PROVIDED.items():
        assert {kind: set(names) for kind, names in kinds.items()} == dict(registered[distribution]), distribution


def test_a_missing_distribution_is_named_with_its_install_command(tmp_path):
    env = {"NECTARGAN_DISABLE_PLUGINS": "cyclegan,visdom"}
    trained = run_cli("train", "--trainer", "cyclegan", cwd=tmp_path, env=env)
    assert trained.returncode == 2, trained.stderr
    assert "unknown trainer 'cyclegan'; it comes with nectargan-cyclegan: pip install nectargan-cyclegan; " \
           "available: " in trained.stderr
    # pix2pix's default dataset, where nectargan-translate (a requirement of pix2pix) is missing
    dataset = run_cli("train", "--trainer", "pix2pix", cwd=tmp_path, env={"NECTARGAN_DISABLE_PLUGINS": "translate"})
    assert dataset.returncode == 2, dataset.stderr
    assert "unknown dataset 'paired'; it comes with nectargan-translate: pip install nectargan-translate; " \
           "available: none installed" in dataset.stderr, dataset.stderr
    with pytest.raises(PluginError) as caught:  # a host where nectargan-cyclegan is not installed at all
        PluginHost({}).get("nectargan-cyclegan")
    assert str(caught.value) == ("no plugin named 'nectargan-cyclegan'; it comes with nectargan-cyclegan: pip install "
                                 "nectargan-cyclegan; see 'nectargan plugins list --all'")
    served = run_cli("visdom", "serve", cwd=tmp_path, env=env)
    assert (served.returncode, served.stderr) == (2, "error: No such command 'visdom' (it comes with "
                                                     "nectargan-visdom: pip install nectargan-visdom) (see: nectargan "
                                                     "--help)\n")


def test_a_checkpoint_of_a_trainer_not_installed_names_what_to_install():
    """test, predict and export of a CycleGAN run said 'install the plugin that provides it' without naming it."""
    from nectargan_core.registry import Registry

    registry = Registry()
    assert registry.install_advice("trainer", "cyclegan") == \
        "it comes with nectargan-cyclegan: pip install nectargan-cyclegan"
    assert registry.install_advice("trainer", "nectargan-cyclegan:cyclegan") == \
        "it comes with nectargan-cyclegan: pip install nectargan-cyclegan"
    assert registry.install_advice("trainer", "someone_elses") == \
        "install the plugin that provides it (nectargan plugins list shows the trainers)"
