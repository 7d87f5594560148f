"""The ``pix2pix-reference`` preset is the reference's recipe, and the defaults are coherent.

The reference's defaults below are those of junyanz/pytorch-CycleGAN-and-pix2pix
(``options/base_options.py``, ``train_options.py``, ``test_options.py`` and
``models/pix2pix_model.py``, which sets ``netG unet_256``, ``norm batch``,
``dataset_mode aligned``, ``gan_mode vanilla``, ``pool_size 0`` and
``lambda_L1 100`` for ``--model pix2pix``); ``test.py`` then forces batch 1,
serial batches and no flips, and ``load_size`` defaults to ``crop_size``.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from torchvision import transforms as reference_transforms

from nectargan_core.config import load_config
from nectargan_core.plugins import get_plugins
from nectargan_core.presets import preset_data
from nectargan_losses.schedules import build_schedule, lr_scheduler
from nectargan_translate.data.paired import PairedDataset
from nectargan_translate.training import make_adam
from support import assert_preset_is_recipe, reference_recipe_common

#: ``python train.py --model pix2pix`` with every other option at its default.
REFERENCE_TRAIN = {
    "input_nc": 3, "output_nc": 3, "ngf": 64, "ndf": 64, "netD": "basic", "netG": "unet_256", "n_layers_D": 3,
    "norm": "batch", "init_type": "normal", "init_gain": 0.02, "no_dropout": False, "dataset_mode": "aligned",
    "direction": "AtoB", "serial_batches": False, "batch_size": 1, "load_size": 286, "crop_size": 256,
    "preprocess": "resize_and_crop", "no_flip": False, "n_epochs": 100, "n_epochs_decay": 100, "epoch_count": 1,
    "beta1": 0.5, "lr": 0.0002, "gan_mode": "vanilla", "pool_size": 0, "lr_policy": "linear", "lambda_L1": 100.0,
    "save_epoch_freq": 5,
}
#: ``python test.py --model pix2pix``: what test_options.py and test.py change.
REFERENCE_TEST = {"load_size": 256, "crop_size": 256, "preprocess": "resize_and_crop", "no_flip": True,
                  "serial_batches": True, "batch_size": 1, "num_test": 50, "eval": False}


def reference_recipe(train: dict, test: dict) -> dict[str, object]:
    """The config values (dotted keys) that the reference's options mean here, one option at a time."""
    assert test["preprocess"] == "resize_and_crop" and train["pool_size"] == 0 and train["dataset_mode"] == "aligned"
    return {
        "trainer": "pix2pix",
        **reference_recipe_common(train, test),
        "optim.d_every": 1, "optim.g_every": 1,
        "models.generator.name": train["netG"],
        "models.generator.in_channels": train["input_nc"], "models.generator.out_channels": train["output_nc"],
        "models.generator.ngf": train["ngf"], "models.generator.max_width": 8 * train["ngf"],
        "models.generator.norm": train["norm"], "models.generator.block": "unet",
        "models.generator.upsample": "transposed", "models.generator.negative_slope": 0.2,
        "models.generator.dropout_layers": 0 if train["no_dropout"] else 3, "models.generator.dropout": 0.5,
        "models.generator.init": train["init_type"], "models.generator.init_gain": train["init_gain"],
        "models.discriminator.name": "patchgan_70", "models.discriminator.n_layers": 3,
        "models.discriminator.ndf": train["ndf"], "models.discriminator.norm": train["norm"],
        "models.discriminator.conditional": True,
        "models.discriminator.input_channels": train["input_nc"],
        "models.discriminator.target_channels": train["output_nc"],
        "models.discriminator.init": train["init_type"], "models.discriminator.init_gain": train["init_gain"],
        "loss.spec": "basic",  # G: GAN + 100 * L1, D: 0.5 * (real + fake)
        "loss.gan_mode": train["gan_mode"], "loss.terms": {}, "loss.add": {}, "loss.drop": [],
        "data.name": "paired", "data.layout": "aligned",
    }


@pytest.fixture(scope="module")
def registry():
    return get_plugins().registry


def test_the_preset_is_the_reference_recipe_key_by_key(registry):
    assert_preset_is_recipe(registry, "pix2pix-reference", reference_recipe(REFERENCE_TRAIN, REFERENCE_TEST))


def test_the_presets_lr_follows_the_reference_policy_for_all_200_epochs(registry):
    config = load_config(preset_data(registry, "pix2pix-reference"), (), registry)
    schedule = build_schedule(config.optim.lr_schedule.model_dump(), registry, epochs=config.loop.epochs)

    def lrs(factory) -> list[float]:
        optimizer = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=2e-4)
        scheduler, seen = factory(optimizer), []
        for _ in range(config.loop.epochs):
            seen.append(optimizer.param_groups[0]["lr"])
            optimizer.step()
            scheduler.step()
        return seen

    def reference_rule(epoch: int) -> float:  # networks.get_scheduler, lr_policy 'linear'
        return 1.0 - max(0, epoch + 1 - 100) / float(100 + 1)

    assert lrs(lambda o: lr_scheduler(o, schedule)) == lrs(lambda o: torch.optim.lr_scheduler.LambdaLR(o, reference_rule))


@pytest.mark.parametrize("epochs", [None, 1, 7, 200])
def test_the_default_lr_schedule_fits_the_runs_epochs(registry, epochs):
    config = load_config({"trainer": "pix2pix"}, [] if epochs is None else [f"loop.epochs={epochs}"], registry)
    total = config.loop.epochs
    assert total == (10 if epochs is None else epochs)
    schedule = build_schedule(config.optim.lr_schedule.model_dump(), registry, epochs=total)
    trained = [schedule.value(k) for k in range(total)]  # the multiplier in force during each epoch
    assert trained[0] == 1.0
    assert schedule.value(total) == 0.0  # after the last epoch the LR has decayed to 0
    if total > 1:
        assert trained[-1] < 1.0  # the decay started within the run
        half = (total + 1) // 2
        assert trained[:half] == [1.0] * half  # constant for the first half
        assert all(a > b for a, b in zip(trained[half - 1:], trained[half:]))  # then strictly decreasing
    if total == 200:
        assert (schedule.n_epochs, schedule.n_epochs_decay) == (100, 100)  # the reference's numbers


def test_a_schedule_whose_decay_never_starts_is_warned_about(tmp_path, make_synth, capsys):
    from nectargan_core import Run

    config = {"trainer": "pix2pix", "run": {"output_dir": str(tmp_path), "device": "cpu"},
              "data": {"root": str(make_synth(8, 32)), "load_size": 32, "crop_size": 32, "num_workers": 0},
              "models": {"generator": {"name": "unet", "depth": 5, "ngf": 4}, "discriminator": {"ndf": 4}},
              "optim": {"lr_schedule": {"name": "pix2pix_linear", "n_epochs": 100, "n_epochs_decay": 100}},
              "visualizers": []}
    Run.create(config).trainer.prepare()
    assert ("warning: optim.lr_schedule: the LR stays constant for 100 epochs and the run trains 10 (loop.epochs), "
            "so its decay never starts") in capsys.readouterr().err
    del config["optim"]
    Run.create(config).trainer.prepare()
    assert "decay never starts" not in capsys.readouterr().err


def test_adam_default_is_the_kernel_the_reference_gets():
    """``optim.implementation: default`` steps bit for bit as ``torch.optim.Adam(params, lr, betas)``."""
    from types import SimpleNamespace

    torch.manual_seed(0)
    ours = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8), torch.nn.Conv2d(8, 1, 3))
    theirs = copy.deepcopy(ours)
    options = SimpleNamespace(beta1=0.5, beta2=0.999, weight_decay=0.0, implementation="default")
    opt_ours = make_adam(ours.parameters(), 2e-4, options, torch.device("cpu"))
    opt_theirs = torch.optim.Adam(theirs.parameters(), lr=2e-4, betas=(0.5, 0.999))  # the reference's call
    assert opt_ours.defaults["foreach"] is None and opt_ours.defaults["fused"] is None
    x = torch.randn(2, 3, 16, 16)
    for _ in range(5):
        for model, optimizer in ((ours, opt_ours), (theirs, opt_theirs)):
            optimizer.zero_grad()
            model(x).square().mean().backward()
            optimizer.step()
    assert all(torch.equal(a, b) for a, b in zip(ours.state_dict().values(), theirs.state_dict().values()))


def aligned_png(path: Path, width: int, height: int, seed: int = 0) -> Path:
    pixels = np.random.default_rng(seed).integers(0, 256, (height, 2 * width, 3), dtype=np.uint8)
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(pixels).save(path)
    return path


def reference_pipeline(path: Path, size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The reference's AlignedDataset at test time: RGB, halves, Resize (PIL bicubic), ToTensor, Normalize."""
    ab = Image.open(path).convert("RGB")
    w, h = ab.size
    halves = ab.crop((0, 0, w // 2, h)), ab.crop((w // 2, 0, w, h))
    transform = reference_transforms.Compose([
        reference_transforms.Resize([size, size], reference_transforms.InterpolationMode.BICUBIC),
        reference_transforms.ToTensor(), reference_transforms.Normalize((0.5, 0.5, 0.5), (0.5, 0.5, 0.5))])
    a, b = (transform(half) for half in halves)
    return a, b


@pytest.mark.parametrize("rounding", ["uint8", "none"])
def test_uint8_resizing_is_the_references_pil_resize_bit_for_bit(tmp_path, rounding):
    aligned_png(tmp_path / "data" / "test" / "0.png", 301, 203)
    options = {"root": str(tmp_path / "data"), "load_size": 256, "crop_size": 256, "resize_rounding": rounding,
               "test": {"preprocess": "resize"}}
    sample = PairedDataset(options, "test")[0]
    want_a, want_b = reference_pipeline(tmp_path / "data" / "test" / "0.png", 256)
    same = torch.equal(sample["A"], want_a) and torch.equal(sample["B"], want_b)
    assert same == (rounding == "uint8")  # float32 resizing keeps fractions the reference rounds away


def test_uint8_training_samples_are_crops_and_flips_of_the_pil_resize(tmp_path):
    aligned_png(tmp_path / "data" / "train" / "0.png", 120, 90, seed=1)
    options = {"root": str(tmp_path / "data"), "load_size": 286, "crop_size": 256, "resize_rounding": "uint8"}
    dataset = PairedDataset(options, "train")
    resized_a, resized_b = reference_pipeline(tmp_path / "data" / "train" / "0.png", 286)
    for epoch in range(3):
        sample = dataset[(epoch, 0)]
        positions = [(top, left, flip) for top in range(31) for left in range(31) for flip in (False, True)]
        corner = [p for p in positions if torch.equal(sample["A"][:, :2, :2], crop(resized_a, *p)[:, :2, :2])]
        found = [p for p in corner if torch.equal(sample["A"], crop(resized_a, *p))
                 and torch.equal(sample["B"], crop(resized_b, *p))]
        assert len(found) == 1, epoch


def crop(image: torch.Tensor, top: int, left: int, flip: bool) -> torch.Tensor:
    window = image[:, top:top + 256, left:left + 256]
    return window.flip(-1) if flip else window


@pytest.mark.slow  # two steps and a test of the full-size unet_256 at 256 x 256
def test_the_preset_trains_and_tests_in_train_mode(tmp_path, make_synth, registry):
    from nectargan_core import Run
    from nectargan_translate.tester import run_test

    data = make_synth(8, 32)  # 32 x 32 pairs, resized to 286 and cropped to 256 as the recipe says
    overrides = [f"data.root={data}", "loop.max_steps=2", "run.device=cpu", "data.num_workers=0",
                 f"run.output_dir={tmp_path / 'runs'}", "visualizers=[]", "examples.every_epochs=null"]
    run = Run.create(load_config(preset_data(registry, "pix2pix-reference"), overrides, registry)).fit()
    assert (run.trainer.epochs_done, run.trainer.global_step) == (0, 2)
    assert isinstance(run.trainer.opt_g, torch.optim.Adam) and run.trainer.opt_g.defaults["fused"] is None
    stored = (run.dir / "config.yaml").read_text()
    assert "epochs: 200" in stored and "implementation: default" in stored and "mode: train" in stored

    report = run_test(run.dir)  # no mode: the run's test.mode (train) decides
    assert report.mode == "train" and report.out_dir.name.endswith("-test-train-mode")
    metrics = json.loads((report.out_dir / "metrics.json").read_text())
    assert metrics["mode"] == "train" and metrics["images"] == len(list((data / "test").iterdir()))
    assert all(Image.open(path).size == (256, 256) for path in (report.out_dir / "images").iterdir())  # resized
    again = run_test(run.dir, mode="eval")
    assert again.mean != report.mean  # dropout and batch statistics do change the outputs
