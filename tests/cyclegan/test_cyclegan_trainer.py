"""The CycleGAN trainer around the step: config checks, logs, schedule, examples, accumulation, non-finite skip."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from PIL import Image

from nectargan_core import Run, hookimpl
from nectargan_core.config import validate_config
from nectargan_core.errors import ConfigError
from nectargan_core.plugins import get_plugins
from nectargan_losses.schedules import build_schedule
from nectargan_translate.examples import LABEL_HEIGHT

from cyclegan_helpers import TINY_MODELS
from test_cyclegan_parity import cyclegan_config

LOSS_KEYS = {"G/G_A", "G/G_B", "G/cycle_A", "G/cycle_B", "G/idt_A", "G/idt_B", "G/total", "D/D_A", "D/D_B", "D/total"}


@pytest.fixture(scope="module")
def data(make_unpaired):
    return make_unpaired(12, 16)  # 6 train, 3 val, 3 test images per domain


def test_defaults_are_the_reference_s():
    config = validate_config({"trainer": "cyclegan"}, get_plugins().registry)
    assert config.models.generator.name == "resnet_9blocks"
    assert config.models.generator.options["norm"] == "instance" and config.models.generator.options["dropout"] == 0
    discriminator = config.models.discriminator
    assert discriminator.name == "patchgan_70" and discriminator.options["n_layers"] == 3
    assert discriminator.options["norm"] == "instance" and discriminator.options["conditional"] is False
    assert (config.loss.gan_mode, config.loss.lambda_A, config.loss.lambda_B, config.loss.lambda_identity) == \
        ("lsgan", 10.0, 10.0, 0.5)
    assert config.pool.size == 50
    assert (config.optim.lr_g, config.optim.lr_d, config.optim.beta1) == (2e-4, 2e-4, 0.5)
    options = config.data.options
    assert (config.data.name, options["load_size"], options["crop_size"], options["augment"]) == \
        ("unpaired", 286, 256, [{"name": "hflip", "p": 0.5}])
    # a key set on the default discriminator keeps its CycleGAN defaults
    narrowed = validate_config({"trainer": "cyclegan", "models": {"discriminator": {"ndf": 32}}},
                               get_plugins().registry)
    assert narrowed.models.discriminator.options["norm"] == "instance"
    assert narrowed.models.discriminator.options["conditional"] is False


@pytest.mark.parametrize("epochs", [1, 4, 9, 200])
def test_the_default_schedule_is_the_reference_policy_fitted_to_loop_epochs(epochs):
    config = validate_config({"trainer": "cyclegan", "loop": {"epochs": epochs}}, get_plugins().registry)
    schedule = build_schedule(config.optim.lr_schedule.model_dump(), get_plugins().registry, epochs=epochs)
    n_epochs, n_decay = epochs - epochs // 2, epochs // 2
    if epochs == 200:
        assert (n_epochs, n_decay) == (100, 100)  # the reference's 100 + 100
    for k in range(epochs):  # the reference's lambda_rule with epoch_count 1, at scheduler step k
        assert schedule.value(k) == pytest.approx(1.0 - max(0, k + 1 - n_epochs) / float(n_decay + 1))
    assert schedule.value(0) == 1.0 and (epochs < 2 or schedule.value(epochs - 1) < 1.0)


@pytest.mark.parametrize("section, value, message", [
    ("data", {"root": None}, "data.root: no dataset folder given; set data.root to a folder holding trainA/"),
    ("data", {"out_channels": 1}, "loss.lambda_identity: the identity losses feed domain B images (1 channels)"),
    ("models", {"discriminator": {"conditional": True}}, "discriminator.conditional: CycleGAN's discriminators judge "
                                                         "one image"),
    ("loss", {"gan_mode": "l1"}, "loss: gan_mode: unknown GAN objective 'l1'"),
])
def test_config_mistakes_are_one_line(tmp_path, data, section, value, message):
    with pytest.raises(ConfigError) as caught:
        run = Run.create(cyclegan_config(tmp_path, data, **{section: value}))
        run.trainer.prepare()
    assert message in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.slow
def test_a_run_logs_every_term_validates_both_directions_and_writes_both_in_its_examples(tmp_path, data):
    run = Run.create(cyclegan_config(tmp_path, data, loop={"epochs": 4, "log_every_steps": 3},
                                     examples={"every_epochs": 2, "count": 2}, pool={"size": 2}))
    run.fit()
    records = run.metrics()
    train = [r for r in records if r["kind"] == "train"]
    assert train and all(set(r["losses"]) == LOSS_KEYS for r in train)
    epochs = [r for r in records if r["kind"] == "epoch"]
    assert [round(r["lr"]["opt_G"] / 2e-4, 6) for r in epochs] == [1.0, 1.0, round(2 / 3, 6), round(1 / 3, 6)]
    assert [r["lr"]["opt_D"] for r in epochs] == [r["lr"]["opt_G"] for r in epochs]
    for record in epochs:
        assert {f"val/cycle_{d}_{m}" for d in "AB" for m in ("l1", "psnr", "ssim")} <= set(record["losses"])
    assert sorted(p.name for p in (run.dir / "examples").iterdir()) == ["epoch0002.png", "epoch0004.png"]
    # rows real_A | fake_B | rec_A for the 2 val A images, then real_B | fake_A | rec_B for the 2 val B images
    labelled = np.asarray(Image.open(run.dir / "examples" / "epoch0004.png"))
    # the columns named above (LABEL_HEIGHT rows), each row's direction (A to B, B to A) in a strip on the left
    left = labelled.shape[1] - (3 * 16 + 4 * 2)
    assert labelled.shape == (LABEL_HEIGHT + 4 * 16 + 5 * 2, left + 3 * 16 + 4 * 2, 3) and 20 < left < 60
    grid = labelled[LABEL_HEIGHT:, left:]
    trainer = run.trainer
    val = trainer.val_set
    cell = lambda row, col: grid[2 + row * 18:2 + row * 18 + 16, 2 + col * 18:2 + col * 18 + 16]  # noqa: E731
    for row, image in enumerate([val[0]["A"], val[1]["A"], val[0]["B"], val[1]["B"]]):
        expected = ((image + 1) / 2 * 255).round().clamp(0, 255).to(torch.uint8).permute(1, 2, 0).numpy()
        assert np.abs(cell(row, 0).astype(int) - expected.astype(int)).max() <= 1, row
    with torch.no_grad():
        fake_b = trainer.G_A(val[0]["A"][None])[0]
    expected = ((fake_b + 1) / 2 * 255).round().clamp(0, 255).to(torch.uint8).permute(1, 2, 0).numpy()
    assert np.abs(cell(0, 1).astype(int) - expected.astype(int)).max() <= 1  # G_A's translation of the first A


def weights(trainer):
    return {name: copy.deepcopy(trainer.stateful[name].state_dict()) for name in ("G_A", "G_B", "D_A", "D_B")}


def test_gradient_accumulation_equals_the_bigger_batch(tmp_path, data):
    per_sample = {"generator": {**TINY_MODELS["generator"], "norm": "none"},
                  "discriminator": {**TINY_MODELS["discriminator"], "norm": "none"}}
    common = dict(models=per_sample, pool={"size": 0})
    big = Run.create(cyclegan_config(tmp_path / "big", data, loop={"max_steps": 2}, **common)).fit()
    small = Run.create(cyclegan_config(tmp_path / "small", data, loop={"max_steps": 4},
                                       data={"batch_size": 1}, optim={"gradient_accumulation": 2}, **common)).fit()
    a, b = weights(big.trainer), weights(small.trainer)
    for name in a:
        for key in a[name]:
            torch.testing.assert_close(b[name][key], a[name][key], atol=1e-6, rtol=0, msg=f"{name}.{key}")
    assert int(small.trainer.opt_g.state_dict()["state"][0]["step"]) == 2


class Poison:
    """NaN input images at training step 3, and the state after every step."""

    def __init__(self):
        self.after = {}

    @hookimpl
    def on_train_batch_end(self, trainer):
        pools = [[image.clone() for image in p.images] for p in (trainer.fake_A_pool, trainer.fake_B_pool)]
        self.after[trainer.global_step] = (weights(trainer), pools, trainer.pool_random.getstate())


def test_skip_leaves_a_nan_batch_out_of_the_weights_and_the_pools(tmp_path, data, capsys):
    spy = Poison()
    run = Run.create(cyclegan_config(tmp_path, data, loop={"nonfinite": "skip", "epochs": 2, "max_steps": 5},
                                     pool={"size": 3},
                                     optim={"implementation": "foreach"}), plugins=[spy])
    trainer = run.trainer
    trainer.prepare()
    real = trainer.to_device
    trainer.to_device = lambda images: real(images) * (float("nan") if trainer.global_step + 1 == 3 else 1.0)
    run.fit()
    (before, pools_before, random_before), (after, pools_after, random_after) = spy.after[2], spy.after[3]
    for name in before:
        for key in before[name]:
            assert torch.equal(before[name][key], after[name][key]), (name, key)
    assert random_before == random_after
    for old, new in zip(pools_before, pools_after, strict=True):
        assert len(old) == len(new) == 3 and all(torch.equal(a, b) for a, b in zip(old, new))
    final = spy.after[5]
    assert all(torch.isfinite(image).all() for pool in final[1] for image in pool)
    assert final[2] != random_after  # later steps draw again
    assert all(torch.isfinite(t).all() for net in final[0].values() for t in net.values() if t.is_floating_point())
    assert "non-finite loss" in capsys.readouterr().err


def test_the_start_summary_says_what_defines_the_run(tmp_path, data):
    """As pix2pix's: the networks with parameter counts, the data per domain and split, the objective and the
    pools, precision, optimizer and LR schedule; the grids name their columns."""
    run = Run.create(cyclegan_config(tmp_path, data))
    run.trainer.prepare()
    rows = run.trainer.describe()
    assert list(rows)[:9] == ["trainer", "device", "precision", "networks", "data", "loss", "optimizer",
                              "lr schedule", "schedule"]
    count = lambda name: f"{sum(p.numel() for p in getattr(run.trainer, name).parameters()):,} parameters"
    assert rows["networks"].startswith(f"G_A {count('G_A')}; G_B {count('G_B')}; D_A {count('D_A')}; "
                                       f"D_B {count('D_B')} (generator ")
    assert rows["data"] == f"unpaired {data}: 6 A + 6 B train / 3 A + 3 B val"
    loss = run.trainer.config.loss
    assert rows["loss"].startswith(f"{loss.gan_mode} both ways, cycle {loss.lambda_A:g}|rec_A - A| + "
                                   f"{loss.lambda_B:g}|rec_B - B|")
    assert rows["optimizer"].startswith("Adam (") and "lr G 0.0002, D 0.0002" in rows["optimizer"]
    assert run.trainer.example_columns == ("real", "translated", "reconstructed")
