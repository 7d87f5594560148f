"""Two real distributions that register the same loss name, built and installed with `nectargan plugins install`.

The author's plugin (a loss, a visualizer and a command) works; a rival that
reuses the loss name arrives. Nothing of the author's plugin is disabled, the
install reports the conflict, a config naming the bare name is refused at
config time, and a qualified name trains with exactly the named loss.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
import yaml

from support import run_cli

PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "{dist}"
version = "{version}"
dependencies = ["nectargan-core"]

[project.entry-points.nectargan]
{plugin} = "{module}.plugin"

[tool.setuptools]
packages = ["{module}"]
"""

AUTHOR = {
    "plugin.py": """
        import click
        from nectargan_core import hookimpl
        from tv_helper import HELPER_VERSION  # from nectargan-tvhelper

        @hookimpl
        def register_losses(register):
            register("tp_tv", "tvauthor.losses:AbsError", description="mean absolute error")

        @hookimpl
        def register_visualizers(register):
            register("tp_csv", "tvauthor.losses:StepList")

        @click.command("tp-hello")
        def hello():
            click.echo(f"hello from tvauthor (helper {HELPER_VERSION})")

        @hookimpl
        def register_commands(cli):
            cli.add_command(hello)
        """,
    "losses.py": """
        from nectargan_core import hookimpl

        class AbsError:
            def __call__(self, prediction, target):
                return (prediction - target).abs().mean()

        class StepList:
            @hookimpl
            def on_log(self, trainer, record):
                with open(trainer.run_dir.path / "steps.txt", "a") as handle:
                    handle.write(f"{record['step']}\\n")
        """,
}

RIVAL = {
    "plugin.py": """
        from nectargan_core import hookimpl

        @hookimpl
        def register_losses(register):
            register("tp_tv", "tvrival.losses:Constant", description="always 42")
        """,
    "losses.py": """
        class Constant:
            def __call__(self, prediction, target):
                return (prediction - target).abs().mean() * 0 + 42.0
        """,
}


def helper(version: str, exported: bool) -> dict[str, str]:
    return {"plugin.py": "", "../tv_helper.py": f"HELPER_VERSION = '{version}'\n" if exported else "OTHER = 1\n"}


def distribution(root: Path, dist: str, plugin: str, module: str, files: dict[str, str], version: str = "1.0.0",
                 modules: tuple[str, ...] = ()) -> Path:
    folder = root / f"{dist}-{version}"
    text = PYPROJECT.format(dist=dist, version=version, plugin=plugin, module=module)
    if modules:
        text += f"py-modules = {json.dumps(list(modules))}\n"
    (folder / module).mkdir(parents=True)
    (folder / "pyproject.toml").write_text(text)
    (folder / module / "__init__.py").write_text("")
    for name, body in files.items():
        (folder / module / name).write_text(textwrap.dedent(body))
    return folder


def install(site: Path, folder: Path, *extra: str):
    return run_cli("plugins", "install", "--quiet", "--no-deps", "--no-build-isolation", "--target", str(site),
                   *extra, str(folder), env={"PYTHONPATH": str(site)}, timeout=300)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """The helper and the author's plugin installed; the rival built, not yet installed."""
    root = tmp_path_factory.mktemp("collide")
    site = root / "site"
    helper_v1 = distribution(root, "nectargan-tvhelper", "tvhelper", "tvhelper", helper("1", True),
                             modules=("tv_helper",))
    for folder in (helper_v1, distribution(root, "nectargan-tvauthor", "tvauthor", "tvauthor", AUTHOR)):
        done = install(site, folder)
        assert done.returncode == 0, done.stdout + done.stderr
    rival = distribution(root, "nectargan-tvrival", "tvrival", "tvrival", RIVAL, version="2.0.0")
    return root, site, rival


@pytest.mark.slow
def test_a_second_distribution_with_the_same_name_is_refused_never_substituted(world):
    root, site, rival = world
    env = {"PYTHONPATH": str(site)}
    installed = install(site, rival)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    assert installed.stdout == (
        "tvrival (nectargan-tvrival 2.0.0) [loaded]\n"
        "  provides: loss: tp_tv\n"
        "  conflict: loss 'tp_tv' is also provided by nectargan-tvauthor 1.0.0 (plugin 'tvauthor'): configs must "
        "name 'nectargan-tvrival:tp_tv' or 'nectargan-tvauthor:tp_tv'\n")
    assert installed.stderr == ("warning: installed; 1 name(s) shared with other plugins (see 'conflict:' above): "
                                "configs must name them as DISTRIBUTION:NAME\n")

    # The author's plugin keeps everything: its loss, its visualizer, its command.
    author = {p["name"]: p for p in json.loads(run_cli("plugins", "list", "--json", env=env).stdout)}["tvauthor"]
    assert (author["status"], author["components"], author["commands"]) == (
        "loaded", {"loss": ["tp_tv"], "visualizer": ["tp_csv"]}, ["tp-hello"])
    assert run_cli("tp-hello", env=env).stdout == "hello from tvauthor (helper 1)\n"

    (root / "bare.yaml").write_text("trainer: toy\nrun: {device: cpu}\ntoy: {loss: tp_tv, samples: 8}\n"
                                    "visualizers: [tp_csv]\n")
    refused = run_cli("train", "-c", "bare.yaml", env=env, cwd=root)
    assert refused.returncode == 2
    assert refused.stderr == (
        "error: bare.yaml: toy.loss: loss 'tp_tv' is provided by 2 plugins: nectargan-tvauthor 1.0.0 (plugin "
        "'tvauthor') and nectargan-tvrival 2.0.0 (plugin 'tvrival'); name one of them: 'nectargan-tvauthor:tp_tv' "
        "or 'nectargan-tvrival:tp_tv'\n")
    assert not (root / "runs").exists()

    trained = run_cli("train", "-c", "bare.yaml", "--set", "toy.loss=nectargan-tvauthor:tp_tv",
                      "--set", "loop.epochs=1", env=env, cwd=root)
    assert trained.returncode == 0, trained.stderr
    run_dir = root / "runs" / "run" / "version_0"
    train = [r for r in map(json.loads, (run_dir / "metrics.jsonl").read_text().splitlines()) if r["kind"] == "train"]
    assert train and all(r["losses"]["loss"] != 42.0 for r in train)  # the author's loss, not the rival's
    assert (run_dir / "steps.txt").read_text() == "".join(f"{r['step']}\n" for r in train)  # its visualizer ran
    provenance = yaml.safe_load((run_dir / "config.yaml").read_text())["provenance"]
    assert {"kind": "loss", "name": "tp_tv", "plugin": "tvauthor", "distribution": "nectargan-tvauthor",
            "version": "1.0.0"} in provenance


@pytest.mark.slow
def test_install_reports_a_plugin_that_it_broke(world):
    root, site, _ = world
    helper_v2 = distribution(root, "nectargan-tvhelper", "tvhelper", "tvhelper", helper("2", False),
                             version="2.0.0", modules=("tv_helper",))
    upgraded = install(site, helper_v2, "--upgrade")
    assert upgraded.returncode == 1
    assert "tvhelper (nectargan-tvhelper 2.0.0) [loaded]\n" in upgraded.stdout
    assert "no longer loads: tvauthor (nectargan-tvauthor 1.0.0)\n  error: import of 'tvauthor.plugin' failed: " \
           "ImportError: cannot import name 'HELPER_VERSION' from 'tv_helper'" in upgraded.stdout
    assert upgraded.stderr.endswith("error: installed, but a plugin does not load (see above)\n")
