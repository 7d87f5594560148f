"""The docs are part of the product: they must match the code they describe."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from support import ROOT, run_cli
from nectargan_core import hookspecs
from nectargan_core.config import CheckpointSection, LoopSection, RunSection
from nectargan_core.builtin.console import ConsoleOptions

DOCS = ROOT / "docs"


@pytest.mark.parametrize("hook", hookspecs.REGISTRATION_HOOKS + hookspecs.RUN_HOOKS)
def test_every_hook_is_documented_with_its_exact_signature(hook):
    text = (DOCS / "hooks.md").read_text()
    assert f"### {hook}\n" in text
    assert f"\n{hookspecs.signature_of(hook)}\n" in text, hookspecs.signature_of(hook)


def test_hook_docs_name_no_hook_that_does_not_exist():
    text = (DOCS / "hooks.md").read_text()
    documented = set(re.findall(r"^### (\w+)$", text, re.M))
    assert documented == set(hookspecs.REGISTRATION_HOOKS + hookspecs.RUN_HOOKS)


@pytest.mark.parametrize("section,model", [("run", RunSection), ("loop", LoopSection),
                                           ("checkpoint", CheckpointSection), ("console", ConsoleOptions)])
def test_every_core_config_key_is_documented_with_its_default(section, model):
    text = (DOCS / "config.md").read_text()
    for name, field in model.model_fields.items():
        default = "null" if field.default is None else str(field.default).lower()
        assert f"| `{name}` | `{default}` |" in text, (section, name)


def test_every_command_is_documented():
    text = (DOCS / "cli.md").read_text()
    for command in ("plugins list", "plugins show", "config show", "config validate", "config schema",
                    "config init", "train", "runs", "plot", "report"):
        assert f"## `nectargan {command}`" in text


def doc_files(page: Path) -> dict[str, str]:
    """Files embedded in a page as ``<!-- file: PATH -->`` followed by a fenced block."""
    pattern = re.compile(r"<!-- file: (\S+) -->\n```\w*\n(.*?)```", re.S)
    return {path: body for path, body in pattern.findall(page.read_text())}


def test_plugin_guide_example_builds_installs_and_runs(tmp_path):
    files = doc_files(DOCS / "plugins" / "authoring.md")
    assert set(files) >= {"nectargan-timer/pyproject.toml", "nectargan-timer/nectargan_timer/plugin.py",
                          "nectargan-timer/nectargan_timer/timer.py"}
    for relative, body in files.items():
        path = tmp_path / "src" / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body)
    site = tmp_path / "site"
    isolation = [] if importlib.util.find_spec("setuptools") is None else ["--no-build-isolation"]
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", *isolation,
                    "--target", str(site), str(tmp_path / "src" / "nectargan-timer")],
                   check=True, capture_output=True, text=True, timeout=300)
    env = {"PYTHONPATH": str(site)}

    listed = run_cli("plugins", "list", env=env)
    assert "timer (nectargan-timer 1.0.0) [loaded]" in listed.stdout
    assert "provides: callback: step_timer" in listed.stdout

    bad = run_cli("train", "--trainer", "toy", "--set", "callbacks.step_timer.warmup=-1", env=env, cwd=tmp_path)
    assert bad.returncode == 2
    assert "callbacks: callback 'step_timer': warmup: Input should be greater than or equal to 0" in bad.stderr

    args = ["--set", "loop.epochs=2", "--set", "run.device=cpu", "--set", "callbacks.step_timer.warmup=0",
            "--set", "visualizers=[]"]
    ran = run_cli("train", "--trainer", "toy", *args, env=env, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    lines = [line for line in ran.stdout.splitlines() if line.startswith("step_timer:")]
    assert len(lines) == 2 and re.match(r"step_timer: epoch 2: [\d.]+ ms/step over 8 steps", lines[1])
    checkpoint = torch.load(next((tmp_path / "runs" / "run" / "version_0" / "checkpoints").glob("epoch0002*.pt")),
                            weights_only=True)
    assert checkpoint["plugins"]["step_timer"]["steps"] == 8

    resumed = run_cli("train", "--resume", str(tmp_path / "runs" / "run" / "version_0"),
                      "--set", "loop.epochs=3", env=env, cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert "step_timer: epoch 3:" in resumed.stdout and "over 12 steps" in resumed.stdout
