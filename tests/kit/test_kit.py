"""The trainer kit (nectargan_core.kit), through a two-network GAN trainer built on it (kitgan_trainer.py).

Each test names the guarantee it checks: accumulation (a short last group
included), the non-finite skip for every Adam kernel and the fp16 scaler,
freezing, step-unit schedulers, DDP ``no_sync`` in real gloo processes, and
the config-time refusal of options a trainer cannot honour.
"""

from __future__ import annotations

import copy
import json
import math
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import kitgan_plugin
from kitgan_trainer import KitGanTrainer, PlainTrainer
from nectargan_core import AccumulationGroup, Run, Trainer, TrainerKit, hookimpl, load_checkpoint
from nectargan_core.capabilities import NONFINITE_SKIP
from nectargan_core.rundir import RunDir
from support import finite, make_fake_dist, run_cli, same

HERE = Path(__file__).resolve().parent
NETS = ("generator", "discriminator", "opt_g", "opt_d")


def kitgan_config(tmp_path: Path, name: str = "run", loop: dict | None = None, **kitgan) -> dict:
    return {
        "trainer": "kitgan",
        "run": {"output_dir": str(tmp_path / "runs"), "name": name, "device": "cpu", "seed": 3, "deterministic": True},
        "loop": {"epochs": 1, "log_every_steps": 1, "val_every_epochs": None, **(loop or {})},
        "checkpoint": {"every_epochs": None, "save_last": False},
        "visualizers": [],
        "kitgan": kitgan,
    }


@pytest.fixture
def host(nectargan_plugin_host):
    return nectargan_plugin_host(kitgan_plugin)


def train(host, tmp_path, *, plugins=(), **kwargs) -> Trainer:
    return Run.create(kitgan_config(tmp_path, **kwargs), host=host, plugins=plugins).fit().trainer


def states(trainer: Trainer) -> dict:
    return copy.deepcopy({name: trainer.stateful[name].state_dict() for name in NETS})


def assert_close(a, b, *, atol: float, where: str = "") -> None:
    if isinstance(a, torch.Tensor):
        torch.testing.assert_close(a, b, atol=atol, rtol=0, msg=lambda m: f"{where}: {m}")
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for key in a:
            assert_close(a[key], b[key], atol=atol, where=f"{where}.{key}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            assert_close(x, y, atol=atol, where=f"{where}[{i}]")
    else:
        assert a == b, where


class Snapshots:
    """The networks' and optimizers' state after every step."""

    def __init__(self):
        self.after: dict[int, dict] = {}

    @hookimpl
    def on_train_batch_end(self, trainer):
        self.after[trainer.global_step] = states(trainer)


# -- accumulation -------------------------------------------------------------------------------
def test_accumulation_groups_and_the_short_last_group():
    groups = [AccumulationGroup.of(i, 3, 7) for i in range(7)]
    assert [g.size for g in groups] == [3, 3, 3, 3, 3, 3, 1]
    assert [g.last for g in groups] == [False, False, True, False, False, True, True]
    assert groups[6].scale == 1.0 and groups[0].scale == pytest.approx(1 / 3)
    assert [AccumulationGroup.of(i, 2, None).last for i in range(4)] == [False, True, False, True]  # no length
    with pytest.raises(ValueError, match="at least 1"):
        AccumulationGroup.of(0, 0, 7)


def test_accumulated_batches_equal_one_larger_batch_including_a_short_last_group(host, tmp_path):
    """5 samples: batches of 1 in groups of 2 (2, 2, 1) equal batches of 2, 2 and 1 without accumulation.

    No BatchNorm and no adversarial term for G, so a batch's gradient is the mean of per-sample ones.
    Adam's first moments compare the gradients themselves (its step barely sees a wrong scale).
    """
    common = dict(samples=5, g_adv=0.0, implementation="single")
    small = train(host, tmp_path, name="small", batch_size=1, accumulate=2, **common)
    large = train(host, tmp_path, name="large", batch_size=2, accumulate=1, **common)
    assert small.global_step == 5 and large.global_step == 3
    assert int(small.opt_g.state_dict()["state"][0]["step"]) == 3  # 3 updates: groups of 2, 2 and 1
    assert_close(states(small), states(large), atol=1e-6, where="state")


# -- the non-finite skip ---------------------------------------------------------------------------
@pytest.mark.parametrize("nan_in", ["inputs", "loss"])
@pytest.mark.parametrize("implementation, fp16_scaler", [("fused", False), ("foreach", False), ("single", False),
                                                         ("single", True), ("fused", True)])
def test_a_nan_batch_is_left_out_as_a_true_no_op(host, tmp_path, capsys, implementation, fp16_scaler, nan_in):
    """Weights, BatchNorm statistics, Adam moments and step counts after the NaN step equal those before it.

    ``inputs``: everything of the step is NaN; ``loss``: only the losses are, the gradients and BatchNorm
    statistics are finite, so only the kit's device-side loss flag can leave the update out.
    """
    snaps = Snapshots()
    trainer = train(host, tmp_path, plugins=[snaps], loop={"nonfinite": "skip"}, samples=8, batch_size=2, norm=True,
                    implementation=implementation, fp16_scaler=fp16_scaler, nan_at_step=3, nan_in=nan_in)
    after = snaps.after
    assert same(after[3], after[2])
    assert int(after[3]["opt_g"]["state"][0]["step"]) == int(after[3]["opt_d"]["state"][0]["step"]) == 2
    assert any("running_mean" in key for key in after[3]["generator"])  # BatchNorm buffers were compared
    assert not same(after[4]["generator"], after[3]["generator"])  # training went on
    assert int(after[4]["opt_d"]["state"][0]["step"]) == 3 and finite(after[4])
    assert "warning: non-finite loss D, G in step 3; left out of the epoch averages" in capsys.readouterr().err
    if fp16_scaler:  # the scaler got the flag: it skipped and lowered its scale, once per network
        assert trainer.scaler_g.get_scale() == trainer.scaler_d.get_scale() == 512.0


def test_a_nan_batch_inside_an_accumulation_group_leaves_the_whole_group_out(host, tmp_path):
    snaps = Snapshots()
    train(host, tmp_path, plugins=[snaps], loop={"nonfinite": "skip"}, samples=8, batch_size=1, accumulate=2,
          implementation="fused", nan_at_step=3, nan_in="loss")  # groups: steps 1-2, 3-4, 5-6, 7-8; finite gradients
    assert same(after := snaps.after[4], snaps.after[2])
    assert int(after["opt_g"]["state"][0]["step"]) == 1
    assert int(snaps.after[6]["opt_g"]["state"][0]["step"]) == 2 and finite(snaps.after[8])


def test_stop_ends_the_run_with_the_error_line_alone(host, tmp_path, capsys):
    """Under stop, the run's only output is the error (no second line about an emergency checkpoint)."""
    from nectargan_core.errors import TrainingError

    with pytest.raises(TrainingError) as stopped:
        train(host, tmp_path, samples=8, batch_size=2, nan_at_step=3)
    assert str(stopped.value) == ("non-finite loss D, G in step 3; stopped (loop.nonfinite=stop); "
                                  "no checkpoint was written")
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("implementation", ["fused", "single"])
def test_an_update_with_finite_losses_but_non_finite_gradients_is_left_out_reported_and_undone(
        host, tmp_path, capsys, implementation):
    """D's gradients are NaN at step 3, its losses and BN statistics finite: only the gradients tell.

    D's update is a no-op, every network's BatchNorm statistics of the batch are restored (as for a NaN loss),
    G's update goes on, and the engine reports it at its logging interval (a warning and the metrics record).
    """
    snaps = Snapshots()
    run = Run.create(kitgan_config(tmp_path, loop={"nonfinite": "skip"}, samples=8, batch_size=2, norm=True,
                                   implementation=implementation, nan_at_step=3, nan_in="gradients"),
                     host=host, plugins=[snaps]).fit()
    after = snaps.after
    assert same(after[3]["discriminator"], after[2]["discriminator"])  # weights and BN statistics
    assert same(after[3]["opt_d"], after[2]["opt_d"]) and int(after[3]["opt_d"]["state"][0]["step"]) == 2
    buffers = [k for k in after[3]["generator"] if "running" in k or "num_batches" in k]
    assert buffers and all(same(after[3]["generator"][k], after[2]["generator"][k]) for k in buffers)
    assert int(after[3]["opt_g"]["state"][0]["step"]) == 3  # G's update was applied
    assert int(after[4]["opt_d"]["state"][0]["step"]) == 3 and finite(after[4])
    err = capsys.readouterr().err
    assert err.count("warning:") == 1, err
    assert ("warning: non-finite gradients (finite losses) in step 3: optimizer step left out: discriminator 1x "
            "(loop.nonfinite=skip)") in err
    records = run.metrics("train")
    assert [r.get("skipped_updates") for r in records] == [None, None, {"discriminator": 1}, None]
    assert all(math.isfinite(v) for r in records for v in r["losses"].values())


# -- freezing -----------------------------------------------------------------------------------------
def test_an_update_freezes_every_other_network_and_restores_it(host, tmp_path):
    trainer = Run.create(kitgan_config(tmp_path), host=host).trainer
    trainer.prepare()
    G, D = trainer.generator, trainer.discriminator
    G[0].bias.requires_grad_(False)  # frozen by the trainer itself: it stays frozen afterwards
    z, x = trainer.z[:2], trainer.x[:2]
    with trainer.kit.step(0):
        fake = G(z)
        with trainer.update_d:
            assert not any(p.requires_grad for p in G.parameters()) and all(p.requires_grad for p in D.parameters())
            trainer.update_d.backward(D(fake).mean(), retain_graph=True)  # not detached: the graph reaches G
            assert all(p.grad is None for p in G.parameters())  # ... and still no gradient lands in G
            assert all(p.grad is not None for p in D.parameters())
        assert [p.requires_grad for p in G.parameters()] == [True, False, True, True]
        with trainer.update_g:
            assert not any(p.requires_grad for p in D.parameters())
            trainer.update_g.backward(torch.nn.functional.l1_loss(fake, x) + D(fake).mean())
            assert all(p.grad is None for p in D.parameters())
            assert G[0].weight.grad is not None
        assert all(p.requires_grad for p in D.parameters())


def test_misuse_is_a_clear_error(host, tmp_path):
    trainer = Run.create(kitgan_config(tmp_path), host=host).trainer
    trainer.prepare()
    with pytest.raises(RuntimeError, match=r"outside `with self.kit.step\(batch_idx\):`"):
        with trainer.update_d:
            pass
    with trainer.kit.step(0):
        with pytest.raises(RuntimeError, match="inside `with update:`"):
            trainer.update_d.backward(trainer.discriminator(trainer.x[:2]).mean())
        with trainer.update_d:
            with pytest.raises(RuntimeError, match="updates do not nest"):
                with trainer.update_g:
                    pass
        with pytest.raises(RuntimeError, match="entered twice in one step"):
            with trainer.update_d:
                pass
    with pytest.raises(RuntimeError, match="TrainerKit declaration"):
        KitGanTrainer.kit.update(torch.nn.Linear(1, 1), trainer.opt_d)


def test_an_update_not_entered_on_the_group_s_last_batch_steps_when_the_step_ends(host, tmp_path):
    """A D:G ratio with accumulation: G has gradients from the group's first batch only; it still steps."""
    trainer = Run.create(kitgan_config(tmp_path, accumulate=2), host=host).trainer
    trainer.prepare()
    G, D, z, x = trainer.generator, trainer.discriminator, trainer.z[:2], trainer.x[:2]
    with trainer.kit.step(0) as step:
        assert not step.last
        with trainer.update_g:
            trainer.update_g.backward(torch.nn.functional.l1_loss(G(z), x))
    assert trainer.update_g.pending and trainer.opt_g.state_dict()["state"] == {}
    with trainer.kit.step(1) as step:
        assert step.last
        with trainer.update_d:
            trainer.update_d.backward(D(x).mean())
        assert trainer.update_g.pending  # not yet: at the end of the step
    assert not trainer.update_g.pending and int(trainer.opt_g.state_dict()["state"][0]["step"]) == 1
    assert all(p.grad is None for p in G.parameters())


# -- schedulers -----------------------------------------------------------------------------------
def test_a_step_unit_scheduler_steps_with_each_optimizer_step(host, tmp_path):
    run = Run.create(kitgan_config(tmp_path, samples=5, batch_size=1, accumulate=2, lr_decay=0.5), host=host).fit()
    lrs = [record["lr"] for record in run.metrics("train")]
    assert [r["opt_g"] for r in lrs] == pytest.approx([0.01, 0.005, 0.005, 0.0025, 0.00125])  # after updates 1-3
    assert {r["opt_d"] for r in lrs} == {0.01}
    assert run.trainer.sched_g.last_epoch == 3


def test_an_epoch_unit_scheduler_steps_once_per_epoch_at_step_epoch_schedulers(host, tmp_path):
    config = kitgan_config(tmp_path, loop={"epochs": 3}, samples=4, batch_size=1, accumulate=2, lr_decay=0.5,
                           lr_unit="epoch")
    run = Run.create(config, host=host).fit()
    lrs = [record["lr"]["opt_g"] for record in run.metrics("train")]
    assert lrs == pytest.approx([0.01] * 4 + [0.005] * 4 + [0.0025] * 4)  # not with the optimizer steps
    assert run.trainer.sched_g.last_epoch == 3
    assert run.trainer.update_g.scheduler_unit == "epoch"


def test_a_scheduler_unit_other_than_step_or_epoch_is_refused(host, tmp_path):
    trainer = Run.create(kitgan_config(tmp_path), host=host).trainer
    trainer.prepare()
    with pytest.raises(ValueError, match="scheduler_unit must be 'step' or 'epoch' \\(got 'batch'\\)"):
        trainer.kit.update(trainer.generator, trainer.opt_g, scheduler_unit="batch")


# -- accumulation, checkpoints and the end of the loop --------------------------------------------
def periodic_steps(trainer: Trainer) -> list[tuple[int, int]]:
    return [(int(c["epoch"]), int(c["global_step"])) for c in map(load_checkpoint, trainer.run_dir.periodic_checkpoints())]


def test_every_step_checkpoint_with_accumulation_resumes_bit_exactly(host, tmp_path):
    """5 batches per epoch in groups of 2 (2, 2, 1): global step multiples of 3 fall inside groups.

    Each due checkpoint waits for its group's end (steps 3 -> 4, 6 -> 7, 9), and a run resumed from any of
    them (as after a SIGKILL right after it was written) ends bit for bit as the uninterrupted run.
    """
    common = dict(loop={"epochs": 2}, samples=5, batch_size=1, accumulate=2, lr_decay=0.9)
    config = kitgan_config(tmp_path, **common)
    config["checkpoint"].update(every_steps=3, keep_last=20)
    full = Run.create(config, host=host).fit()
    assert full.trainer.global_step == 10
    final, steps = states(full.trainer), periodic_steps(full.trainer)
    for checkpoint in full.trainer.run_dir.periodic_checkpoints():
        resumed = Run.resume(full.dir, checkpoint=checkpoint, host=host).fit()
        assert resumed.trainer.global_step == 10
        assert same(states(resumed.trainer), final), checkpoint.name
    assert steps == [(0, 4), (1, 7), (1, 9)]


def test_a_step_checkpoint_due_on_an_epoch_s_last_batch_and_the_epoch_s_checkpoint_are_two_files(host, tmp_path):
    """As documented: before the epoch's end (it resumes into it) and after it (validation, on_epoch_end done)."""
    config = kitgan_config(tmp_path, loop={"epochs": 2}, samples=4, batch_size=1)
    config["checkpoint"].update(every_steps=2, every_epochs=1, keep_last=20)
    trainer = Run.create(config, host=host).fit().trainer
    assert periodic_steps(trainer) == [(0, 2), (0, 4), (1, 4), (1, 6), (1, 8), (2, 8)]
    before, after = (load_checkpoint(trainer.run_dir.checkpoints / name)
                     for name in ("epoch0000-step00000004.pt", "epoch0001-step00000004.pt"))
    assert (before["batch_in_epoch"], after["batch_in_epoch"]) == (4, 0)
    assert same(before["state"], after["state"])


class StopAt:
    def __init__(self, step: int):
        self.step = step

    @hookimpl
    def on_train_batch_end(self, trainer):
        if trainer.global_step == self.step:
            trainer.request_stop("enough")


@pytest.mark.parametrize("how", ["max_steps", "request_stop"])
def test_a_run_ending_inside_an_accumulation_group_finishes_the_group(host, tmp_path, how):
    """max_steps 4 (or a stop request at step 4) with groups of 3: the run trains to step 6, no gradient dropped."""
    loop = {"epochs": 2, **({"max_steps": 4} if how == "max_steps" else {})}
    config = kitgan_config(tmp_path, loop=loop, samples=7, batch_size=1, accumulate=3)
    config["checkpoint"].update(save_last=True)
    trainer = Run.create(config, host=host, plugins=[] if how == "max_steps" else [StopAt(4)]).fit().trainer
    assert trainer.global_step == 6 and trainer.batch_in_epoch == 6
    assert int(trainer.opt_g.state_dict()["state"][0]["step"]) == 2
    assert not trainer.update_g.pending and all(p.grad is None for p in trainer.generator.parameters())
    assert periodic_steps(trainer) == [(0, 6)]


# -- capabilities ---------------------------------------------------------------------------------
def test_declaring_the_kit_declares_its_capabilities():
    from nectargan_pix2pix.trainer import Pix2pixTrainer

    assert KitGanTrainer.capabilities == frozenset({NONFINITE_SKIP}) == TrainerKit.capabilities
    assert Pix2pixTrainer.capabilities == frozenset({NONFINITE_SKIP, "update_ratio"})  # and its d_every/g_every
    assert Trainer.capabilities == PlainTrainer.capabilities == frozenset()

    class Derived(KitGanTrainer):
        pass

    assert Derived.capabilities == frozenset({NONFINITE_SKIP})
    assert isinstance(KitGanTrainer.kit, TrainerKit) and KitGanTrainer.kit.trainer is None


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The test trainers installed as a (fake) distribution, for real ``nectargan`` subprocesses."""
    root = tmp_path_factory.mktemp("kitgan_site")
    make_fake_dist(root, "nectargan-kitgan-test", "kitgan_plugin", (HERE / "kitgan_plugin.py").read_text(),
                   entry_name="kitgan")
    shutil.copy(HERE / "kitgan_trainer.py", root / "kitgan_trainer.py")
    return root


def write_config(tmp_path: Path, trainer: str, nonfinite: str) -> Path:
    path = tmp_path / f"{trainer}.yaml"
    path.write_text(f"trainer: {trainer}\nrun: {{output_dir: {tmp_path / 'runs'}, device: cpu}}\n"
                    f"loop: {{epochs: 1, nonfinite: {nonfinite}}}\nvisualizers: []\n")
    return path


NO_TORCH_PROBE = """
import atexit, sys
atexit.register(lambda: sys.stderr.write("TORCH-IMPORTED\\n" if "torch" in sys.modules else "TORCH-FREE\\n"))
from nectargan_core.cli.main import main
sys.argv = ["nectargan", *sys.argv[1:]]
main()
"""


@pytest.mark.slow
def test_an_option_the_trainer_cannot_honour_is_refused_at_config_time(site, tmp_path):
    env = {"PYTHONPATH": str(site)}
    config = write_config(tmp_path, "plain", "skip")
    expected = (f"error: {config}: loop.nonfinite: trainer 'plain' (plugin 'kitgan' (nectargan-kitgan-test)) does "
                "not support 'skip' (it does not declare the capability 'nonfinite_skip': that it can leave the "
                "update of a non-finite batch out); set loop.nonfinite: stop, or, as the trainer's author, build its "
                "step on nectargan_core.TrainerKit (see docs/plugins/trainer-api.md)\n")
    for args in (["config", "validate", str(config)], ["train", "-c", str(config)],
                 ["train", "-c", str(config), "--nproc", "2"]):
        refused = run_cli(*args, env=env, cwd=tmp_path)
        assert (refused.returncode, refused.stderr, refused.stdout) == (2, expected, ""), args
        assert not (tmp_path / "runs").exists()  # no run directory was made

    ok = run_cli("config", "validate", str(write_config(tmp_path, "kitgan", "skip")), env=env)
    assert (ok.returncode, ok.stdout) == (0, f"{tmp_path / 'kitgan.yaml'}: ok\n"), ok.stderr
    # With nothing that needs a capability, validating imports no trainer (and no torch).
    plain_stop = write_config(tmp_path, "plain", "stop")
    probe = subprocess.run([sys.executable, "-c", NO_TORCH_PROBE, "config", "validate", str(plain_stop)],
                           capture_output=True, text=True, timeout=60, env={**env, "PATH": "/usr/bin:/bin"})
    assert probe.returncode == 0 and probe.stderr.splitlines()[-1] == "TORCH-FREE", probe.stderr


def test_the_refusal_names_where_the_value_came_from(host, tmp_path):
    """A value from ``--set`` is named as that override, not as the defaults or the file it overrides."""
    from nectargan_core.config import load_config
    from nectargan_core.errors import ConfigError

    with pytest.raises(ConfigError) as refused:
        load_config(None, ["trainer=plain", "loop.nonfinite=stop", "loop.nonfinite=skip"], host.registry)
    assert str(refused.value).startswith("--set loop.nonfinite=skip: loop.nonfinite: trainer 'plain' ")
    config = tmp_path / "plain.yaml"
    config.write_text("trainer: plain\nloop: {nonfinite: skip}\n")
    with pytest.raises(ConfigError) as refused:
        load_config(config, ["loop.epochs=2"], host.registry)
    assert str(refused.value).startswith(f"{config}: loop.nonfinite: trainer 'plain' ")


# -- DDP ----------------------------------------------------------------------------------------------
def kitgan_cli(output: str, *settings: str, nproc: int | None = None) -> list[str]:
    base = ["run.device=cpu", "run.deterministic=true", "visualizers=[]", "loop.epochs=1", "loop.log_every_steps=1",
            "loop.val_every_epochs=null", f"run.output_dir={output}", *settings]
    return ["train", "--trainer", "kitgan", *(a for s in base for a in ("--set", s)),
            *(["--nproc", str(nproc)] if nproc else [])]


@pytest.mark.slow
def test_sigkill_and_resume_with_accumulation_is_bit_exact(site, tmp_path):
    """5 batches per epoch in groups of 2, a checkpoint due every 3 steps, SIGKILL while training step 9.

    The last checkpoint before the kill is step 7 (due at 6, inside a group); the resumed run ends with the
    same state and metrics as the uninterrupted one.
    """
    env = {"PYTHONPATH": str(site)}
    common = ("loop.epochs=2", "kitgan.samples=5", "kitgan.batch_size=1", "kitgan.accumulate=2",
              "kitgan.lr_decay=0.9", "checkpoint.every_steps=3", "checkpoint.keep_last=20")
    full = run_cli(*kitgan_cli("full", *common), env=env, cwd=tmp_path)
    assert full.returncode == 0, full.stderr
    killed = run_cli(*kitgan_cli("killed", *common, "kitgan.kill_at_step=9"), env=env, cwd=tmp_path)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    run_dir = RunDir(tmp_path / "killed" / "run" / "version_0")
    assert load_checkpoint(run_dir.periodic_checkpoints()[-1])["global_step"] == 7
    resumed = run_cli("train", "--resume", str(run_dir.path), "--set", "kitgan.kill_at_step=null", env=env,
                      cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    ends = [load_checkpoint(RunDir(tmp_path / n / "run" / "version_0").periodic_checkpoints()[-1])
            for n in ("full", "killed")]
    assert ends[0]["global_step"] == ends[1]["global_step"] == 10
    assert same(ends[0]["state"], ends[1]["state"]) and same(ends[0]["rng"], ends[1]["rng"])
    logs = [[{k: v for k, v in json.loads(line).items() if k not in ("time", "elapsed")}
             for line in (tmp_path / n / "run/version_0/metrics.jsonl").read_text().splitlines()]
            for n in ("full", "killed")]
    assert logs[0] == logs[1]


@pytest.mark.slow
@pytest.mark.skipif(not torch.distributed.is_available(), reason="torch.distributed unavailable")
def test_two_processes_accumulating_equal_one_process_with_the_doubled_batch(site, tmp_path):
    """2 gloo processes x batch 1 with accumulation 2 (groups of 2, 1) = 1 process x batch 2, and no_sync is used."""
    env = {"PYTHONPATH": str(site)}
    common = ("kitgan.samples=6", "kitgan.accumulate=2")
    two = run_cli(*kitgan_cli("two", "kitgan.batch_size=1", *common, nproc=2), env=env, cwd=tmp_path, timeout=240)
    assert two.returncode == 0, two.stderr
    assert "(2 processes, gloo)" in two.stderr
    one = run_cli(*kitgan_cli("one", "kitgan.batch_size=2", *common), env=env, cwd=tmp_path)
    assert one.returncode == 0, one.stderr

    two_ckpt, one_ckpt = (load_checkpoint(RunDir(tmp_path / n / "run" / "version_0").periodic_checkpoints()[-1])
                          for n in ("two", "one"))
    assert two_ckpt["global_step"] == one_ckpt["global_step"] == 3
    assert int(two_ckpt["state"]["opt_g"]["state"][0]["step"]) == 2  # groups of 2 and 1 batches
    for net in NETS:
        assert_close(two_ckpt["state"][net], one_ckpt["state"][net], atol=2e-6, where=net)
    # The first batch of each group ran under no_sync; the group's last batch synchronised.
    records = [json.loads(line) for line in (tmp_path / "two/run/version_0/metrics.jsonl").read_text().splitlines()]
    assert [r["losses"]["synced"] for r in records if r["kind"] == "train"] == [0.0, 1.0, 1.0]


@pytest.mark.slow
@pytest.mark.skipif(not torch.distributed.is_available(), reason="torch.distributed unavailable")
def test_every_process_skips_when_one_process_has_a_nan_loss(site, tmp_path):
    """A NaN loss in rank 1 only: rank 0 leaves the update (and its BatchNorm statistics) out too.

    Compared with the same run where both ranks' losses are NaN at that step; the gradients stay finite
    (``nan_in: loss``), so only the ranks agreeing on the device flag makes rank 0 skip.
    """
    env = {"PYTHONPATH": str(site)}
    common = ("kitgan.samples=8", "kitgan.batch_size=2", "kitgan.norm=true", "kitgan.implementation=fused",
              "kitgan.nan_at_step=2", "kitgan.nan_in=loss", "loop.nonfinite=skip")
    for name, rank in (("one_rank", "1"), ("both", "null")):
        done = run_cli(*kitgan_cli(name, *common, f"kitgan.nan_rank={rank}", nproc=2), env=env, cwd=tmp_path,
                       timeout=240)
        assert done.returncode == 0, done.stderr
    one_rank, both = (load_checkpoint(RunDir(tmp_path / n / "run" / "version_0").periodic_checkpoints()[-1])
                      for n in ("one_rank", "both"))
    assert int(one_rank["state"]["opt_g"]["state"][0]["step"]) == 1  # step 2 of 2 was left out
    for net in NETS:
        assert same(one_rank["state"][net], both["state"][net]), net
