"""`nectargan plugins new` for every kind: render, build, install, list, run its own tests, use it by name."""

from __future__ import annotations

import csv
import json

import pytest
import yaml

from nectargan_core.cli.plugins_cmd import plugins_group
from nectargan_core.scaffold import KINDS
from authoring_helpers import pip_install_target, pytest_in
from support import cli_runner, killed_then_resumed, make_killer_dist, run_cli

#: What `plugins list --json` must show for each kind's example part.
COMPONENTS = {kind: {kind: [f"kit_{kind}"]} for kind in KINDS if kind != "command"} | {"command": {}}


@pytest.fixture(scope="module")
def kit(tmp_path_factory):
    """One scaffold per kind (plugin ``kit_<kind>``), all installed into one site folder."""
    root = tmp_path_factory.mktemp("kit")
    folders = []
    for kind in KINDS:
        made = cli_runner().invoke(plugins_group, ["new", f"kit_{kind}", "--kind", kind, "--dir", str(root / "src")])
        assert made.exit_code == 0, made.output
        folders.append(root / "src" / f"nectargan-kit-{kind}")
    pip_install_target(root / "site", *folders)
    return root, {"PYTHONPATH": str(root / "site")}


def test_every_kind_is_listed_loaded_with_its_part(kit):
    root, env = kit
    listed = run_cli("plugins", "list", "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    plugins = {entry["name"]: entry for entry in json.loads(listed.stdout)}
    for kind in KINDS:
        entry = plugins[f"kit_{kind}"]
        assert (entry["status"], entry["distribution"], entry["version"]) == \
            ("loaded", f"nectargan-kit-{kind}", "0.1.0"), entry
        assert entry["components"] == COMPONENTS[kind]
    assert plugins["kit_command"]["hooks"] == ["register_commands"]


def test_generated_tests_pass_with_the_core_pytest_fixtures(kit):
    root, env = kit
    tests = [str(root / "src" / f"nectargan-kit-{kind}" / "tests") for kind in KINDS]
    ran = pytest_in(root / "site", *tests, cwd=root)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "\n14 passed" in ran.stdout, ran.stdout


def test_toy_run_uses_the_new_loss_and_visualizer_and_command(kit):
    root, env = kit
    settings = ["toy.loss.name=kit_loss", "toy.loss.eps=0.01", "visualizers=[kit_visualizer]", "loop.epochs=2",
                "loop.log_every_steps=2", "run.device=cpu"]
    ran = run_cli("train", "--trainer", "toy", *(arg for s in settings for arg in ("--set", s)), env=env, cwd=root)
    assert ran.returncode == 0, ran.stderr
    run_dir = root / "runs" / "run" / "version_0"
    assert yaml.safe_load((run_dir / "config.yaml").read_text())["toy"]["loss"] == {"name": "kit_loss", "eps": 0.01}
    train = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in train if r["kind"] == "train"]
    with open(run_dir / "losses.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [int(row["step"]) for row in rows] == [r["step"] for r in train] == [2, 4, 6, 8]
    assert [float(row["loss"]) for row in rows] == pytest.approx([r["losses"]["loss"] for r in train])

    shown = run_cli("kit-command", str(run_dir), env=env)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith("step 8 (epoch 2)\n") and "  loss: " in shown.stdout


@pytest.mark.slow
def test_the_generated_visualizer_keeps_each_row_once_after_a_sigkill(kit, tmp_path):
    """Checkpoint at step 4; killed after step 6, when step 5's row was written: the resume drops it."""
    root, env = kit
    killer = make_killer_dist(tmp_path / "killer")
    env = {"PYTHONPATH": f"{env['PYTHONPATH']}:{killer}"}
    settings = ["visualizers=[kit_visualizer]", "callbacks=[sigkill]", "loop.epochs=3", "loop.log_every_steps=1",
                "run.device=cpu", "run.output_dir=runs", "toy.samples=8", "toy.batch_size=4"]
    run_dir = tmp_path / "runs" / "run" / "version_0"
    killed, _ = killed_then_resumed(run_dir, ["--trainer", "toy", *(a for s in settings for a in ("--set", s))], 6,
                                    env=env, cwd=tmp_path)
    with open(run_dir / "losses.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    train = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in train if r["kind"] == "train"]
    assert [int(row["step"]) for row in rows] == [r["step"] for r in train] == [1, 2, 3, 4, 5, 6]
    assert [float(row["loss"]) for row in rows] == pytest.approx([r["losses"]["loss"] for r in train])


def test_pix2pix_run_uses_the_new_generator(kit, monkeypatch, nectargan_plugin_host, tiny_config,
                                            tiny_paired_dataset, run_training):
    root, env = kit
    monkeypatch.syspath_prepend(env["PYTHONPATH"])
    config = tiny_config(
        "pix2pix",
        data={"root": str(tiny_paired_dataset), "load_size": 32, "crop_size": 32, "num_workers": 0, "batch_size": 4},
        models={"generator": {"name": "kit_model", "width": 4, "blocks": 1}, "discriminator": {"ndf": 4}},
        validation={"metrics": ["l1"]},
        examples={"every_epochs": None},
    )
    result = run_training(config, host=nectargan_plugin_host())
    generator = yaml.safe_load((result.dir / "config.yaml").read_text())["models"]["generator"]
    assert generator == {"name": "kit_model", "in_channels": 3, "out_channels": 3, "width": 4, "blocks": 1}
    assert [r["step"] for r in result.metrics if r["kind"] == "train"] == [1, 2]
    assert list((result.dir / "checkpoints").glob("epoch0001*.pt"))


def test_pix2pix_batches_the_new_dataset_by_its_batch_size_option(kit, monkeypatch, nectargan_plugin_host,
                                                                  tiny_config, run_training):
    root, env = kit
    monkeypatch.syspath_prepend(env["PYTHONPATH"])
    config = tiny_config("pix2pix", data={"name": "kit_dataset", "count": 6, "size": 32, "batch_size": 4},
                         validation={"metrics": ["l1"]}, examples={"every_epochs": None})
    result = run_training(config, host=nectargan_plugin_host())
    assert [r["step"] for r in result.metrics if r["kind"] == "train"] == [1, 2]  # 6 pairs in batches of 4


@pytest.mark.parametrize("name", ["Bad", "has-dash", "1st", "", "a" * 41, "class"])
def test_new_refuses_a_bad_name(tmp_path, name):
    result = cli_runner().invoke(plugins_group, ["new", name, "--dir", str(tmp_path)], standalone_mode=False,
                                catch_exceptions=True)
    assert type(result.exception).__name__ == "ScaffoldError"
    assert "lowercase letters, digits and underscores" in str(result.exception)
    assert not list(tmp_path.iterdir())


def test_new_refuses_to_overwrite_a_folder(tmp_path):
    (tmp_path / "nectargan-taken").mkdir()
    (tmp_path / "nectargan-taken" / "keep.txt").write_text("mine")
    made = run_cli("plugins", "new", "taken", "--dir", str(tmp_path))
    assert made.returncode == 1
    assert made.stderr == f"error: {tmp_path / 'nectargan-taken'} already exists; choose another name or --dir\n"
    assert [p.name for p in (tmp_path / "nectargan-taken").iterdir()] == ["keep.txt"]


def test_a_trainer_may_not_shadow_a_core_config_section(tmp_path):
    result = cli_runner().invoke(plugins_group, ["new", "loop", "--kind", "trainer", "--dir", str(tmp_path)],
                                standalone_mode=False)
    assert "its config section would replace the core's" in str(result.exception)
    assert not list(tmp_path.iterdir())
