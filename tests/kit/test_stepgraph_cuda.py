"""Real CUDA graphs (nectargan_core.stepgraph) on the kit's test trainer: the same training as eager steps.

Skipped without a GPU: the prepared GPU script (benchmarks/gpu_check.sh) runs
this file on an H100/H200. KitGanTrainer is a third-party-style trainer on
the TrainerKit that does nothing for graphs but declare ``graph_key`` for its
poisoned step: each test trains it once with graphs and once eagerly from the
same state and compares weights, optimizer state and logged losses.
"""

from __future__ import annotations

import json

from pathlib import Path

import pytest
import torch

import kitgan_plugin
from nectargan_core import Run
from nectargan_core.stepgraph import GraphDecision, StepGraphs

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a CUDA device")

#: MLP steps with the same kernels replay the same arithmetic; a little room for reduction order.
ATOL = 1e-5
#: A replayed Adam step reads its LR from a float32 device tensor (torch's kernels read a tensor LR as float32),
#: an eager step the Python float: with an LR that float32 holds exactly, and schedules of powers of two, both
#: read the same number, so what is compared is the capture itself. (0.01 is not exact in float32: the updates
#: then differ in their last bit, which BatchNorm's MLP grows to about 0.08 in 24 steps, like any rounding.)
LR = 2.0 ** -7


@pytest.fixture
def host(nectargan_plugin_host):
    return nectargan_plugin_host(kitgan_plugin)


def train(host, tmp_path: Path, name: str, graphs: bool, epochs: int = 3, nonfinite: str = "stop",
          capturable: bool = True, **kitgan):
    """Train kitgan on CUDA with the step captured (``graphs``) or eagerly.

    Both runs' optimizers use their capturable formulation from the first step
    (on CUDA it also runs eagerly): foreach and single-tensor Adam compute the
    same update in another order of operations when capturable, and Adam
    turns rounding differences in near-zero gradients into differences of the
    order of the learning rate (measured on an H200: 0.12 after 24 steps when
    only the graph run's captured steps were capturable), so only the same
    formulation can be compared this closely. The fused kernel has one
    formulation: graph and eager runs of it were equal to the bit.
    """
    config = {
        "trainer": "kitgan",
        "run": {"output_dir": str(tmp_path / "runs"), "name": name, "device": "cuda", "seed": 3},
        "loop": {"epochs": epochs, "log_every_steps": 1, "val_every_epochs": None, "nonfinite": nonfinite},
        "checkpoint": {"every_epochs": None, "save_last": False},
        "visualizers": [],
        "kitgan": {"samples": 32, "batch_size": 4, "lr": LR, **kitgan},
    }
    trainer = Run.create(config, host=host).trainer
    trainer.prepare()
    assert trainer.step_graphs.enabled, trainer.step_graphs.decision.text  # auto on CUDA: on
    for update in trainer.kit.updates:
        for group in update.optimizer.param_groups:
            group["capturable"] = capturable
    if not graphs:
        trainer.step_graphs = StepGraphs(trainer, GraphDecision(False, "eager reference"))
    trainer.fit()
    return trainer


def compare(a, b) -> float:
    worst = 0.0
    for name in ("generator", "discriminator"):
        for x, y in zip(a.stateful[name].state_dict().values(), b.stateful[name].state_dict().values()):
            if x.is_floating_point():
                worst = max(worst, (x - y).abs().max().item())
    for name in ("opt_g", "opt_d"):
        for sx, sy in zip(a.stateful[name].state_dict()["state"].values(),
                          b.stateful[name].state_dict()["state"].values()):
            assert float(sx["step"]) == float(sy["step"])
            worst = max(worst, (sx["exp_avg"] - sy["exp_avg"]).abs().max().item())
    return worst


def records(trainer) -> list[dict]:
    return [json.loads(line) for line in trainer.run_dir.metrics_file.read_text().splitlines() if line.strip()]


def losses(trainer):
    return [(r["step"], r["losses"]) for r in records(trainer) if r.get("kind") == "train"]


@pytest.mark.parametrize("implementation", ["fused", "foreach", "single"])
def test_graph_training_matches_eager(host, tmp_path, implementation):
    graphed = train(host, tmp_path, "graph", True, implementation=implementation, norm=True)
    eager = train(host, tmp_path, "eager", False, implementation=implementation, norm=True)
    runner = graphed.step_graphs
    assert runner.enabled and runner.replays >= graphed.global_step - 8, (runner.replays, runner.eager)
    worst = compare(graphed, eager)
    print(f"[graphs] kitgan {implementation}: {runner.replays} replays, {runner.eager} eager; max |diff| {worst:.3g}")
    assert worst <= ATOL
    for (s1, l1), (s2, l2) in zip(losses(graphed), losses(eager)):
        assert s1 == s2 and abs(l1["G"] - l2["G"]) <= ATOL and abs(l1["D"] - l2["D"]) <= ATOL


@pytest.mark.parametrize("implementation", ["fused", "foreach", "single"])
def test_step_unit_lr_schedule_replays_with_the_lr_read_on_the_device(host, tmp_path, implementation):
    """A per-step LR: Adam's captured step reads it from a device tensor, so the step replays with one capture."""
    options = dict(implementation=implementation, lr_decay=0.5, lr_unit="step", norm=True)
    graphed = train(host, tmp_path, "graph", True, **options)
    eager = train(host, tmp_path, "eager", False, **options)
    runner = graphed.step_graphs
    assert runner.enabled and runner.captures == 1 and runner.replays >= graphed.global_step - 4
    assert graphed.opt_g.param_groups[0]["lr"] == eager.opt_g.param_groups[0]["lr"]
    assert type(graphed.opt_g.param_groups[0]["lr"]) is float
    worst = compare(graphed, eager)
    print(f"[graphs] kitgan {implementation} step-unit LR: {runner.replays} replays, {runner.captures} capture; "
          f"max |diff| {worst:.3g}")
    assert worst <= ATOL


def test_epoch_unit_lr_schedule_needs_no_new_capture(host, tmp_path):
    graphed = train(host, tmp_path, "graph", True, epochs=4, implementation="fused", lr_decay=0.5, lr_unit="epoch")
    eager = train(host, tmp_path, "eager", False, epochs=4, implementation="fused", lr_decay=0.5, lr_unit="epoch")
    assert graphed.step_graphs.enabled and graphed.step_graphs.captures == 1
    assert graphed.step_graphs.replays > graphed.global_step // 2
    assert graphed.opt_g.param_groups[0]["lr"] == eager.opt_g.param_groups[0]["lr"]
    assert compare(graphed, eager) <= ATOL


@pytest.mark.parametrize("nan_in", ["inputs", "loss", "gradients"])
def test_nonfinite_skip_inside_the_graph(host, tmp_path, nan_in):
    options = dict(implementation="fused", nan_at_step=12, nan_in=nan_in, norm=True, nonfinite="skip")
    graphed = train(host, tmp_path, "graph", True, **options)
    eager = train(host, tmp_path, "eager", False, **options)
    assert graphed.step_graphs.enabled and graphed.step_graphs.replays > 0
    assert compare(graphed, eager) <= ATOL
    skips = [r.get("skipped_updates") for r in records(graphed)]
    assert skips == [r.get("skipped_updates") for r in records(eager)]
    if nan_in == "gradients":
        assert any(skips)


def test_fp16_grad_scaler_inside_the_graph(host, tmp_path):
    graphed = train(host, tmp_path, "graph", True, implementation="fused", fp16_scaler=True)
    eager = train(host, tmp_path, "eager", False, implementation="fused", fp16_scaler=True)
    assert graphed.step_graphs.replays > 0
    assert graphed.scaler_g.get_scale() == eager.scaler_g.get_scale()
    assert compare(graphed, eager) <= ATOL


def test_capture_makes_optimizers_capturable_only_while_capturing(host, tmp_path):
    trainer = train(host, tmp_path, "graph", True, epochs=1, implementation="foreach", capturable=False)
    groups = [g for u in trainer.kit.updates for g in u.optimizer.param_groups]
    assert trainer.step_graphs.replays > 0 and all(g["capturable"] is False for g in groups)
    trainer.kit.begin_capture()
    assert all(g["capturable"] is True for g in groups)
    assert all(isinstance(g["lr"], torch.Tensor) and g["lr"].device.type == "cuda" for g in groups)
    trainer.kit.end_capture()
    assert all(g["capturable"] is False for g in groups)
    assert all(type(g["lr"]) is float for g in groups)
    steps = [s["step"] for u in trainer.kit.updates for s in u.optimizer.state.values()]
    assert steps and all(s.device.type == "cuda" for s in steps)


def test_a_graph_run_resumes_from_its_checkpoints_as_if_never_stopped(host, tmp_path):
    """Checkpoints of a graph run (every 10 steps, mid-epoch included) resume into the same training: the
    resumed run warms up, captures anew and ends where the uninterrupted run ended."""
    config = {
        "trainer": "kitgan",
        "run": {"output_dir": str(tmp_path / "runs"), "name": "full", "device": "cuda", "seed": 3},
        "loop": {"epochs": 4, "log_every_steps": 1, "val_every_epochs": None},
        "checkpoint": {"every_epochs": None, "every_steps": 10, "keep_last": 20, "save_last": False},
        "visualizers": [],
        "kitgan": {"samples": 32, "batch_size": 4, "implementation": "fused", "norm": True, "lr": LR},
    }
    full = Run.create(config, host=host).fit()
    assert full.trainer.step_graphs.replays > 20 and full.trainer.global_step == 32
    checkpoints = full.trainer.run_dir.periodic_checkpoints()
    assert len(checkpoints) == 3
    for checkpoint in checkpoints:
        resumed = Run.resume(full.dir, checkpoint=checkpoint, host=host).fit()
        left = 32 - int(checkpoint.stem.rsplit("step", 1)[1])
        assert resumed.trainer.global_step == 32
        assert resumed.trainer.step_graphs.replays == max(0, left - 3)  # 3 warm-up steps, then replays
        worst = compare(resumed.trainer, full.trainer)
        print(f"[graphs] resumed from {checkpoint.name}: max |diff| {worst:.3g}")
        assert worst <= ATOL, checkpoint.name
