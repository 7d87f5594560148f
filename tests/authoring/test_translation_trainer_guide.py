"""The authoring guide's third trainer (nectargan-hd), built as written on nectargan-translate's public API: it
installs, trains with its own metric choosing best.pt, and gets nectargan test, predict and export for free."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from authoring_helpers import doc_files, pip_install_target
from nectargan_core import load_checkpoint
from support import ROOT, run_cli

GUIDE = ROOT / "docs" / "plugins" / "authoring.md"
SECTION = "## An image-translation trainer on nectargan-translate"


def section() -> str:
    text = GUIDE.read_text()
    start = text.index(SECTION)
    return text[start:text.index("\n## ", start + len(SECTION))]


def commands() -> list[list[str]]:
    """The section's shell lines, as typed (comments dropped)."""
    return [shlex.split(line.split("#")[0]) for line in section().splitlines()
            if line.startswith(("pip ", "nectargan "))]


@pytest.fixture(scope="module")
def guide(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """The section's files in an empty folder, nectargan-hd installed into a site folder of its own."""
    root = tmp_path_factory.mktemp("hd")
    files = doc_files(section())
    assert set(files) == {"nectargan-hd/pyproject.toml", "nectargan-hd/nectargan_hd/__init__.py",
                          "nectargan-hd/nectargan_hd/plugin.py", "nectargan-hd/nectargan_hd/metrics.py",
                          "nectargan-hd/nectargan_hd/trainer.py", "hd.yaml"}
    for relative, body in files.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(body)
    pip_install_target(root / "site", root / "nectargan-hd")
    return root, {"PYTHONPATH": str(root / "site")}


def test_the_guide_s_commands_are_the_ones_this_test_runs():
    assert [command[:2] for command in commands()] == [
        ["pip", "install"], ["nectargan", "plugins"], ["nectargan", "data"], ["nectargan", "train"],
        ["nectargan", "test"], ["nectargan", "predict"], ["nectargan", "export"]]


@pytest.mark.slow
def test_the_guide_s_hd_trainer_trains_tests_predicts_and_exports_as_written(guide):
    root, env = guide
    _, listing, synth, train, test, predict, export = [command[1:] for command in commands()]

    listed = run_cli(*listing, env=env, cwd=root)
    assert "hd (nectargan-hd 1.0.0) [loaded]" in listed.stdout, listed.stdout
    assert "trainer: hd" in listed.stdout and "metric: edge_l1" in listed.stdout, listed.stdout

    assert run_cli(*synth, env=env, cwd=root).returncode == 0
    trained = run_cli(*train, env=env, cwd=root, timeout=600)
    assert trained.returncode == 0, trained.stderr
    run_dir = root / "runs" / "hd" / "version_0"
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    validation = [r["metrics"] for r in records if r.get("kind") == "val"]
    assert len(validation) == 2 and all(set(m) == {"l1", "edge_l1"} for m in validation), validation
    best = load_checkpoint(run_dir / "checkpoints" / "best.pt")
    edge = [m["edge_l1"] for m in validation]
    assert best["loop"]["best_value"] == pytest.approx(min(edge))  # the plugin's direction: lower is better
    assert best["global_step"] == 16 * (edge.index(min(edge)) + 1)  # 32 train pairs, batch 2: 16 steps an epoch
    state = best["state"]
    assert {"generator", "discriminator", "opt_g", "opt_d", "sched_g", "sched_d", "early_stopping"} <= set(state)
    assert len([k for k in state["discriminator"] if k.endswith(".weight")]) >= 2 * 3  # two PatchGANs of 3 convs
    assert (run_dir / "examples").is_dir() and any((run_dir / "examples").iterdir())

    tested = run_cli(*test, env=env, cwd=root, timeout=300)
    assert tested.returncode == 0, tested.stderr
    metrics_files = sorted(run_dir.rglob("metrics.json"))
    assert metrics_files, sorted(p.relative_to(run_dir).as_posix() for p in run_dir.rglob("*"))
    scores = json.loads(metrics_files[-1].read_text())
    assert "edge_l1" in json.dumps(scores) and "l1" in json.dumps(scores), scores

    predicted = run_cli(*predict, env=env, cwd=root, timeout=300)
    assert predicted.returncode == 0, predicted.stderr
    inputs = sorted((root / "data" / "shapes" / "test").glob("*.png"))
    outputs = sorted((root / "predicted").glob("*.png"))
    assert inputs and [p.name for p in outputs] == [p.name for p in inputs]

    exported = run_cli(*export, env=env, cwd=root, timeout=300)
    assert exported.returncode == 0, exported.stderr
    assert list((run_dir / "export").glob("*.pt")), sorted(p.name for p in (run_dir / "export").iterdir())
