"""The ``cyclegan-reference`` preset is the reference's recipe; ``export --format reference`` writes G_A and G_B.

The reference's defaults below are those of junyanz/pytorch-CycleGAN-and-pix2pix
(``options/base_options.py``, ``train_options.py``, ``test_options.py`` and
``models/cycle_gan_model.py``, which sets ``--no_dropout`` and adds
``lambda_A``, ``lambda_B`` and ``lambda_identity``); ``test.py`` forces batch
1, serial batches and no flips, and ``load_size`` defaults to ``crop_size``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

from nectargan_core import Run
from nectargan_core.config import load_config
from nectargan_core.plugins import get_plugins
from nectargan_core.presets import preset_data
from nectargan_translate.inference import load_generator

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "reference"))
from reference_networks import define_G  # noqa: E402

from support import assert_preset_is_recipe, reference_recipe_common  # noqa: E402
from test_cyclegan_parity import cyclegan_config  # noqa: E402

#: ``python train.py --model cycle_gan`` with every other option at its default.
REFERENCE_TRAIN = {
    "input_nc": 3, "output_nc": 3, "ngf": 64, "ndf": 64, "netD": "basic", "netG": "resnet_9blocks", "n_layers_D": 3,
    "norm": "instance", "init_type": "normal", "init_gain": 0.02, "no_dropout": True, "dataset_mode": "unaligned",
    "direction": "AtoB", "serial_batches": False, "batch_size": 1, "load_size": 286, "crop_size": 256,
    "preprocess": "resize_and_crop", "no_flip": False, "n_epochs": 100, "n_epochs_decay": 100, "epoch_count": 1,
    "beta1": 0.5, "lr": 0.0002, "gan_mode": "lsgan", "pool_size": 50, "lr_policy": "linear", "lambda_A": 10.0,
    "lambda_B": 10.0, "lambda_identity": 0.5, "save_epoch_freq": 5,
}
#: ``python test.py --model cycle_gan``: what test_options.py and test.py change.
REFERENCE_TEST = {"load_size": 256, "crop_size": 256, "no_flip": True, "serial_batches": True, "batch_size": 1,
                  "num_test": 50, "eval": False}


def reference_recipe(train: dict, test: dict) -> dict[str, object]:
    """The config values (dotted keys) that the reference's options mean here, one option at a time."""
    assert train["dataset_mode"] == "unaligned"
    return {
        "trainer": "cyclegan",
        **reference_recipe_common(train, test),
        "models.generator.name": train["netG"], "models.generator.ngf": train["ngf"],
        "models.generator.norm": train["norm"], "models.generator.dropout": 0.0 if train["no_dropout"] else 0.5,
        "models.generator.n_blocks": 9, "models.generator.depth": 2, "models.generator.padding": "reflect",
        "models.generator.upsample": "transposed",
        "models.generator.init": train["init_type"], "models.generator.init_gain": train["init_gain"],
        "models.discriminator.name": "patchgan_70", "models.discriminator.n_layers": train["n_layers_D"],
        "models.discriminator.ndf": train["ndf"], "models.discriminator.norm": train["norm"],
        "models.discriminator.conditional": False,
        "models.discriminator.init": train["init_type"], "models.discriminator.init_gain": train["init_gain"],
        "loss.gan_mode": train["gan_mode"], "loss.lambda_A": train["lambda_A"], "loss.lambda_B": train["lambda_B"],
        "loss.lambda_identity": train["lambda_identity"],
        "pool.size": train["pool_size"],
        "data.name": "unpaired", "data.serial": train["serial_batches"],
    }


def test_the_preset_is_the_reference_recipe_key_by_key():
    expected = reference_recipe(REFERENCE_TRAIN, REFERENCE_TEST)
    assert_preset_is_recipe(get_plugins().registry, "cyclegan-reference", expected)


@pytest.mark.slow
def test_a_small_run_of_the_preset_trains_and_exports_both_generators_for_the_reference(tmp_path, make_unpaired):
    registry = get_plugins().registry
    data = make_unpaired(8, 16)
    overrides = [f"data.root={data}", "data.load_size=16", "data.crop_size=16", "data.num_workers=0",
                 "models.generator.name=resnet_6blocks", "models.generator.ngf=4",
                 "models.discriminator.ndf=4", "models.discriminator.n_layers=2", "loop.max_steps=2", f"run.output_dir={tmp_path / 'runs'}",
                 "run.device=cpu", "run.threads=1", "visualizers=[]", "examples.every_epochs=null"]
    run = Run.create(load_config(preset_data(registry, "cyclegan-reference"), overrides, registry)).fit()
    assert run.trainer.global_step == 2 and run.trainer.config.pool.size == 50
    from nectargan_translate.reference_export import export_reference

    exported = export_reference(run.dir, output=tmp_path / "checkpoints" / "h2z")
    assert [f.path.name for f in exported.files] == ["latest_net_G_A.pth", "latest_net_G_B.pth"]
    assert "--model cycle_gan" in exported.test_command
    for file, direction in zip(exported.files, ("AtoB", "BtoA")):
        sidecar = json.loads(file.sidecar.read_text())
        assert sidecar["network_in_checkpoint"] == file.name
        reference = define_G(3, 3, 4, "resnet_6blocks", norm="instance")
        reference.load_state_dict(torch.load(file.path, weights_only=True), strict=True)
        ours = load_generator(run.dir, direction=direction).model
        x = torch.rand(1, 3, 16, 16) * 2 - 1
        with torch.no_grad():
            torch.testing.assert_close(reference(x), ours(x))
