"""The step runner (nectargan_core.stepgraph) on a CPU: the mode it chooses and why, and its capture logic.

Real CUDA graphs need a GPU (tests/kit/test_stepgraph_cuda.py, run by the
prepared GPU script). Here the CUDA graph API is replaced by a recording fake
whose capture runs the step once, as capture does with Python, and whose
replay runs nothing, as a replay runs no Python: what the runner does around
them (warm-up, keys, static inputs, deferred schedules, copies of outputs,
re-captures, giving up) is checked on the kit's test trainer.
"""

from __future__ import annotations

import contextlib

from pathlib import Path

import pytest
import torch

import kitgan_plugin
from nectargan_core import Run
from nectargan_core.errors import ConfigError, TrainingError
from nectargan_core.graphmode import WARMUP_STEPS, GraphDecision, decide, planned
from nectargan_core.stepgraph import (MAX_GRAPHS, MAX_GRAPHS_PER_SHAPE, MAX_RECAPTURES, StepGraphs, batch_signature,
                                      clone_outputs, optimizer_key)


# -- the decision ------------------------------------------------------------------
SAFE = dict(device_type="cuda", distributed=False, accumulate=1, on_kit=True, compiled=False)


def test_auto_captures_a_safe_run():
    decision = decide("auto", **SAFE)
    assert decision.enabled and decision.text.startswith("on: ")
    assert f"{WARMUP_STEPS} warm-up steps" in decision.reason


@pytest.mark.parametrize("change, words", [
    ({"device_type": "cpu"}, "need a CUDA device (this run trains on cpu)"),
    ({"distributed": True}, "distributed run"),
    ({"accumulate": 4}, "gradient accumulation"),
    ({"on_kit": False}, "does not use the TrainerKit"),
    ({"compiled": True}, "precision.compile is on"),
])
def test_auto_runs_eagerly_where_capture_is_not_safe_and_on_refuses(change, words):
    decision = decide("auto", **{**SAFE, **change})
    assert not decision.enabled and words in decision.reason and decision.text.startswith("off: ")
    with pytest.raises(ConfigError) as err:
        decide("on", **{**SAFE, **change})
    message = str(err.value)
    assert message.startswith("precision.cuda_graphs=on: ") and words in message and "\n" not in message
    assert "use auto" in message


def test_off_is_off_and_unknown_modes_are_refused():
    assert decide("off", **SAFE) == GraphDecision(False, "precision.cuda_graphs is off")
    with pytest.raises(ConfigError, match="'sometimes' is not one of auto, on, off"):
        decide("sometimes", **SAFE)


def test_planned_reads_the_config_and_never_raises():
    class Precision:
        cuda_graphs, compile = "on", "off"

    class Config:
        precision = Precision()

    assert planned(Config(), "cuda") and not planned(Config(), "cpu")  # "on" on a CPU: no error, not planned
    assert not planned(Config(), "cuda", world_size=2) and not planned(Config(), "cuda", accumulate=2)
    Precision.compile = "default"
    assert not planned(Config(), "cuda")
    assert planned(object(), "cuda")  # a config without precision.cuda_graphs: auto


# -- the pieces of a key and of a replay -----------------------------------------------
def test_batch_signature_tells_shapes_dtypes_and_structure_apart():
    a = {"A": torch.zeros(2, 3, 8, 8), "B": torch.zeros(2, 3, 8, 8), "path": ["x", "y"]}
    same = {"A": torch.ones(2, 3, 8, 8), "B": torch.ones(2, 3, 8, 8), "path": ["p", "q"]}
    assert batch_signature(a) == batch_signature(same)  # values and names do not matter
    short = {**a, "A": torch.zeros(1, 3, 8, 8), "B": torch.zeros(1, 3, 8, 8)}
    half = {**a, "A": torch.zeros(2, 3, 8, 8, dtype=torch.float16)}
    strided = {**a, "A": torch.zeros(2, 8, 8, 3).permute(0, 3, 1, 2)}
    assert len({batch_signature(b) for b in (a, short, half, strided)}) == 4


def test_optimizer_key_changes_with_the_learning_rate_only():
    param = torch.nn.Parameter(torch.zeros(3))
    opt = torch.optim.Adam([param], lr=0.1)
    before = optimizer_key([opt])
    opt.param_groups[0]["capturable"] = True  # set by the kit while capturing: not a setting of the step
    assert optimizer_key([opt]) == before
    opt.param_groups[0]["lr"] = 0.05
    assert optimizer_key([opt]) != before  # parameters on the CPU: no captured step reads a device LR
    hash(optimizer_key([opt]))


def on_any_device(monkeypatch):
    """Let CPU parameters stand for CUDA ones in kit.reads_device_lr (the fake graph runs the step on the CPU)."""
    import nectargan_core.kit as kit

    real = kit.reads_device_lr
    monkeypatch.setattr(kit, "reads_device_lr", lambda optimizer, group: real(
        optimizer, {**group, "params": [p.to("meta") for p in group["params"]]}))


def test_an_adam_learning_rate_read_on_the_device_is_no_part_of_the_key(monkeypatch):
    on_any_device(monkeypatch)
    params = [torch.nn.Parameter(torch.zeros(3)) for _ in range(2)]
    adam, sgd = torch.optim.Adam([params[0]], lr=0.1), torch.optim.SGD([params[1]], lr=0.1)
    before = optimizer_key([adam, sgd])
    adam.param_groups[0]["lr"] = 0.05
    assert optimizer_key([adam, sgd]) == before
    adam.param_groups[0]["betas"] = (0.5, 0.999)  # baked into the captured step
    assert optimizer_key([adam, sgd]) != before
    before = optimizer_key([adam, sgd])
    sgd.param_groups[0]["lr"] = 0.05  # SGD has no capturable mode: its LR is a number in the step
    assert optimizer_key([adam, sgd]) != before


def test_clone_outputs_copies_every_tensor_and_keeps_the_rest():
    outputs = {"G/l1": torch.tensor(1.5), "D/gan": torch.tensor(0.25), "image": torch.ones(2, 2), "count": 3,
               "half": torch.tensor(2.0, dtype=torch.float16)}
    copied = clone_outputs(outputs)
    assert set(copied) == set(outputs) and copied["count"] == 3
    for key in ("G/l1", "D/gan", "image", "half"):
        assert torch.equal(copied[key], outputs[key]) and copied[key].data_ptr() != outputs[key].data_ptr()
    outputs["G/l1"].fill_(9.0)  # the next replay overwrites the captured outputs: the copies keep their values
    assert copied["G/l1"].item() == 1.5


# -- the runner, on a fake CUDA graph API -------------------------------------------------
class FakeGraph:
    made: list["FakeGraph"] = []

    def __init__(self):
        self.replays = 0
        FakeGraph.made.append(self)

    def replay(self):
        self.replays += 1


class FakeStream:
    def __init__(self, device=None):
        pass

    def wait_stream(self, other):
        pass


@pytest.fixture
def fake_cuda(monkeypatch):
    """torch.cuda's graph API as a recorder: capture runs the Python once; replay runs nothing."""
    FakeGraph.made = []
    fail = {"with": None}

    def capture_end(self):
        if fail["with"] is not None:
            raise fail["with"]

    FakeGraph.capture_begin = lambda self, capture_error_mode=None: None
    FakeGraph.capture_end = capture_end
    monkeypatch.setattr(torch.cuda, "CUDAGraph", FakeGraph)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    monkeypatch.setattr(torch.cuda, "Stream", FakeStream)
    monkeypatch.setattr(torch.cuda, "stream", lambda s: contextlib.nullcontext())
    monkeypatch.setattr(torch.cuda, "current_stream", lambda *a: FakeStream())
    return fail


def kitgan_trainer(host, tmp_path: Path, **kitgan):
    config = {
        "trainer": "kitgan",
        "run": {"output_dir": str(tmp_path / "runs"), "device": "cpu", "seed": 3},
        "loop": {"epochs": 1, "log_every_steps": 1, "val_every_epochs": None},
        "checkpoint": {"every_epochs": None, "save_last": False},
        "visualizers": [],
        "kitgan": {"implementation": "single", **kitgan},  # the fake runs nothing: no capturable kernel needed
    }
    trainer = Run.create(config, host=host).trainer
    trainer.prepare()
    return trainer


@pytest.fixture
def host(nectargan_plugin_host):
    return nectargan_plugin_host(kitgan_plugin)


def batches(trainer, n):
    loader = iter(trainer.train_loader)
    return [next(loader) for _ in range(n)]


def test_a_cpu_run_steps_eagerly_and_says_nothing_about_graphs(host, tmp_path):
    trainer = kitgan_trainer(host, tmp_path)
    assert trainer.step_graphs.decision == decide("auto", device_type="cpu", distributed=False, accumulate=1,
                                                  on_kit=True)
    assert "cuda graphs" not in trainer.describe()  # a CPU run has no such row
    trainer.fit()
    assert trainer.step_graphs.eager == trainer.global_step > 0 and trainer.step_graphs.replays == 0


def test_warm_up_then_one_capture_then_replays_into_the_static_inputs(host, tmp_path, fake_cuda):
    trainer = kitgan_trainer(host, tmp_path, samples=16, batch_size=2)
    runner = StepGraphs(trainer, GraphDecision(True, "test"))
    data = batches(trainer, 8)
    outputs = []
    for i, batch in enumerate(data):
        outputs.append(runner(batch, i))
        trainer.global_step += 1
    assert runner.eager == WARMUP_STEPS and len(FakeGraph.made) == 1
    assert runner.replays == len(data) - WARMUP_STEPS and FakeGraph.made[0].replays == runner.replays
    captured = next(iter(runner.graphs.values()))
    for static, given in zip(captured.inputs, data[-1]):  # the last batch was copied into the capture's buffers
        assert torch.equal(static, given) and static.data_ptr() != given.data_ptr()
    replayed = outputs[-2:]
    assert all(set(o) == set(replayed[0]) for o in replayed)  # the step's keys, every time
    assert replayed[0]["G"].data_ptr() != replayed[1]["G"].data_ptr()  # copies, not the static outputs


def test_a_new_shape_warms_up_and_is_captured_on_its_own(host, tmp_path, fake_cuda):
    trainer = kitgan_trainer(host, tmp_path, samples=16, batch_size=2)
    runner = StepGraphs(trainer, GraphDecision(True, "test"))
    full = batches(trainer, 1)[0]
    short = [t[:1] for t in full]
    for i in range(WARMUP_STEPS + 2):
        runner(full, i)
    for i in range(WARMUP_STEPS + 2):
        runner(short, i)
    assert len(runner.graphs) == 2 and runner.eager == 2 * WARMUP_STEPS and runner.replays == 4
    runner(full, 0)  # the first graph is still there
    assert len(FakeGraph.made) == 2 and runner.replays == 5


def test_a_changed_learning_rate_is_a_new_capture_and_graphs_are_bounded(host, tmp_path, fake_cuda):
    trainer = kitgan_trainer(host, tmp_path, samples=16, batch_size=2)
    runner = StepGraphs(trainer, GraphDecision(True, "test"))
    batch = batches(trainer, 1)[0]
    optimizer = trainer.kit.updates[0].optimizer
    for i in range(WARMUP_STEPS + 1):
        runner(batch, i)
    for change in range(MAX_GRAPHS + 1):  # one new learning rate per "epoch", many steps each
        optimizer.param_groups[0]["lr"] *= 0.5
        for i in range(3):
            runner(batch, i)
        trainer.global_step += RECAPTURE_GAP
    # each new learning rate is one eager step, then a capture; the graph of the one before last goes (two per shape)
    assert len(FakeGraph.made) == MAX_GRAPHS + 2 and len(runner.graphs) == MAX_GRAPHS_PER_SHAPE and runner.enabled
    assert runner.eager == WARMUP_STEPS + MAX_GRAPHS + 1
    assert runner.replays == 1 + (MAX_GRAPHS + 1) * 2  # a capture replays at once for its own batch


RECAPTURE_GAP = 100  # steps between the learning-rate changes above: captures far apart are fine


def test_adam_reads_its_learning_rate_on_the_device_so_a_new_one_needs_no_capture(host, tmp_path, fake_cuda,
                                                                                  monkeypatch):
    on_any_device(monkeypatch)
    trainer = kitgan_trainer(host, tmp_path, samples=16, batch_size=2)
    runner = StepGraphs(trainer, GraphDecision(True, "test"))
    batch = batches(trainer, 1)[0]
    groups = [g for u in trainer.kit.updates for g in u.optimizer.param_groups]
    seen = []
    FakeGraph.capture_begin = lambda self, capture_error_mode=None: seen.append([g["lr"] for g in groups])
    for i in range(WARMUP_STEPS + 1):
        runner(batch, i)
    assert runner.captures == 1 and len(seen) == 1
    device_lrs = seen[0]  # what the captured step read: tensors holding the numbers
    assert all(isinstance(t, torch.Tensor) and t.dtype == torch.float32 for t in device_lrs)
    f32 = torch.tensor(0.01).item()  # float32, as torch's fused kernels read a tensor LR
    assert [t.item() for t in device_lrs] == [f32, f32] and all(type(g["lr"]) is float for g in groups)
    for step in range(MAX_RECAPTURES + 4):  # a new LR at every step: no new key, no giving up
        groups[0]["lr"] *= 0.5
        runner(batch, step)
        trainer.global_step += 1
        assert device_lrs[0].item() == torch.tensor(groups[0]["lr"]).item() and device_lrs[1].item() == f32
    assert runner.enabled and runner.captures == 1 and runner.replays == MAX_RECAPTURES + 5
    assert runner.eager == WARMUP_STEPS
    # checkpoints and eager steps see numbers: the state dict is that of an eager run
    saved = trainer.kit.updates[0].optimizer.state_dict()["param_groups"][0]
    assert saved["lr"] == groups[0]["lr"] and type(saved["lr"]) is float
    # a new shape is a new capture that reads the same device LRs, holding the LR set during its warm-up
    short = [t[:1] for t in batch]
    for i in range(WARMUP_STEPS + 1):
        groups[1]["lr"] = 0.5 ** (i + 1)
        runner(short, i)
    assert runner.captures == 2 and [t is u for t, u in zip(seen[1], device_lrs)] == [True, True]
    assert device_lrs[1].item() == 0.5 ** (WARMUP_STEPS + 1)


def test_optimizer_state_loaded_anew_is_a_new_capture(host, tmp_path, fake_cuda, monkeypatch):
    """load_state_dict makes new param groups and state tensors: a graph of the old ones is not replayed."""
    on_any_device(monkeypatch)
    trainer = kitgan_trainer(host, tmp_path, samples=16, batch_size=2)
    runner = StepGraphs(trainer, GraphDecision(True, "test"))
    batch = batches(trainer, 1)[0]
    for i in range(WARMUP_STEPS + 2):
        runner(batch, i)
    assert runner.captures == 1 and runner.replays == 2
    optimizer = trainer.kit.updates[0].optimizer
    state = optimizer.state_dict()
    state["param_groups"][0]["lr"] = 0.001
    optimizer.load_state_dict(state)
    runner(batch, 0)  # a new key: one eager step, then its capture reads the loaded LR
    runner(batch, 1)
    assert runner.eager == WARMUP_STEPS + 1 and runner.captures == 2
    assert trainer.kit._device_lrs[id(optimizer.param_groups[0])][1].item() == torch.tensor(0.001).item()


def test_a_step_unit_schedule_of_adam_replays_and_steps_after_every_replay(host, tmp_path, fake_cuda,
                                                                           monkeypatch):
    on_any_device(monkeypatch)
    trainer = kitgan_trainer(host, tmp_path, samples=16, batch_size=2, lr_decay=0.9, lr_unit="step")
    runner = StepGraphs(trainer, GraphDecision(True, "test"))
    batch = batches(trainer, 1)[0]
    steps = WARMUP_STEPS + 3 * MAX_RECAPTURES
    read = []
    real = trainer.kit.load_learning_rates

    def load():
        real()
        read.append(trainer.kit._device_lrs[id(trainer.opt_g.param_groups[0])][1].item())
    monkeypatch.setattr(trainer.kit, "load_learning_rates", load)
    for i in range(steps):
        runner(batch, i)
        trainer.global_step += 1
    assert runner.enabled and runner.captures == 1 and runner.replays == steps - WARMUP_STEPS
    assert trainer.sched_g.last_epoch == steps
    # each replay reads the LR the schedule set after the step before it
    expected = [torch.tensor(0.01 * 0.9 ** k).item() for k in range(WARMUP_STEPS, steps)]
    assert read == pytest.approx(expected, rel=1e-6)


def test_a_key_that_changes_every_step_gives_up_graphs_with_one_line(host, tmp_path, fake_cuda, capsys):
    trainer = kitgan_trainer(host, tmp_path, samples=16, batch_size=2)
    runner = StepGraphs(trainer, GraphDecision(True, "test"))
    batch = batches(trainer, 1)[0]
    optimizer = trainer.kit.updates[0].optimizer
    for i in range(WARMUP_STEPS):
        runner(batch, i)
    for i in range(MAX_RECAPTURES + 3):  # a per-step LR schedule
        optimizer.param_groups[0]["lr"] *= 0.9
        runner(batch, i)
        trainer.global_step += 1
    # every key is new: warmed up eagerly, never captured, until the runner says it gives up
    assert not runner.enabled and len(FakeGraph.made) == 0 and not runner.graphs
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("warning: precision.cuda_graphs: the step changed")
    assert "training goes on eagerly" in err[0]
    eager = runner.eager
    runner(batch, 0)
    assert runner.eager == eager + 1


def test_step_unit_schedules_are_stepped_after_every_replay_not_in_the_graph(host, tmp_path, fake_cuda):
    # decay 1.0: the scheduler steps every step but the learning rate (part of the key) stays, so steps replay
    trainer = kitgan_trainer(host, tmp_path, samples=16, batch_size=2, lr_decay=1.0, lr_unit="step")
    runner = StepGraphs(trainer, GraphDecision(True, "test"))
    schedulers = [u.scheduler for u in trainer.kit.updates if u.scheduler is not None]
    assert len(schedulers) == 1
    batch = batches(trainer, 1)[0]
    steps = WARMUP_STEPS + 4
    for i in range(steps):
        runner(batch, i)
    assert all(s.last_epoch == steps for s in schedulers)  # once per step, captured or not
    assert runner.replays == 4


def test_a_failed_capture_stops_the_run_with_one_line_and_leaves_the_kit_clean(host, tmp_path, fake_cuda):
    """torch's allocator and RNG stay in capture state after a failed capture: the run stops, in one line."""
    trainer = kitgan_trainer(host, tmp_path, samples=16, batch_size=2)
    runner = StepGraphs(trainer, GraphDecision(True, "test"))
    batch = batches(trainer, 1)[0]
    for i in range(WARMUP_STEPS):
        runner(batch, i)
    fake_cuda["with"] = RuntimeError("CUDA error: operation not permitted when stream is capturing\nmore")
    with pytest.raises(TrainingError) as err:
        runner(batch, 0)
    assert str(err.value) == ("precision.cuda_graphs: capturing the training step failed (CUDA error: operation not "
                              "permitted when stream is capturing); set precision.cuda_graphs=off for this run (a "
                              "step that reads a value back to the host, or an optimizer without a capturable mode, "
                              "cannot be captured)")
    assert all(not u.pending and u.optimizer.param_groups[0].get("capturable", False) is False
               for u in trainer.kit.updates) and trainer.kit.current_step is None and trainer.kit.active is None


def test_a_new_key_warms_up_once_before_its_capture(host, tmp_path, fake_cuda):
    """A loss switched on by its schedule (a new graph_key) makes its state eagerly, not inside a graph."""
    trainer = kitgan_trainer(host, tmp_path, samples=16, batch_size=2)
    runner = StepGraphs(trainer, GraphDecision(True, "test"))
    batch = batches(trainer, 1)[0]
    keys = iter([0] * (WARMUP_STEPS + 2) + [1] * 3)
    trainer.graph_key = lambda batch_idx: next(keys)  # the test's own key sequence
    for i in range(WARMUP_STEPS + 5):
        runner(batch, i)
    assert runner.eager == WARMUP_STEPS + 1 and len(FakeGraph.made) == 2 and runner.replays == 4


@pytest.mark.parametrize("change, reason", [
    ({"implementation": "foreach"}, "loop.nonfinite: skip with a non-fused Adam reads a flag on the host"),
    ({"implementation": "single"}, "loop.nonfinite: skip with a non-fused Adam reads a flag on the host"),
    ({"fp16_scaler": True}, "fp16's GradScaler reads a flag on the host with a non-fused Adam"),
])
def test_what_would_read_the_host_is_known_before_any_capture(host, tmp_path, change, reason):
    from nectargan_core.stepgraph import uncapturable

    nonfinite = "skip" if "implementation" in change else "stop"
    config = {
        "trainer": "kitgan",
        "run": {"output_dir": str(tmp_path / "runs"), "device": "cpu", "seed": 3},
        "loop": {"epochs": 1, "val_every_epochs": None, "nonfinite": nonfinite},
        "checkpoint": {"every_epochs": None, "save_last": False}, "visualizers": [],
        "kitgan": {"implementation": "single", **change},
    }
    trainer = Run.create(config, host=host).trainer
    trainer.prepare()
    reasons = uncapturable(trainer, trainer.kit and [trainer.kit])
    assert any(r.startswith(reason) for r in reasons), reasons
    assert decide("auto", **SAFE, other=tuple(reasons)).reason == reasons[0]


def test_the_kit_leaves_cpu_optimizers_as_they_are_and_drops_a_failed_capture(host, tmp_path):
    trainer = kitgan_trainer(host, tmp_path, implementation="foreach")
    kit = trainer.kit
    kit.begin_capture()  # CPU parameters: no capturable mode (tests/kit/test_stepgraph_cuda.py checks CUDA)
    groups = [g for u in kit.updates for g in u.optimizer.param_groups]
    assert all(g["capturable"] is False for g in groups) and kit._deferred == []
    kit.updates[0].pending = True
    kit._deferred.append(lambda: None)
    assert kit.end_capture(failed=True) == [] and kit._deferred is None and not kit.updates[0].pending


def test_skip_counts_accumulate_in_one_tensor_that_the_engine_reads_and_zeroes(host, tmp_path):
    trainer = kitgan_trainer(host, tmp_path)
    update = trainer.kit.updates[0]
    update.skipped = torch.zeros(())
    counter = update.skipped
    counter.add_(2.0)
    [(name, count)] = [c for c in trainer.kit.take_skips() if c[0] == update.name]
    assert count.item() == 2.0 and update.skipped is counter and counter.item() == 0.0


def test_status_says_when_the_first_step_ended_and_keeps_saying_it(host, tmp_path):
    import json
    import time

    started = time.time()
    trainer = kitgan_trainer(host, tmp_path, samples=8, batch_size=2)
    trainer.fit()
    status = json.loads(trainer.run_dir.status_file.read_text())
    records = [json.loads(line) for line in trainer.run_dir.metrics_file.read_text().splitlines()]
    first_train = next(r for r in records if r["kind"] == "train")  # logged after step 1 (log_every_steps: 1)
    assert status["status"] == "finished"  # the last write keeps the mark
    assert started < status["first_step_at"] <= first_train["time"]
