"""The visualizer on a tiny pix2pix run: its loss terms, learning rates, validation metrics and example grids."""

from __future__ import annotations

import pytest
from PIL import Image

from nectargan_core import Run
from nectargan_translate.examples import LABEL_HEIGHT
from tensorboard_events import config_texts, read_events, scalar_steps, session_start


@pytest.fixture(scope="module")
def pix2pix_run(synth, tmp_path_factory):
    """Two epochs of 3 steps (12 train pairs, batch 4), logging every step, grids of 2 images every epoch."""
    config = {
        "trainer": "pix2pix",
        "run": {"output_dir": str(tmp_path_factory.mktemp("tensorboard_pix2pix") / "runs"), "device": "cpu",
                "seed": 5},
        "loop": {"epochs": 2, "log_every_steps": 1},
        "data": {"root": str(synth), "load_size": 32, "crop_size": 32, "num_workers": 0, "batch_size": 4},
        "models": {"generator": {"name": "unet", "depth": 5, "ngf": 8},
                   "discriminator": {"name": "patchgan", "ndf": 8, "n_layers": 2}},
        "optim": {"implementation": "single"},
        "examples": {"every_epochs": 1, "count": 2},
        "visualizers": {"tensorboard": {}},
    }
    run = Run.create(config).fit()
    return run, read_events(run.dir / "tensorboard")


def test_every_loss_term_learning_rate_and_metric_at_its_step(pix2pix_run):
    run, events = pix2pix_run
    train, val, epochs = run.metrics("train"), run.metrics("val"), run.metrics("epoch")
    logged = [key for key in train[0]["losses"] if "." not in key]
    assert {"G/gan", "G/l1", "G/total", "D/gan_d", "D/total"} <= set(logged)
    terms = [key for key in logged if key != "D/gan_d"]  # all of D/total: one tag, not two
    assert any("." in key for key in train[0]["losses"])  # G/l1.raw and friends exist but are left out
    expected = {
        **{tag: [r["step"] for r in train] for tag in terms + ["lr/opt_g", "lr/opt_d"]},
        **{f"val/{name}": [r["step"] for r in val] for name in ("l1", "psnr", "ssim")},
        **{f"epoch/{tag}": [r["step"] for r in epochs] for tag in terms},
    }
    assert set(events.Tags()["scalars"]) == set(expected)
    assert {tag: scalar_steps(events, tag) for tag in expected} == expected
    assert expected["G/gan"] == [1, 2, 3, 4, 5, 6] and expected["val/psnr"] == [3, 6]
    psnr = [event.value for event in events.Scalars("val/psnr")]
    assert psnr == pytest.approx([r["metrics"]["psnr"] for r in val], rel=1e-6)


def test_example_grids_by_epoch(pix2pix_run):
    run, events = pix2pix_run
    images = events.Images("examples")
    assert [image.step for image in images] == [1, 2]
    for image in images:
        path = run.run_dir.examples / f"epoch{image.step:04d}.png"
        assert image.encoded_image_string == path.read_bytes()
        with Image.open(path) as grid:
            assert (image.width, image.height) == grid.size
        # Two rows of input | output | target, 32 pixels each, with make_grid's 2-pixel padding, under their labels.
        assert (image.width, image.height) == (3 * 34 + 2, 2 * 34 + 2 + LABEL_HEIGHT)


def test_config_as_text_and_hparams(pix2pix_run):
    run, events = pix2pix_run
    [(step, text)] = config_texts(events)
    assert step == 0 and text.startswith("```yaml\ntrainer: pix2pix\n") and text.endswith("\n```")
    hparams = session_start(events).hparams
    assert hparams["data.crop_size"].number_value == 32
    assert hparams["models.generator.name"].string_value == "unet"
    assert hparams["optim.lr_schedule.name"].string_value == "pix2pix_linear"
    assert hparams["validation.metrics"].string_value == '["l1", "psnr", "ssim"]'
