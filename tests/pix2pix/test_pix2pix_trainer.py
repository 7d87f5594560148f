"""The pix2pix trainer: the reference step, exact resume, precision, accumulation, schedules."""

from __future__ import annotations

import copy
from pathlib import Path
import json
import math

import pytest
import torch
import torch.nn.functional as F

from nectargan_core import Run, load_checkpoint
from nectargan_core.errors import ConfigError
from translation_fixtures import pix2pix_config as config


@pytest.fixture(scope="module")
def synth(make_synth):
    return make_synth(16, 32)


def reference_step(G, D, opt_g, opt_d, real_a, real_b):
    """The reference pix2pix iteration (optimize_parameters), written out by hand."""
    fake_b = G(real_a)
    for p in D.parameters():
        p.requires_grad_(True)
    opt_d.zero_grad()
    pred_fake = D(torch.cat([real_a, fake_b.detach()], 1))
    loss_d_fake = F.binary_cross_entropy_with_logits(pred_fake, torch.zeros_like(pred_fake))
    pred_real = D(torch.cat([real_a, real_b], 1))
    loss_d_real = F.binary_cross_entropy_with_logits(pred_real, torch.ones_like(pred_real))
    loss_d = 0.5 * (loss_d_fake + loss_d_real)
    loss_d.backward()
    opt_d.step()
    for p in D.parameters():
        p.requires_grad_(False)
    opt_g.zero_grad()
    pred_fake = D(torch.cat([real_a, fake_b], 1))
    loss_g_gan = F.binary_cross_entropy_with_logits(pred_fake, torch.ones_like(pred_fake))
    loss_g_l1 = F.l1_loss(fake_b, real_b) * 100.0
    (loss_g_gan + loss_g_l1).backward()
    opt_g.step()
    return {"D": loss_d.item(), "G/gan": loss_g_gan.item(), "G/l1": loss_g_l1.item()}


def test_one_step_matches_the_hand_written_reference_step(tmp_path, synth):
    run = Run.create(config(tmp_path, synth, loop={"max_steps": 1, "log_every_steps": 1},
                            checkpoint={"save_last": False, "every_epochs": None}))
    trainer = run.trainer
    trainer.prepare()
    G, D = copy.deepcopy(trainer.generator), copy.deepcopy(trainer.discriminator)
    batch = next(iter(trainer.train_loader))
    opt_g = torch.optim.Adam(G.parameters(), lr=2e-4, betas=(0.5, 0.999), foreach=False)
    opt_d = torch.optim.Adam(D.parameters(), lr=2e-4, betas=(0.5, 0.999), foreach=False)

    torch.manual_seed(123)
    expected = reference_step(G, D, opt_g, opt_d, batch["A"], batch["B"])
    torch.manual_seed(123)
    logs = trainer.train_step(batch=batch, batch_idx=0)

    assert logs["D/gan_d"].item() == pytest.approx(expected["D"], abs=1e-6)
    assert logs["G/gan"].item() == pytest.approx(expected["G/gan"], abs=1e-6)
    assert logs["G/l1"].item() == pytest.approx(expected["G/l1"], abs=1e-5)
    for ours, theirs in ((trainer.generator, G), (trainer.discriminator, D)):
        for (name, a), b in zip(ours.state_dict().items(), theirs.state_dict().values()):
            assert torch.allclose(a, b, atol=1e-6), name
    # D received no gradient from G's update, and is trainable again afterwards
    assert all(p.requires_grad for p in trainer.discriminator.parameters())


def generator_state(run):
    return load_checkpoint(run.trainer.last_checkpoint)["state"]["generator"]


@pytest.mark.parametrize("stop", ["epoch", "mid-epoch"])
def test_resume_gives_the_same_weights_and_examples(tmp_path, synth, stop):
    common = dict(loop={"epochs": 2}, checkpoint={"every_steps": 3, "keep_last": 10})
    straight = Run.create(config(tmp_path / "a", synth, **common)).fit()
    first = config(tmp_path / "b", synth, **common)
    first["loop"].update({"epochs": 1} if stop == "epoch" else {"max_steps": 5})
    interrupted = Run.create(first).fit()
    resumed = Run.resume(interrupted.dir, overrides=["loop.epochs=2", "loop.max_steps=null"]).fit()
    a, b = generator_state(straight), generator_state(resumed)
    assert all(torch.equal(a[k], b[k]) for k in a)
    for name in ("epoch0001.png", "epoch0002.png"):
        assert (straight.dir / "examples" / name).read_bytes() == (resumed.dir / "examples" / name).read_bytes()
    strip = lambda records: [{k: v for k, v in r.items() if k not in {"time", "elapsed"}} for r in records]  # noqa: E731
    assert strip(straight.metrics()) == strip(resumed.metrics())


def test_validation_metrics_best_checkpoint_and_lr_schedule(tmp_path, synth):
    cfg = config(tmp_path, synth, loop={"epochs": 3},
                 optim={"lr_schedule": {"name": "pix2pix_linear", "n_epochs": 1, "n_epochs_decay": 2}},
                 checkpoint={"best_metric": "val/psnr"})  # best_mode auto: PSNR is better higher
    run = Run.create(cfg).fit()
    val = run.metrics("val")
    assert [sorted(r["metrics"]) for r in val] == [["l1", "psnr", "ssim"]] * 3
    assert all(0 < r["metrics"]["ssim"] <= 1 and r["metrics"]["psnr"] > 0 for r in val)
    psnr = [r["metrics"]["psnr"] for r in val]
    best = load_checkpoint(run.run_dir.best_checkpoint)
    assert best["epoch"] == psnr.index(max(psnr)) + 1 and best["loop"]["best_value"] == pytest.approx(max(psnr))
    # reference rule: lr = base * (1 - max(0, epoch + 1 - n_epochs) / (n_epochs_decay + 1)), stepped per epoch
    lrs = [r["lr"]["opt_g"] for r in run.metrics("epoch")]
    # (the epoch record shows the LR used during that epoch; the scheduler steps after it)
    assert lrs == pytest.approx([2e-4 * (1 - max(0, e + 1 - 1) / 3) for e in range(3)])
    assert sorted(p.name for p in (run.dir / "examples").iterdir()) == [
        "epoch0001.png", "epoch0002.png", "epoch0003.png"]


def test_gradient_accumulation_equals_a_bigger_batch(tmp_path, synth):
    """Without BN, dropout or the GAN term for G, 2 batches of 1 accumulated = 1 batch of 2."""
    models = {"generator": {"name": "unet", "depth": 5, "ngf": 8, "norm": "none", "dropout_layers": 0},
              "discriminator": {"name": "patchgan", "ndf": 8, "n_layers": 2, "norm": "none"}}
    common = dict(models=models, loss={"terms": {"gan": {"weight": 0}}},
                  data={"shuffle": False, "augment": []}, loop={"max_steps": 2, "log_every_steps": 1})
    big = Run.create(config(tmp_path / "big", synth, **common)).trainer
    big.config.loop.max_steps = 1
    big.fit()
    small_cfg = config(tmp_path / "small", synth, **common)
    small_cfg["data"]["batch_size"] = 1
    small_cfg["optim"] = {"implementation": "single", "gradient_accumulation": 2}
    small = Run.create(small_cfg).trainer.fit()
    for key in ("generator", "discriminator"):
        a = getattr(big, key).state_dict()
        b = getattr(small, key).state_dict()
        for name in a:
            assert torch.allclose(a[name], b[name], atol=1e-6), (key, name)


def test_d_to_g_update_ratio(tmp_path, synth):
    run = Run.create(config(tmp_path, synth, optim={"implementation": "single", "g_every": 2},
                            loop={"max_steps": 2, "log_every_steps": 1}))
    trainer = run.trainer
    trainer.prepare()
    batch = next(iter(trainer.train_loader))
    before = {k: v.clone() for k, v in trainer.generator.named_parameters()}
    trainer.global_step = 1  # an odd step: D only
    logs = trainer.train_step(batch=batch, batch_idx=0)
    assert "D/gan_d" in logs and not any(k.startswith("G/") for k in logs)
    assert all(torch.equal(before[k], v) for k, v in trainer.generator.named_parameters())


def test_bf16_autocast_on_cpu(tmp_path, synth):
    run = Run.create(config(tmp_path, synth, precision={"amp": "bf16", "channels_last": True},
                            loop={"max_steps": 2, "log_every_steps": 2})).fit()
    losses = run.metrics("train")[-1]["losses"]
    assert all(torch.isfinite(torch.tensor(v)) for v in losses.values())
    assert run.trainer.precision.name == "bf16"


def test_fp16_on_cpu_is_a_clear_error_before_the_run_directory(tmp_path, synth):
    cfg = config(tmp_path, synth, precision={"amp": "fp16"})
    with pytest.raises(ConfigError, match="^precision.amp: fp16 autocast is not supported for training on CPU"):
        Run.create(cfg)
    assert not Path(cfg["run"]["output_dir"]).exists()


def test_missing_data_root_is_a_clear_error(tmp_path):
    cfg = config(tmp_path, "x")
    del cfg["data"]["root"]
    with pytest.raises(ConfigError, match="data.root: no dataset folder given"):
        Run.create(cfg).trainer.prepare()


def test_early_stopping(tmp_path, synth):
    cfg = config(tmp_path, synth, loop={"epochs": 10},
                 validation={"early_stop_metric": "psnr", "early_stop_patience": 1, "early_stop_min_delta": 1000})
    run = Run.create(cfg).fit()
    assert run.trainer.epochs_done == 2
    status = run.status()
    assert status["status"] == "finished" and status["reason"].startswith("early stopping: val/psnr")


@pytest.mark.parametrize("metric, values, bad", [
    ("l1", [0.5, 0.4, 0.3], 0),  # auto: lower L1 is better, so each one improves
    ("psnr", [20.0, 19.0, 18.0], 2),  # auto: higher PSNR is better, so none after the first improves
])
def test_early_stopping_takes_the_direction_from_the_metric(metric, values, bad):
    from nectargan_translate.options import ValidationSection
    from nectargan_translate.training import EarlyStopping

    section = ValidationSection(early_stop_metric=metric)
    assert section.early_stop_mode == "auto"
    stopping = EarlyStopping()
    for value in values:
        stopping.update(value, metric, section.early_stop_mode, section.early_stop_min_delta)
    assert stopping.bad == bad


def test_gradient_clipping_bounds_each_network(tmp_path, synth, monkeypatch):
    norms = []
    clip = torch.nn.utils.clip_grad_norm_

    def recording_clip(parameters, max_norm, *args, **kwargs):
        parameters = list(parameters)
        norms.append((max_norm, clip(parameters, max_norm, *args, **kwargs).item()))
        after = torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in parameters if p.grad is not None]))
        assert after.item() <= max_norm * (1 + 1e-4)
        return after

    monkeypatch.setattr(torch.nn.utils, "clip_grad_norm_", recording_clip)
    Run.create(config(tmp_path, synth, optim={"implementation": "single", "grad_clip": 0.01},
                      loop={"max_steps": 2, "log_every_steps": 1})).fit()
    assert len(norms) == 4  # D and G, two steps
    assert all(limit == 0.01 and before > 0.01 for limit, before in norms)  # the clip was needed


def test_validation_reads_max_batches_and_each_rank_its_share(synth, tmp_path):
    from nectargan_core.distributed import Distributed

    cfg = config(tmp_path, synth, data={"val": {"batch_size": 1}}, validation={"max_batches": 1})
    trainer = Run.create(cfg).trainer
    trainer.prepare()
    assert len(trainer.val_set) >= 2
    capped = list(trainer.eval_loader(trainer.val_set, 1))
    assert len(capped) == 1 and capped[0]["A"].shape[0] == 1
    everything = [batch["A"] for batch in trainer.eval_loader(trainer.val_set)]
    assert len(everything) == len(trainer.val_set)
    torch.testing.assert_close(capped[0]["A"], everything[0])
    shares = []
    for rank in (0, 1):
        trainer.dist = Distributed(world_size=2, rank=rank)
        shares.append([batch["A"] for batch in trainer.eval_loader(trainer.val_set)])
    assert [len(s) for s in shares] == [-(-len(everything) // 2), len(everything) // 2]
    for index, images in enumerate(everything):  # every image exactly once, rank = index % 2
        torch.testing.assert_close(shares[index % 2][index // 2], images)


@pytest.mark.parametrize("fast, warned", [(False, True), (True, False)])
def test_bf16_on_a_cpu_without_bf16_kernels_warns(monkeypatch, capsys, fast, warned):
    import nectargan_core.precision as precision

    monkeypatch.setattr(precision, "cpu_has_fast_bf16", lambda: fast)
    assert precision.resolve_amp("bf16", torch.device("cpu")) is torch.bfloat16
    assert precision.resolve_amp("auto", torch.device("cpu")) is None
    err = capsys.readouterr().err
    assert ("warning: precision.amp: this CPU has no bf16 instructions" in err) is warned
    assert err.count("\n") == (1 if warned else 0)


@pytest.mark.parametrize("graphs, bf16, expected", [
    (False, True, None), (True, True, torch.bfloat16), (True, False, torch.float16)])
def test_amp_auto_on_cuda_is_mixed_only_for_a_replayed_step(monkeypatch, graphs, bf16, expected):
    """Measured on an H200: eager bf16 steps were slower than fp32 at 256x1 and 256x16, replayed ones faster."""
    import nectargan_core.precision as precision

    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: bf16)
    assert precision.resolve_amp("auto", torch.device("cuda"), graphs=graphs) is expected
    assert precision.resolve_amp("off", torch.device("cuda"), graphs=graphs) is None
    assert precision.resolve_amp("bf16", torch.device("cuda"), graphs=False) is torch.bfloat16


def test_the_precision_row_says_what_auto_chose_on_a_cpu(synth, tmp_path):
    trainer = Run.create(config(tmp_path, synth)).trainer
    trainer.prepare()
    assert trainer.precision.name == "fp32" and trainer.describe()["precision"].startswith("fp32 (precision.amp: auto")
    assert trainer.step_graphs.decision.text == ("off: CUDA graphs need a CUDA device (this run trains on cpu)")


def test_sync_batchnorm_with_train_mode_validation_is_refused_in_a_distributed_run(synth, tmp_path):
    from nectargan_core.distributed import Distributed

    run = Run.create(config(tmp_path, synth, distributed={"sync_batchnorm": True}, validation={"eval_mode": False}))
    run.trainer.dist = Distributed(world_size=2, rank=0)  # the check comes before any process group is needed
    with pytest.raises(ConfigError, match=r"^distributed.sync_batchnorm with validation.eval_mode=false: .*"
                                          r"set validation.eval_mode=true$"):
        run.trainer.prepare()


@pytest.mark.parametrize("gan_mode", ["vanilla", "wgan-gp"])
def test_pix2pix_trains_with_a_multiscale_discriminator(tiny_config, tiny_paired_dataset, run_training, gan_mode):
    """pix2pixHD's discriminator: one logit map per scale, the GAN losses added over the scales."""
    config = tiny_config("pix2pix", data={"root": str(tiny_paired_dataset)}, loss={"gan_mode": gan_mode},
                         models={"discriminator": {"name": "patchgan_multiscale", "num_scales": 2, "n_layers": 1,
                                                   "ndf": 8, "max_width": 16}})
    result = run_training(config)
    steps = [r for r in result.metrics if r["kind"] == "train"]
    assert len(steps) == 2 and all(math.isfinite(v) for r in steps for v in r["losses"].values()), steps
    summary = dict(json.loads((result.dir / "summary.json").read_text())["rows"])
    assert summary["discriminator"].startswith("patchgan_multiscale: ") and "receptive field 16x16" in summary[
        "discriminator"], summary["discriminator"]


def test_a_run_recorded_before_the_paired_dataset_moved_to_translate_resumes(tiny_config, tiny_paired_dataset,
                                                                           run_training):
    """Runs of 0.1.0 development builds recorded 'paired' as nectargan-pix2pix's; translate took it over (formerly=)."""
    import yaml

    result = run_training(tiny_config("pix2pix", data={"root": str(tiny_paired_dataset)}))
    config_file = result.dir / "config.yaml"
    recorded = "- kind: dataset\n  name: paired\n  plugin: translate\n  distribution: nectargan-translate\n"
    assert recorded in config_file.read_text()
    config_file.write_text(config_file.read_text().replace(recorded, recorded.replace(
        "nectargan-translate", "nectargan-pix2pix").replace("plugin: translate", "plugin: pix2pix")))
    resumed = Run.resume(result.dir, overrides=["loop.epochs=2"]).fit()
    assert resumed.trainer.epochs_done == 2
    records = yaml.safe_load(config_file.read_text())["provenance"]
    assert {"kind": "dataset", "name": "paired", "plugin": "translate", "distribution": "nectargan-translate",
            "version": "0.1.0"} in records
