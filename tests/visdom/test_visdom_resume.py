"""A SIGKILLed and resumed run: each visdom window shows every point once."""

from __future__ import annotations

import json

import pytest

from support import killed_then_resumed, make_killer_dist
from visdom_helpers import series, wait_until


@pytest.mark.slow
def test_sigkill_then_resume_leaves_each_point_once(tmp_path, visdom_server):
    """Checkpoint at step 4 (epoch 2); killed after step 6, when step 5's point had reached the server."""
    site = make_killer_dist(tmp_path / "site")
    (tmp_path / "run.yaml").write_text(
        "trainer: toy\nrun: {device: cpu, output_dir: runs, name: vz}\nloop: {epochs: 3, log_every_steps: 1}\n"
        "checkpoint: {every_epochs: 1}\ntoy: {samples: 8, batch_size: 4, step_sleep: 1.0}\n"
        f"visualizers: {{visdom: {{port: {visdom_server.port}, env: vz_resume}}}}\ncallbacks: [sigkill]\n")
    run_dir = tmp_path / "runs" / "vz" / "version_0"
    killed, _ = killed_then_resumed(run_dir, ["-c", "run.yaml"], 6, env={"PYTHONPATH": str(site)}, cwd=tmp_path)

    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    train = [r["epoch_progress"] for r in records if r["kind"] == "train"]
    assert train == [0.5, 1.0, 1.5, 2.0, 2.5, 3.0]
    windows = wait_until(lambda: visdom_server.windows("vz_resume"), 10, "the windows")
    loss = series(windows["loss"])
    assert [x for x, _ in loss["loss"]] == [x for x, _ in loss["noise"]] == train
    assert [y for _, y in loss["loss"]] == pytest.approx([r["losses"]["loss"] for r in records
                                                          if r["kind"] == "train"], rel=1e-6)
    assert [x for x, _ in series(windows["val_mse"])["mse"]] == [1.0, 2.0, 3.0]
