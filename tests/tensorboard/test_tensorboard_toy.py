"""The visualizer on the toy trainer: tags and steps, detail keys, log_dir placeholders, grids, resume."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from PIL import Image

from nectargan_core import Run, hookimpl
from tensorboard_events import config_texts, read_events, scalar_steps, session_start


class LossDetail:
    """Adds a dotted detail key to every step's losses, as nectargan-losses does (``G/l1.raw``)."""

    @hookimpl(wrapper=True)
    def train_step(self):
        losses = yield
        return {**losses, "loss.raw": losses["loss"] * 2}


class GridWriter:
    """Writes an example grid 8+N pixels wide after the epochs listed, as a trainer's on_epoch_end does."""

    def __init__(self, epochs):
        self.epochs = set(epochs)

    @hookimpl
    def on_epoch_end(self, trainer):
        if trainer.epochs_done in self.epochs:
            trainer.run_dir.examples.mkdir(exist_ok=True)
            grid = Image.new("RGB", (8 + trainer.epochs_done, 6), (40 * trainer.epochs_done, 0, 0))
            grid.save(trainer.run_dir.examples / f"epoch{trainer.epochs_done:04d}.png")


def test_scalars_config_text_and_hparams(toy_config):
    run = Run.create(toy_config()).fit()
    events = read_events(run.dir / "tensorboard")

    assert set(events.Tags()["scalars"]) == {"loss", "noise", "lr/optimizer", "val/mse", "epoch/loss", "epoch/noise"}
    for tag in ("loss", "noise", "lr/optimizer"):
        assert scalar_steps(events, tag) == [1, 2, 3, 4]
    for tag in ("val/mse", "epoch/loss", "epoch/noise"):
        assert scalar_steps(events, tag) == [2, 4]
    logged = {r["step"]: r for r in run.metrics("train")}
    for event in events.Scalars("loss"):
        assert event.value == pytest.approx(logged[event.step]["losses"]["loss"], rel=1e-6)
    assert [e.value for e in events.Scalars("lr/optimizer")] == pytest.approx([0.05] * 4)
    mse = [record["metrics"]["mse"] for record in run.metrics("val")]
    assert [event.value for event in events.Scalars("val/mse")] == pytest.approx(mse)
    assert events.Tags()["images"] == []

    [(step, text)] = config_texts(events)
    assert step == 0 and text == f"```yaml\n{run.run_dir.config_file.read_text()}```"
    hparams = session_start(events).hparams
    assert hparams["loop.epochs"].number_value == 2
    assert hparams["run.deterministic"].bool_value is True
    assert hparams["toy.model.name"].string_value == "toy_linear"
    assert hparams["visualizers.tensorboard.flush_secs"].number_value == 30
    assert "run.threads" not in hparams and "visualizers.tensorboard.log_dir" not in hparams  # nulls


@pytest.mark.parametrize("details", [False, True])
def test_detail_keys_only_on_request(toy_config, details):
    run = Run.create(toy_config(details=details), plugins=[LossDetail()]).fit()
    scalars = set(read_events(run.dir / "tensorboard").Tags()["scalars"])
    assert ({"loss.raw", "epoch/loss.raw"} <= scalars) is details
    assert {"loss", "epoch/loss"} <= scalars


def test_log_dir_placeholders(toy_config, tmp_path):
    run = Run.create(toy_config(log_dir=str(tmp_path / "tb" / "{name}-{version}"))).fit()
    assert not (run.dir / "tensorboard").exists()
    assert scalar_steps(read_events(tmp_path / "tb" / "toy-version_0"), "loss") == [1, 2, 3, 4]


@pytest.mark.parametrize("every,written,expected", [
    (1, [1, 2, 3, 4], [1, 2, 3, 4]),
    (2, [1, 2, 3, 4], [2, 4]),
    (1, [1], [1]),  # an unchanged grid is not added again
    (None, [1, 2, 3, 4], []),
])
def test_newest_grid_every_n_epochs(toy_config, every, written, expected):
    run = Run.create(toy_config(epochs=4, images_every_epochs=every), plugins=[GridWriter(written)]).fit()
    events = read_events(run.dir / "tensorboard")
    images = events.Images("examples") if expected else []
    assert [image.step for image in images] == expected
    for image in images:
        path = run.run_dir.examples / f"epoch{image.step:04d}.png"
        assert (image.width, image.height) == (8 + image.step, 6)
        assert image.encoded_image_string == path.read_bytes()


def test_resume_hides_what_a_crashed_run_wrote_after_its_checkpoint(toy_config):
    """Checkpoint after epoch 2 (step 4); the run dies in epoch 3 after logging step 5."""
    config = toy_config(epochs=3)
    config["checkpoint"] = {"every_epochs": 2, "save_last": False}
    config["toy"]["fail_at_step"] = 6
    with pytest.raises(RuntimeError, match="toy failure at step 6"):
        Run.create(config, plugins=[GridWriter([1, 2])]).fit()
    log_dir = Path(config["run"]["output_dir"]) / "toy" / "version_0" / "tensorboard"
    assert scalar_steps(read_events(log_dir), "loss") == [1, 2, 3, 4, 5]  # flushed by on_exception

    # TensorBoard reads event files in name order; names start with the second they were made in, and
    # end with a per-process counter that can sort the wrong way (".9" > ".10") within one second.
    time.sleep(1.01 - time.time() % 1)
    Run.resume(log_dir.parent, overrides=["toy.fail_at_step=null"], plugins=[GridWriter([1, 2])]).fit()
    events = read_events(log_dir)
    assert len(list(log_dir.glob("events.out.tfevents.*"))) == 2
    assert scalar_steps(events, "loss") == [1, 2, 3, 4, 5, 6]
    assert scalar_steps(events, "val/mse") == scalar_steps(events, "epoch/loss") == [2, 4, 6]
    # The grids of epochs 1 and 2 were there before the resume: epoch 3 adds none.
    assert [image.step for image in events.Images("examples")] == [1, 2]
    assert [step for step, _ in config_texts(events)] == [0, 4]
    assert "fail_at_step: null" in config_texts(events)[1][1]
