"""docs/plugins/tutorial.md: its three plugins build, install, list, and train together as written."""

from __future__ import annotations

import click
import pytest

from nectargan_core import ConfigError, Run, load_config
from nectargan_core.config import load_file
from authoring_helpers import doc_files, pip_install_target, pytest_in
from support import ROOT, cli_runner, run_cli

PAGE = ROOT / "docs" / "plugins" / "tutorial.md"
DISTRIBUTIONS = ("nectargan-gdl", "nectargan-tinynet", "nectargan-summary")
SYNTH = "nectargan data synth data/synth --count 10 --size 32 --val 0.2 --test 0"


@pytest.fixture(scope="module")
def tutorial(tmp_path_factory):
    """The page's files written to an empty folder, the three plugins installed into a site folder."""
    tmp_path = tmp_path_factory.mktemp("tutorial")
    text = PAGE.read_text()
    for relative, body in doc_files(text).items():
        path = tmp_path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body)
    pip_install_target(tmp_path / "site", *(tmp_path / name for name in DISTRIBUTIONS))
    return tmp_path, text


def test_the_three_plugins_are_listed_loaded(tutorial):
    root, _ = tutorial
    listed = run_cli("plugins", "list", env={"PYTHONPATH": str(root / "site")})
    for plugin, distribution, part in [("gdl", "nectargan-gdl", "loss: gdl"),
                                       ("tinynet", "nectargan-tinynet", "model: tinynet"),
                                       ("summary", "nectargan-summary", "visualizer: epoch_summary")]:
        assert f"{plugin} ({distribution} 0.1.0) [loaded]\n" in listed.stdout
        assert f"provides: {part}\n" in listed.stdout


def test_the_loss_plugin_tests_pass(tutorial):
    root, _ = tutorial
    ran = pytest_in(root / "site", "nectargan-gdl", cwd=root)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "\n1 passed" in ran.stdout


def test_the_run_config_trains_with_all_three(tutorial, nectargan_plugin_host, monkeypatch):
    root, text = tutorial
    monkeypatch.chdir(root)
    monkeypatch.syspath_prepend(str(root / "site"))
    host = nectargan_plugin_host()
    assert f"\n{SYNTH}\n" in text
    cli = click.Group()
    host.add_commands(cli)
    made = cli_runner().invoke(cli, SYNTH.split()[1:])
    assert made.exit_code == 0, made.output

    run = Run.create("run.yaml", host=host).fit()
    assert run.dir.resolve() == root / "runs" / "tutorial" / "version_0"
    assert "G/gdl" in run.metrics("train")[0]["losses"]
    assert type(run.trainer.generator).__name__ == "TinyNet"
    rows = (run.dir / "summary.md").read_text().splitlines()
    assert rows[0].startswith("| epoch | ") and "| G/gdl |" in rows[0]
    assert [row.split(" | ")[0] for row in rows[2:]] == ["| 1", "| 2"]

    # Resumed after epoch 1 (as if killed after writing epoch 2's row): epoch 2's row goes, then comes again.
    summary = host.registry.get("visualizer", "epoch_summary").load()()
    summary.on_resume(trainer=type("T", (), {"run_dir": run.run_dir, "epochs_done": 1})())
    assert (run.dir / "summary.md").read_text().splitlines() == rows[:3]

    with pytest.raises(ConfigError, match="alpah"):
        load_config(load_file("run.yaml"), ["loss.add.gdl.options.alpah=2"], host.registry)
