"""The run engine: hook order, exact resume, cadences, the Python API."""

from __future__ import annotations

import json

import pytest
import torch
from pydantic import BaseModel, Field

from nectargan_core import Run, hookimpl, load_checkpoint, read_metrics
from nectargan_core.errors import CheckpointError, ConfigError, PluginError
from nectargan_core.hookproxy import part_of
from nectargan_core.init_from import InitFromError
from nectargan_core.rundir import RunDir
from support import run_cli


def toy_config(tmp_path, **loop):
    return {
        "trainer": "toy",
        "run": {"output_dir": str(tmp_path / "runs"), "name": "toy", "seed": 3, "device": "cpu",
                "deterministic": True},
        "loop": {"epochs": 2, "log_every_steps": 2, **loop},
        "toy": {"samples": 8, "batch_size": 4, "val_samples": 4},
        "visualizers": [],
    }


def recorded(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_exact_hook_order(tmp_path):
    log = tmp_path / "hooks.jsonl"
    config = toy_config(tmp_path)
    config["callbacks"] = {"recorder": {"path": str(log)}}
    Run.create(config).fit()
    calls = [(r["hook"], r.get("epoch", r.get("batch_idx", r.get("step")))) for r in recorded(log)]
    epoch = lambda e, step: [  # noqa: E731
        ("on_epoch_start", e),
        ("train_step", 0), ("on_train_batch_end", 0),
        ("train_step", 1), ("on_train_batch_end", 1),
        ("on_log", step),
        ("on_validation_start", e), ("on_validation_end", e),
        ("on_epoch_end", e),
        ("on_save_checkpoint", step),
    ]
    assert calls == [("on_train_start", 0), *epoch(0, 2), *epoch(1, 4), ("on_train_end", None)]


def test_run_hooks_reach_only_enabled_parts(tmp_path):
    """The recorder is installed but not enabled: it must not fire."""
    log = tmp_path / "hooks.jsonl"
    Run.create(toy_config(tmp_path)).fit()
    assert not log.exists()


def weights(path):
    checkpoint = load_checkpoint(path)
    return checkpoint["state"], checkpoint


def assert_same_state(a, b):
    for key in ("model",):
        for name, tensor in a[key].items():
            assert torch.equal(tensor, b[key][name]), name
    opt_a, opt_b = a["optimizer"]["state"], b["optimizer"]["state"]
    for index in opt_a:
        for name, value in opt_a[index].items():
            assert torch.equal(value, opt_b[index][name]), (index, name)


def strip_times(records):
    return [{k: v for k, v in r.items() if k not in {"time", "elapsed"}} for r in records]


@pytest.mark.parametrize("stop", [{"epochs": 1}, {"max_steps": 3}], ids=["epoch-boundary", "mid-epoch"])
def test_resume_is_exact(tmp_path, stop):
    config = toy_config(tmp_path, epochs=3)
    config["checkpoint"] = {"every_steps": 1, "keep_last": 2}
    config["callbacks"] = ["counter"]
    straight = Run.create(config).fit()

    first = toy_config(tmp_path, epochs=3)
    first["checkpoint"] = {"every_steps": 1, "keep_last": 2}
    first["callbacks"] = ["counter"]
    first["loop"].update(stop)
    if "epochs" in stop:
        first["loop"]["epochs"] = stop["epochs"]
    interrupted = Run.create(first).fit()
    overrides = ["loop.epochs=3", "loop.max_steps=null"]
    resumed = Run.resume(interrupted.dir, overrides=overrides).fit()

    counter = part_of(resumed.pm.get_plugin("callback:counter"))
    assert counter.restored == (3 if "max_steps" in stop else 2)
    assert counter.steps == 6
    a, ca = weights(straight.trainer.last_checkpoint)
    b, cb = weights(resumed.trainer.last_checkpoint)
    assert (ca["epoch"], ca["global_step"]) == (cb["epoch"], cb["global_step"]) == (3, 6)
    assert_same_state(a, b)
    assert torch.equal(ca["rng"]["torch"], cb["rng"]["torch"])
    assert strip_times(straight.metrics()) == strip_times(resumed.metrics())


def test_resume_drops_records_written_after_the_checkpoint(tmp_path):
    config = toy_config(tmp_path, epochs=2)
    config["checkpoint"] = {"every_epochs": 1, "save_last": False}
    run = Run.create(config).fit()
    records = run.metrics()
    # simulate a crash after more records were written and a half-written line
    with open(run.run_dir.metrics_file, "a") as handle:
        handle.write('{"kind":"train","step":99}\n{"kind":"tr')
    resumed = Run.resume(run.dir, overrides=["loop.epochs=2"])
    assert resumed.metrics() == records


def test_fit_epoch_one_at_a_time_and_metrics_api(tmp_path):
    run = Run.create(toy_config(tmp_path, epochs=3))
    run.fit_epoch()
    assert (run.trainer.epochs_done, run.trainer.global_step) == (1, 2)
    assert run.status()["status"] == "running"
    run.fit_epoch().fit_epoch()
    assert run.finished and run.status()["status"] == "finished"
    epochs = run.metrics("epoch")
    assert [r["epoch"] for r in epochs] == [0, 1, 2]
    assert set(epochs[0]["losses"]) == {"loss", "noise", "val/mse"}
    train = run.metrics("train")
    assert [r["step"] for r in train] == [2, 4, 6]
    assert [r["epoch_progress"] for r in train] == [1.0, 2.0, 3.0]
    assert all(isinstance(r["losses"]["loss"], float) for r in train)
    assert list(read_metrics(run.run_dir.metrics_file, "val"))[0]["metrics"].keys() == {"mse"}


def test_read_metrics_of_a_run_not_logged_yet_is_empty_but_a_wrong_folder_is_an_error(tmp_path):
    assert list(read_metrics(tmp_path / "metrics.jsonl")) == []  # the folder exists: nothing logged yet
    with pytest.raises(FileNotFoundError, match="version_9/metrics.jsonl: no such folder"):
        list(read_metrics(tmp_path / "runs/run/version_9/metrics.jsonl"))


def test_api_plugin_object_can_replace_the_step(tmp_path):
    seen = []

    class Override:
        @hookimpl(tryfirst=True)
        def train_step(self, trainer, batch_idx):
            seen.append((trainer.global_step, batch_idx))
            return {"custom": torch.tensor(1.5)}

        @hookimpl
        def on_epoch_end(self, epoch, metrics):
            seen.append(("end", epoch, metrics["custom"]))

    run = Run.create(toy_config(tmp_path, epochs=1), plugins=[Override()]).fit()
    assert seen == [(0, 0), (1, 1), ("end", 0, 1.5)]
    assert run.metrics("train")[0]["losses"] == {"custom": 1.5}


def test_api_plugin_with_unknown_hook_is_rejected(tmp_path):
    class Typo:
        @hookimpl
        def on_epoch_ending(self, epoch):
            pass

    with pytest.raises(PluginError, match="'on_epoch_ending' is not a run hook"):
        Run.create(toy_config(tmp_path), plugins=[Typo()])


def test_max_steps_and_checkpoint_retention(tmp_path):
    config = toy_config(tmp_path, epochs=100, max_steps=7)
    config["checkpoint"] = {"every_steps": 2, "keep_last": 2}
    run = Run.create(config).fit()
    assert run.trainer.global_step == 7
    names = [p.name for p in run.run_dir.periodic_checkpoints()]
    assert names == ["epoch0003-step00000006.pt", "epoch0003-step00000007.pt"]
    assert all((run.run_dir.checkpoints / (n + ".json")).exists() for n in names)
    status = run.status()
    assert status["status"] == "finished" and status["step"] == 7


def test_best_checkpoint_follows_metric(tmp_path):
    config = toy_config(tmp_path, epochs=4)
    config["checkpoint"] = {"best_metric": "val/mse", "best_mode": "min"}
    run = Run.create(config).fit()
    values = [r["metrics"]["mse"] for r in run.metrics("val")]
    best = load_checkpoint(run.run_dir.best_checkpoint)
    assert best["loop"]["best_value"] == pytest.approx(min(values))
    assert best["epoch"] == values.index(min(values)) + 1


def test_exception_calls_on_exception_and_marks_failed(tmp_path):
    log = tmp_path / "hooks.jsonl"
    config = toy_config(tmp_path)
    config["toy"]["fail_at_step"] = 3
    config["callbacks"] = {"recorder": {"path": str(log)}}
    run = Run.create(config)
    with pytest.raises(RuntimeError, match="toy failure at step 3"):
        run.fit()
    assert recorded(log)[-1] == {"hook": "on_exception", "error": "toy failure at step 3"}
    status = run.status()
    assert status["status"] == "failed" and "toy failure" in status["error"]


def test_checkpoint_holds_everything_needed_to_resume(tmp_path):
    run = Run.create(toy_config(tmp_path, epochs=1)).fit()
    checkpoint = load_checkpoint(run.trainer.last_checkpoint)
    assert checkpoint["format"] == "nectargan-checkpoint"
    assert checkpoint["trainer"] == "toy"
    assert checkpoint["config"]["toy"]["model"] == {"name": "toy_linear", "features": 3}
    assert set(checkpoint["state"]) == {"model", "optimizer"}
    assert set(checkpoint["rng"]) >= {"python", "torch", "numpy"}
    assert (checkpoint["epoch"], checkpoint["global_step"], checkpoint["batch_in_epoch"]) == (1, 2, 0)


def test_resume_rejects_checkpoint_of_another_trainer(tmp_path):
    run = Run.create(toy_config(tmp_path, epochs=1)).fit()
    checkpoint = load_checkpoint(run.trainer.last_checkpoint)
    checkpoint["trainer"] = "pix2pix"
    with pytest.raises(CheckpointError, match="written by trainer 'pix2pix', not 'toy'"):
        Run(run.config, RunDir.open(run.dir), checkpoint=checkpoint)


def test_empty_data_is_a_clear_error(tmp_path):
    config = toy_config(tmp_path)
    config["toy"]["samples"] = 0
    with pytest.raises(PluginError, match="training data is empty"):
        Run.create(config).fit()


def test_plugin_can_stop_the_run_early(tmp_path):
    class StopAfterFirstValidation:
        @hookimpl
        def on_validation_end(self, trainer, metrics):
            trainer.request_stop("good enough")

    run = Run.create(toy_config(tmp_path, epochs=5), plugins=[StopAfterFirstValidation()]).fit()
    assert run.trainer.epochs_done == 1
    status = run.status()
    assert (status["status"], status["reason"]) == ("finished", "good enough")
    assert run.trainer.last_checkpoint.name == "epoch0001-step00000002.pt"


def test_init_from_loads_weights_only_and_reports_mismatches(tmp_path, capsys):
    source = Run.create(toy_config(tmp_path, epochs=2)).fit()
    checkpoint = source.trainer.last_checkpoint
    same = toy_config(tmp_path, epochs=1)
    same["run"]["init_from"] = str(checkpoint)
    run = Run.create(same)
    assert run.init_report["model"]["loaded"] == ["weight", "bias"]  # in the network's order
    trained = load_checkpoint(checkpoint)["state"]["model"]
    assert torch.equal(run.trainer.model.weight, trained["weight"])
    assert run.trainer.global_step == 0 and run.trainer.epochs_done == 0  # not a resume
    assert run.trainer.optimizer.state_dict()["state"] == {}

    wider = toy_config(tmp_path, epochs=1)
    wider["run"]["init_from"] = str(checkpoint)
    wider["toy"]["model"] = {"name": "toy_linear", "features": 5}
    with pytest.raises(InitFromError, match=r"'model' matched 1/2 tensors: 1 of another shape \(e.g. weight "
                                            r"\[1, 3\] vs \[1, 5\]\)"):
        Run.create(wider)
    wider["run"]["init_from_strict"] = False
    capsys.readouterr()
    run = Run.create(wider)
    assert run.init_report["model"] == {"loaded": ["bias"], "missing": [], "unexpected": [],
                                        "mismatched": ["weight [1, 3] vs [1, 5]"]}
    assert "init_from: 'model' loaded 1/2 tensors from" in capsys.readouterr().err
    run.fit()


def test_init_from_missing_file_is_a_clear_error(tmp_path):
    config = toy_config(tmp_path)
    config["run"]["init_from"] = str(tmp_path / "nope.pt")
    with pytest.raises(CheckpointError, match="nope.pt: checkpoint file not found"):
        Run.create(config)


def test_a_failing_callback_is_reported_once_and_disabled(tmp_path, capsys, monkeypatch):
    from nectargan_toy.callbacks import Counter

    calls = []

    def broken(self):
        calls.append(1)
        raise ValueError("visualizer bug")

    monkeypatch.setattr(Counter, "on_train_batch_end", hookimpl(broken))
    config = toy_config(tmp_path, epochs=2)
    config["callbacks"] = ["counter"]
    run = Run.create(config).fit()
    assert run.status()["status"] == "finished" and run.trainer.global_step == 4
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning:")]
    assert warnings == ["warning: callback 'counter' failed in on_train_batch_end: ValueError: visualizer bug; "
                        "disabled for the rest of this run"]
    assert calls == [1]
    # the rest of the part's hooks are off too: its checkpoint state was never written
    assert "counter" not in load_checkpoint(run.trainer.last_checkpoint)["plugins"]


def test_strict_mode_lets_a_failing_callback_fail_the_run(tmp_path, monkeypatch):
    from nectargan_core.plugins import PluginHost
    from nectargan_toy.callbacks import Counter

    def broken(self):
        raise ValueError("visualizer bug")

    monkeypatch.setattr(Counter, "on_train_batch_end", hookimpl(broken))
    config = toy_config(tmp_path)
    config["callbacks"] = ["counter"]
    host = PluginHost({"NECTARGAN_STRICT_PLUGINS": "1"}).load_entry_points()
    run = Run.create(config, host=host)
    with pytest.raises(ValueError, match="visualizer bug"):
        run.fit()
    assert run.status()["status"] == "failed"


def test_console_progress_bar_mode(tmp_path, capsys):
    config = toy_config(tmp_path, epochs=2)
    config["visualizers"] = {"console": {"bar": "on"}}
    Run.create(config).fit()
    out = capsys.readouterr().out
    assert "training 'toy' on cpu: 2 epochs" in out
    assert "epoch 2/2 done in" in out and "done: 2/2 epochs (4 steps)" in out


def test_console_plain_mode_prints_one_line_per_record(tmp_path, capsys):
    config = toy_config(tmp_path, epochs=2)
    config["visualizers"] = {"console": {"bar": "off", "every_logs": 1}}
    Run.create(config).fit()
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("epoch ") and " step " in line]
    assert [line.split(" step ")[1].split()[0] for line in lines] == ["2", "4"]
    assert all("loss" in line and "ETA" in line for line in lines)


def test_a_crash_leaves_an_emergency_checkpoint_that_resumes(tmp_path, capsys):
    config = toy_config(tmp_path, epochs=2)
    config["toy"].update(samples=16, fail_at_step=7)  # 4 batches per epoch; epoch 1 saved at step 4
    run = Run.create(config)
    with pytest.raises(RuntimeError, match="toy failure at step 7"):
        run.fit()
    emergency = run.run_dir.checkpoints / "emergency-step00000006.pt"
    assert emergency.is_file()
    status = run.status()
    assert status["status"] == "failed" and status["emergency_checkpoint"] == str(emergency)
    assert f"--checkpoint {emergency}" in capsys.readouterr().err
    # not a periodic checkpoint: plain --resume keeps using the last good one
    assert run.run_dir.latest_checkpoint().name == "epoch0001-step00000004.pt"
    saved = load_checkpoint(emergency)
    assert (saved["epoch"], saved["global_step"], saved["batch_in_epoch"]) == (1, 6, 2)
    resumed = Run.resume(run.dir, checkpoint=emergency, overrides=["toy.fail_at_step=null"]).fit()
    assert (resumed.trainer.epochs_done, resumed.trainer.global_step) == (2, 8)


def test_no_emergency_checkpoint_when_nothing_is_new(tmp_path):
    config = toy_config(tmp_path, epochs=2)
    config["toy"]["fail_at_step"] = 3  # fails right after the epoch-1 checkpoint at step 2
    run = Run.create(config)
    with pytest.raises(RuntimeError):
        run.fit()
    assert not list(run.run_dir.checkpoints.glob("emergency-*"))
    assert run.status()["emergency_checkpoint"] is None


class WidgetOptions(BaseModel):
    width: int = Field(ge=1, description="required: no default")
    depth: int = Field(2, ge=1)


class Widget:
    def __init__(self, width: int, depth: int = 2, name: str = "") -> None:
        self.width, self.depth, self.name = width, depth, name


class WidgetPlugin:
    @hookimpl
    def register_models(self, register):
        register("widget", f"{__name__}:Widget", options=WidgetOptions)


def test_build_by_name_applies_the_overrides_before_validating(tmp_path, nectargan_plugin_host):
    """A part with a required option builds when the trainer gives it; a refused value is one line naming the part."""
    trainer = Run.create(toy_config(tmp_path), host=nectargan_plugin_host(WidgetPlugin())).trainer
    built = trainer.build("model", "widget", width=5, name="extra, not an option")
    assert (built.width, built.depth, built.name) == (5, 2, "extra, not an option")
    for overrides, problem in (({}, "width: this key is required"),
                               ({"width": 0}, "width: Input should be greater than or equal to 1 (got 0)")):
        with pytest.raises(ConfigError) as caught:
            trainer.build("model", "widget", **overrides)
        assert str(caught.value) == f"model 'widget' (plugin 'WidgetPlugin'): {problem}"


from nectargan_toy.options import ToyTrainerOptions  # noqa: E402
from nectargan_toy.trainer import ToyTrainer  # noqa: E402


class SummaryTrainer(ToyTrainer):
    summary = "my own summary"  # the engine's: what describe() said at the start

    def fit(self):  # the engine's
        return self


class EpochInSetupTrainer(ToyTrainer):
    def setup(self):
        super().setup()
        self.epoch = 3  # the engine's: the loop's position


class MethodInSetupTrainer(ToyTrainer):
    def setup(self):
        super().setup()
        self.extra = [n for n in range(3)]  # an author's own name: fine, even from a comprehension
        self.num_batches = 2  # the engine's method


class ModuleTrainer(ToyTrainer, torch.nn.Module):
    """A trainer that is also a Module: its submodules still register (the guard passes the assignment on)."""

    def __init__(self, *args, **kwargs):
        torch.nn.Module.__init__(self)
        ToyTrainer.__init__(self, *args, **kwargs)

    def setup(self):
        super().setup()
        self.head = torch.nn.Linear(2, 2)


class ClashPlugin:
    @hookimpl
    def register_trainers(self, register):
        register("clash_class", f"{__name__}:SummaryTrainer", options=ToyTrainerOptions)
        register("clash_setup", f"{__name__}:EpochInSetupTrainer", options=ToyTrainerOptions)
        register("clash_method", f"{__name__}:MethodInSetupTrainer", options=ToyTrainerOptions)
        register("module", f"{__name__}:ModuleTrainer", options=ToyTrainerOptions)


def test_a_trainer_cannot_take_a_name_the_engine_owns(tmp_path, nectargan_plugin_host):
    host = nectargan_plugin_host(ClashPlugin())
    config = {**toy_config(tmp_path), "trainer": "clash_class"}
    with pytest.raises(PluginError) as defined:
        Run.create(config, host=host)
    assert str(defined.value) == (
        "trainer 'clash_class' (plugin 'ClashPlugin'): SummaryTrainer defines 'fit', 'summary', which the engine owns "
        "(the loop's own state and methods); rename them (see docs/plugins/trainer-api.md#names-the-engine-owns)")
    run = Run.create({**toy_config(tmp_path), "trainer": "clash_setup"}, host=host)
    with pytest.raises(PluginError) as assigned:
        run.fit()
    assert str(assigned.value) == (
        "trainer 'clash_setup': EpochInSetupTrainer.setup assigns self.epoch, which the engine owns (the loop's own "
        "state); name your attribute otherwise (see docs/plugins/trainer-api.md#names-the-engine-owns)")
    with pytest.raises(PluginError) as method:
        Run.create({**toy_config(tmp_path), "trainer": "clash_method"}, host=host).fit()
    assert str(method.value).startswith("trainer 'clash_method': MethodInSetupTrainer.setup assigns self.num_batches, "
                                        "which the engine owns (one of the engine's methods)")
    module_run = Run.create({**toy_config(tmp_path), "trainer": "module"}, host=host).fit()
    assert "head" in dict(module_run.trainer.named_children())


def test_a_clashing_trainer_is_refused_before_its_run_directory_exists(fake_dist, tmp_path):
    site = fake_dist("nectargan-clash", "clash_plugin", """
        from nectargan_core import hookimpl
        from nectargan_toy.options import ToyTrainerOptions
        from nectargan_toy.trainer import ToyTrainer

        class HookTrainer(ToyTrainer):
            hook = None

        @hookimpl
        def register_trainers(register):
            register("clash", "clash_plugin:HookTrainer", options=ToyTrainerOptions)
    """)
    result = run_cli("train", "--trainer", "clash", "--set", f"run.output_dir={tmp_path / 'runs'}",
                     env={"PYTHONPATH": str(site)})
    assert (result.returncode, result.stderr) == (1, (
        "error: trainer 'clash' (plugin 'clash_plugin' (nectargan-clash)): HookTrainer defines 'hook', which the engine "
        "owns (the loop's own state and methods); rename it (see docs/plugins/trainer-api.md#names-the-engine-owns)\n"))
    assert not (tmp_path / "runs").exists()


class FailOnceAtEpochEnd:
    """Raises in on_validation_end of the first epoch: the failure falls while the epoch ends."""

    @hookimpl
    def on_validation_end(self, trainer, metrics):
        raise RuntimeError("validation consumer failed")


def test_a_run_that_fails_while_ending_an_epoch_resumes_into_that_epoch_s_end(tmp_path):
    config = toy_config(tmp_path, epochs=2, val_every_epochs=1)
    run = Run.create(config, plugins=[FailOnceAtEpochEnd()])
    with pytest.raises(RuntimeError, match="validation consumer failed"):
        run.fit()
    emergency = sorted((run.dir / "checkpoints").glob("emergency-*.pt"))
    assert len(emergency) == 1
    saved = load_checkpoint(emergency[0])
    assert (saved["epoch"], saved["batch_in_epoch"], saved["global_step"]) == (0, 2, 2)  # trained, not ended
    resumed = Run.resume(run.dir, checkpoint=emergency[0]).fit()
    assert resumed.trainer.epochs_done == 2
    records = recorded(run.dir / "metrics.jsonl")
    assert [(r["kind"], r["epoch"]) for r in records if r["kind"] in ("val", "epoch")] == [
        ("val", 0), ("epoch", 0), ("val", 1), ("epoch", 1)]


def test_a_run_saved_with_renamed_and_removed_options_resumes(tmp_path):
    """A plugin declares renamed_options and removed_options on its section; older runs read as the new ones."""
    run = Run.create(toy_config(tmp_path, epochs=1)).fit()
    config_file = run.dir / "config.yaml"
    text = config_file.read_text()
    assert "  samples: 8\n" in text
    config_file.write_text(text.replace("  samples: 8\n", "  sample_count: 8\n  legacy_flag: true\n"))
    resumed = Run.resume(run.dir, overrides=["loop.epochs=2"]).fit()
    assert resumed.trainer.epochs_done == 2 and resumed.config.toy.samples == 8
    saved = config_file.read_text()
    assert "  samples: 8\n" in saved and "sample_count" not in saved and "legacy_flag" not in saved
    with pytest.raises(ConfigError, match="toy.sample_count: renamed to samples, which is also given; keep samples"):
        Run.resume(run.dir, overrides=["loop.epochs=3", "toy.sample_count=4"])
    more = Run.resume(run.dir, overrides=["loop.epochs=3", "toy.samples=12"]).fit()
    assert more.config.toy.samples == 12
