"""A SIGKILLed and resumed run: TensorBoard shows every point once, as an uninterrupted run would."""

from __future__ import annotations

import json

import pytest

from support import killed_then_resumed, make_killer_dist
from tensorboard_events import read_events, scalar_steps

CONFIG = """\
trainer: toy
run: {device: cpu, output_dir: runs, name: tb}
loop: {epochs: 3, log_every_steps: 1}
checkpoint: {every_epochs: 1}
toy: {samples: 8, batch_size: 4, step_sleep: 0.3}
visualizers: {tensorboard: {flush_secs: 30}}
callbacks: [sigkill]
"""


@pytest.mark.slow
def test_sigkill_then_resume_leaves_each_point_once(tmp_path):
    """Checkpoint at step 4 (epoch 2); killed after step 6, whose sleep gives the writer thread the time to
    put step 5's points in the file: the resumed run hides them and writes 5 and 6 once."""
    site = make_killer_dist(tmp_path / "site")
    (tmp_path / "run.yaml").write_text(CONFIG)
    run_dir = tmp_path / "runs" / "tb" / "version_0"
    killed_then_resumed(run_dir, ["-c", "run.yaml"], 6, env={"PYTHONPATH": str(site)}, cwd=tmp_path)

    events = read_events(run_dir / "tensorboard")
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in records if r["kind"] == "train"]
    assert [r["step"] for r in train] == [1, 2, 3, 4, 5, 6]
    assert scalar_steps(events, "loss") == [1, 2, 3, 4, 5, 6]
    assert [e.value for e in events.Scalars("loss")] == pytest.approx([r["losses"]["loss"] for r in train], rel=1e-6)
    assert scalar_steps(events, "epoch/loss") == scalar_steps(events, "val/mse") == [2, 4, 6]
