"""``--resume`` refuses overrides that only act when a run starts (they would be recorded and do nothing)."""

from __future__ import annotations

import pytest

from support import run_cli


@pytest.mark.parametrize("key, why", [
    ("run.init_from", "weights to start from are loaded when a run starts"),
    ("run.name", "a run keeps the name of its folder"),
    ("run.output_dir", "a run keeps its folder"),
])
def test_resume_refuses_a_key_that_only_acts_at_the_start(tmp_path, key, why):
    run = tmp_path / "runs" / "r" / "version_0"
    run.mkdir(parents=True)
    (run / "config.yaml").write_text("trainer: toy\n")
    before = sorted(p.name for p in run.iterdir())
    result = run_cli("train", "--resume", str(run), "--set", f"{key}=x")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"error: --set {key}: {why}; --resume continues the run as it is (start a new run to change it)"]
    assert sorted(p.name for p in run.iterdir()) == before
