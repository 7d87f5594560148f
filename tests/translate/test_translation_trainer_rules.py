"""What a subclass of TranslationTrainer may do, and what the base keeps doing whatever it does (an outside author's
findings: an on_epoch_end without super() stopped the LR schedule and the grids; d_every/g_every were accepted and
ignored; a metric of an overridden validate could not select best.pt; the epoch never reached a plugin's dataset;
the wrong kind of data was refused only after the run directory existed)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
from pydantic import BaseModel, Field

from nectargan_core import ConfigError, Run, Section, hookimpl, load_checkpoint
from nectargan_pix2pix.options import Pix2pixOptions
from nectargan_pix2pix.trainer import Pix2pixTrainer
from nectargan_translate import TranslationTrainer
from translation_fixtures import pix2pix_config as config

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "plugins" / "authoring.md"


@pytest.fixture(scope="module")
def synth(make_synth):
    return make_synth(8, 32)


class EpochEndWithoutSuper(Pix2pixTrainer):
    seen: list[int] = []

    @hookimpl
    def on_epoch_end(self, epoch):
        type(self).seen.append(epoch)  # no super(): the base's epoch-end work must run all the same


class NoUpdateRatio(Pix2pixTrainer):
    capabilities = TranslationTrainer.capabilities  # does not honour d_every/g_every


class OwnValidation(Pix2pixTrainer):
    validation_metrics = ("mine",)

    @hookimpl
    def validate(self, epoch):
        return {"mine": 1.0 / (epoch + 1)}


class UndeclaredValidation(Pix2pixTrainer):
    @hookimpl
    def validate(self, epoch):
        return {"other": 0.5}


class EpochPairs(torch.utils.data.Dataset):
    """A plugin's paired dataset that wants the epoch (per-epoch randomness seeded by it)."""

    epochs: list[int] = []

    def __init__(self, split, seed, count=4, batch_size=2):
        self.count, self.batch_size = count, batch_size

    def set_epoch(self, epoch):
        type(self).epochs.append(epoch)

    def __len__(self):
        return self.count

    def __getitem__(self, index):
        image = torch.full((3, 32, 32), index / 10)
        return {"A": image, "B": -image}


class EpochPairsOptions(Section):
    count: int = Field(4, ge=1)
    batch_size: int = Field(2, ge=1)


class Plugin:
    @hookimpl
    def register_trainers(self, register):
        for name, cls in [("no_super", EpochEndWithoutSuper), ("no_ratio", NoUpdateRatio),
                          ("own_validation", OwnValidation), ("undeclared_validation", UndeclaredValidation)]:
            register(name, cls, options=Pix2pixOptions)

    @hookimpl
    def register_datasets(self, register):
        register("epoch_pairs", EpochPairs, options=EpochPairsOptions)


@pytest.fixture
def host(nectargan_plugin_host):
    return nectargan_plugin_host(Plugin())


def test_the_guide_lists_exactly_the_reserved_names():
    text = GUIDE.read_text()
    listed = re.search(r"<!-- reserved: TranslationTrainer -->\n(.*?)\n\n", text, re.S).group(1)
    assert set(re.findall(r"`([^`]+)`", listed)) == set(TranslationTrainer.reserved)


def test_an_on_epoch_end_without_super_keeps_the_schedule_and_the_grids(tmp_path, synth, host):
    EpochEndWithoutSuper.seen = []
    cfg = config(tmp_path, synth, trainer="no_super", loop={"epochs": 3}, examples={"every_epochs": 1, "count": 2})
    run = Run.create(cfg, host=host).fit()
    assert EpochEndWithoutSuper.seen == [0, 1, 2]
    lr = [group["lr"] for group in run.trainer.opt_g.param_groups]
    assert lr[0] < 2e-4  # the epoch-unit schedule stepped (it would stay at 2e-4 if the base's hook were off)
    grids = sorted(p.name for p in (run.dir / "examples").iterdir())
    assert len(grids) == 3


def test_update_ratio_keys_need_a_trainer_that_honours_them(tmp_path, synth, host):
    with pytest.raises(ConfigError) as refused:
        Run.create(config(tmp_path, synth, trainer="no_ratio", optim={"d_every": 2}), host=host)
    assert str(refused.value).startswith("optim.d_every: trainer 'no_ratio' updates D and G at every step (it does "
                                         "not declare the capability 'update_ratio')")
    assert not (tmp_path / "runs").exists()
    run = Run.create(config(tmp_path, synth, optim={"d_every": 2}, loop={"epochs": 1}), host=host).fit()
    state = load_checkpoint(run.trainer.last_checkpoint)["state"]
    steps_d = {int(s["step"]) for s in state["opt_d"]["state"].values()}
    steps_g = {int(s["step"]) for s in state["opt_g"]["state"].values()}
    steps = run.trainer.global_step
    assert steps >= 3 and steps_g == {steps} and steps_d == {(steps + 1) // 2}  # G every step, D every second


def test_a_metric_of_an_overridden_validate_may_select_best_pt(tmp_path, synth, host):
    cfg = config(tmp_path, synth, trainer="own_validation", checkpoint={"best_metric": "val/mine", "best_mode": "min"},
                 loop={"epochs": 2})
    run = Run.create(cfg, host=host).fit()
    assert (run.dir / "checkpoints" / "best.pt").is_file()
    with pytest.raises(ConfigError, match=r"checkpoint.best_metric: 'val/nope' is not among the metrics "
                                          r"validation computes \(val/l1, val/psnr, val/ssim, val/mine\)"):
        Run.create(config(tmp_path, synth, trainer="own_validation", checkpoint={"best_metric": "val/nope", "best_mode": "min"}),
                   host=host)
    # undeclared: not checked before the run (only its validate knows what it returns)
    Run.create(config(tmp_path, synth, trainer="undeclared_validation", checkpoint={"best_metric": "val/other", "best_mode": "min"},
                      run={"name": "undeclared"}), host=host)


def test_the_wrong_kind_of_data_is_refused_before_the_run_directory(tmp_path, synth, host):
    with pytest.raises(ConfigError) as refused:
        Run.create(config(tmp_path, synth, data={"name": "unpaired", "root": str(synth)}), host=host)
    assert str(refused.value) == ("data.name: 'unpaired' is the wrong kind of data for trainer 'pix2pix', which "
                                  "trains on aligned pairs; choose a dataset of aligned pairs (the built-in one: "
                                  "data.name=paired)")
    assert not (tmp_path / "runs").exists()


def test_a_plugin_dataset_with_set_epoch_hears_every_epoch_a_resumed_one_included(tmp_path, host):
    EpochPairs.epochs = []
    cfg = {**config(tmp_path, None, loop={"epochs": 2, "max_steps": 3}), "data": {"name": "epoch_pairs"},
           "examples": {"every_epochs": None}}
    run = Run.create(cfg, host=host).fit()  # stops after step 3: mid-epoch 1
    assert EpochPairs.epochs == [0, 1]
    Run.resume(run.dir, overrides=["loop.max_steps=null"], host=host).fit()
    assert EpochPairs.epochs == [0, 1, 1]  # the resumed epoch is told again


def test_a_resume_that_changes_the_learning_rate_says_so(tmp_path, synth, host, capsys):
    """Raising loop.epochs re-fits the default schedule (it follows the run's length): the LR moves, in one line
    with the LR now and at the next epoch, pointing at --keep-schedule."""
    run = Run.create(config(tmp_path, synth, loop={"epochs": 2}, examples={"every_epochs": None}), host=host).fit()
    saved = run.trainer.opt_g.param_groups[0]["lr"]
    base = run.trainer.config.optim.lr_g
    capsys.readouterr()
    longer = Run.resume(run.dir, overrides=["loop.epochs=4"], host=host)
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if "learning rate changed on resume" in line]
    assert len(lines) == 1
    # fitted to 2 epochs (1 + 1 decay) the LR at epoch 3 was 0; fitted to 4 (2 + 2) it is 2/3, then 1/3
    assert lines[0].startswith(f"warning: the learning rate changed on resume at epoch 3 of 4 (G {saved:.3g} -> "
                               f"{base * 2 / 3:.3g} now, {base / 3:.3g} at epoch 4; D ")
    assert lines[0].endswith("optim.lr_schedule is fitted to loop.epochs, which this resume changed; to finish the "
                             "saved plan instead and then hold its last LR, resume with --keep-schedule (or give the "
                             "schedule its own lengths: optim.lr_schedule: {name: pix2pix_linear, n_epochs: N, "
                             "n_epochs_decay: M})")
    longer.close()


def test_keep_schedule_finishes_the_saved_plan_then_holds_its_last_learning_rate(tmp_path, synth, host, capsys):
    """The issue's user: a run planned for 2 epochs (LR x1, then x1/2) resumed for 4 keeps that plan and holds x1/2
    for epochs 3 and 4; the config records it, so a later resume keeps it too."""
    run = Run.create(config(tmp_path, synth, loop={"epochs": 2}, examples={"every_epochs": None}), host=host).fit()
    base = run.trainer.config.optim.lr_g
    capsys.readouterr()
    kept = Run.resume(run.dir, overrides=["loop.epochs=4"], keep_schedule=True, host=host)
    err = capsys.readouterr().err
    assert "learning rate changed" not in err
    assert (f"note: the LR schedule keeps its plan of 2 epochs (loop.schedule_epochs, --keep-schedule): epochs 3 to 4 "
            f"hold its last LR (G {base / 2:.3g})") in err.splitlines()
    assert kept.config.loop.schedule_epochs == 2
    assert "schedule_epochs: 2" in (run.dir / "config.yaml").read_text()
    multiplier = kept.trainer.sched_g.lr_lambdas[0]
    assert [multiplier(k) for k in range(4)] == [1.0, 0.5, 0.5, 0.5]
    kept.fit()
    assert kept.trainer.opt_g.param_groups[0]["lr"] == pytest.approx(base / 2)
    again = Run.resume(run.dir, overrides=["loop.epochs=5"], host=host)  # recorded: no flag needed
    assert [again.trainer.sched_g.lr_lambdas[0](k) for k in range(5)] == [1.0, 0.5, 0.5, 0.5, 0.5]
    again.close()
    with pytest.raises(ConfigError, match="give one of --keep-schedule and --set loop.schedule_epochs"):
        Run.resume(run.dir, overrides=["loop.schedule_epochs=3"], keep_schedule=True, host=host)


def test_a_resume_that_keeps_the_plan_says_nothing_about_the_learning_rate(tmp_path, synth, host, capsys):
    cfg = config(tmp_path, synth, loop={"epochs": 3, "max_steps": 4}, examples={"every_epochs": None})
    run = Run.create(cfg, host=host).fit()
    capsys.readouterr()
    Run.resume(run.dir, overrides=["loop.max_steps=null"], host=host).fit()
    assert "learning rate changed" not in capsys.readouterr().err


def test_a_schedule_that_ends_before_the_run_says_so(tmp_path, synth, host, capsys):
    """Explicit lengths shorter than loop.epochs (a resume that raised it, say): the last epochs train at LR 0."""
    schedule = {"name": "pix2pix_linear", "n_epochs": 1, "n_epochs_decay": 1}
    Run.create(config(tmp_path, synth, loop={"epochs": 3, "max_steps": 1}, optim={"lr_schedule": schedule}),
               host=host).fit()
    lines = [line for line in capsys.readouterr().err.splitlines() if "reaches 0" in line]
    assert lines == ["warning: optim.lr_schedule: the LR reaches 0 after epoch 2 (optim.lr_schedule.n_epochs 1 + "
                     "n_epochs_decay 1) and the run trains 3 (loop.epochs): epochs 3 to 3 change nothing; lengthen "
                     "the schedule, or set both to null to fit it to the run"]


def test_keep_schedule_from_the_command_line(tmp_path, synth, host):
    """The user's command: nectargan train --resume RUN --set loop.epochs=N --keep-schedule, and its refusals."""
    import yaml

    from support import run_cli

    run = Run.create(config(tmp_path, synth, loop={"epochs": 2}, examples={"every_epochs": None}), host=host).fit()
    refused = run_cli("train", "--keep-schedule", "--set", "loop.epochs=3")
    assert (refused.returncode, refused.stderr) == (2, "error: --keep-schedule needs --resume RUN_DIR: a new run "
                                                       "fits its schedules to its loop.epochs\n")
    both = run_cli("train", "--resume", str(run.dir), "--keep-schedule", "--set", "loop.schedule_epochs=3")
    assert (both.returncode, both.stderr) == (2, "error: --keep-schedule sets loop.schedule_epochs to the epochs the "
                                                 "run was planned for; give one of --keep-schedule and --set "
                                                 "loop.schedule_epochs\n")
    done = run_cli("train", "--resume", str(run.dir), "--set", "loop.epochs=3", "--keep-schedule", timeout=300)
    assert done.returncode == 0, done.stderr
    lr = run.trainer.config.optim.lr_g / 2
    assert (f"note: the LR schedule keeps its plan of 2 epochs (loop.schedule_epochs, --keep-schedule): epochs 3 to 3 "
            f"hold its last LR (G {lr:.3g})") in done.stderr.splitlines()
    stored = yaml.safe_load((run.dir / "config.yaml").read_text())
    assert (stored["loop"]["epochs"], stored["loop"]["schedule_epochs"]) == (3, 2)


def test_a_refused_resume_leaves_the_config_as_it_was_so_the_kept_plan_is_the_one_that_ran(tmp_path, synth, host):
    """A stranger's sequence: a finished 4-epoch run resumed with loop.epochs=2 is refused ('already finished') and
    must not record epochs 2; a later --keep-schedule then keeps the 4-epoch plan that really ran."""
    run = Run.create(config(tmp_path, synth, loop={"epochs": 4}, examples={"every_epochs": None}), host=host).fit()
    before = (run.dir / "config.yaml").read_bytes()
    for overrides, keep in ((["loop.epochs=2"], False), (["loop.epochs=4"], True)):
        refused = Run.resume(run.dir, overrides=overrides, keep_schedule=keep, host=host)
        assert refused.finished
        refused.close()
        assert (run.dir / "config.yaml").read_bytes() == before
    kept = Run.resume(run.dir, overrides=["loop.epochs=6"], keep_schedule=True, host=host)
    assert kept.config.loop.schedule_epochs == 4
    multiplier = kept.trainer.sched_g.lr_lambdas[0]
    assert [round(multiplier(k), 6) for k in range(6)] == [1.0, 1.0, round(2 / 3, 6), round(1 / 3, 6),
                                                           round(1 / 3, 6), round(1 / 3, 6)]
    kept.close()


def test_keep_schedule_leaves_a_schedule_of_explicit_lengths_as_given(tmp_path, synth, host, capsys):
    lengths = {"lr_schedule": {"name": "pix2pix_linear", "n_epochs": 1, "n_epochs_decay": 1}}
    run = Run.create(config(tmp_path, synth, loop={"epochs": 2}, optim=lengths, examples={"every_epochs": None}),
                     host=host).fit()
    capsys.readouterr()
    kept = Run.resume(run.dir, overrides=["loop.epochs=4"], keep_schedule=True, host=host)
    assert [kept.trainer.sched_g.lr_lambdas[0](k) for k in range(4)] == [1.0, 0.5, 0.0, 0.0]  # as the lengths say
    err = capsys.readouterr().err
    assert "hold its last LR" not in err and "the LR reaches 0 after epoch 2" in err
    kept.close()


def test_a_schedule_fitted_beyond_the_run_names_loop_schedule_epochs(tmp_path, synth, host, capsys):
    Run.create(config(tmp_path, synth, loop={"epochs": 1, "schedule_epochs": 6}, examples={"every_epochs": None}),
               host=host).fit()
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning:")]
    assert lines == ["warning: loop.schedule_epochs 6 is more than loop.epochs 1: optim.lr_schedule, fitted to 6 "
                     "epochs, stops 5 epoch(s) before its end; set loop.schedule_epochs to loop.epochs or null to fit "
                     "it to the run"]


def test_the_cli_guides_resume_example_is_what_the_default_schedule_gives():
    """docs/cli.md: a run planned for 10 epochs, resumed after 6 for 14: 1.33e-4 -> 2e-4 now, 1.75e-4 at epoch 8;
    kept instead, epochs 11 to 14 hold 3.33e-5."""
    from nectargan_losses import Pix2PixLinear

    planned, refitted = Pix2PixLinear(None, None).for_run(10), Pix2PixLinear(None, None).for_run(14)
    lr = 2e-4
    shown = [f"{lr * planned.value(6):.3g}", f"{lr * refitted.value(6):.3g}", f"{lr * refitted.value(7):.3g}",
             f"{lr * planned.value(9):.3g}"]
    assert shown == ["0.000133", "0.0002", "0.000175", "3.33e-05"]
    guide = (Path(__file__).resolve().parents[2] / "docs" / "cli.md").read_text()
    assert ("epoch 7 of 14 (G 0.000133 -> 0.0002 now, 0.000175 at epoch 8; D 0.000133 -> 0.0002 now, 0.000175 at "
            "epoch 8)") in guide
    assert "epochs 11 to 14 hold its last LR (G 3.33e-05)" in guide
