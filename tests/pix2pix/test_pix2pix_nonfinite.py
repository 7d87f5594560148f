"""``loop.nonfinite`` in the pix2pix trainer: a NaN batch under ``skip`` leaves no trace in the state.

The fault is a batch whose input images are NaN (so both losses, the gradients and
the BatchNorm statistics of that step are NaN), injected at one step.
"""

from __future__ import annotations

import copy
import math

import pytest
import torch

from nectargan_core import Run, hookimpl, load_checkpoint
from nectargan_core.errors import TrainingError
from support import finite, same
from translation_fixtures import pix2pix_config as config


@pytest.fixture(scope="module")
def synth(make_synth):
    return make_synth(16, 32)

BAD_STEP = 3  # the third batch (global step 3) is NaN
NETWORKS = ("generator", "discriminator", "opt_g", "opt_d")


def poison(trainer, step: int = BAD_STEP) -> None:
    """Make the input images of training step ``step`` NaN."""
    real = trainer.to_device

    def to_device(images):
        images = real(images)
        return images * float("nan") if trainer.global_step + 1 == step and trainer.generator.training else images

    trainer.to_device = to_device


def snapshot(trainer) -> dict:
    """Weights, BatchNorm statistics and optimizer states (Adam moments and step counts), copied."""
    return copy.deepcopy({name: trainer.stateful[name].state_dict() for name in NETWORKS})


class Snapshots:
    """Copies of the state after each step."""

    def __init__(self):
        self.after: dict[int, dict] = {}

    @hookimpl
    def on_train_batch_end(self, trainer):
        self.after[trainer.global_step] = snapshot(trainer)


@pytest.mark.parametrize("implementation", ["auto", "foreach", "single"])  # auto: fused Adam (found_inf)
def test_skip_leaves_a_nan_batch_out_and_keeps_training(tmp_path, synth, capsys, implementation):  # noqa: F811
    snaps = Snapshots()
    run = Run.create(config(tmp_path, synth, loop={"nonfinite": "skip"}, optim={"implementation": implementation},
                            checkpoint={"every_steps": 1, "keep_last": 2}), plugins=[snaps])
    run.trainer.prepare()
    poison(run.trainer)
    run.fit()
    warning = capsys.readouterr().err
    assert "warning: non-finite loss D/gan_d, " in warning and ", G/l1, " in warning
    assert f"in steps {BAD_STEP}-{BAD_STEP + 1}; left out of the epoch averages (loop.nonfinite=skip)" in warning
    assert run.status()["status"] == "finished"
    after = snaps.after
    # The bad step is a true no-op for both networks: weights, BN statistics, Adam moments and step counts.
    assert same(after[BAD_STEP], after[BAD_STEP - 1])
    assert after[BAD_STEP]["opt_g"]["state"][0]["step"].item() == BAD_STEP - 1
    # Training went on after it, and ended finite.
    assert not same(after[BAD_STEP + 1]["generator"], after[BAD_STEP]["generator"])
    assert after[BAD_STEP + 1]["opt_d"]["state"][0]["step"].item() == BAD_STEP
    final = load_checkpoint(run.trainer.last_checkpoint)
    networks = {k: final["state"][k] for k in NETWORKS}  # the loss history records the NaN, as it was
    assert final["global_step"] == 6 and finite(networks)
    epoch = run.metrics("epoch")[0]["losses"]
    assert all(map(math.isfinite, epoch.values())) and "val/psnr" in epoch  # the bad interval is left out


def test_stop_fails_with_one_line_and_keeps_the_last_good_checkpoint(tmp_path, synth):  # noqa: F811
    run = Run.create(config(tmp_path, synth, checkpoint={"every_steps": 2, "keep_last": 2}))
    run.trainer.prepare()
    poison(run.trainer)
    with pytest.raises(TrainingError) as caught:
        run.fit()
    message = str(caught.value)
    assert "\n" not in message and message.startswith("non-finite loss D/gan_d, ")
    assert f"in steps {BAD_STEP}-{BAD_STEP + 1}; stopped (loop.nonfinite=stop); " in message
    assert message.endswith("the last good checkpoint is "
                            f"{run.dir / 'checkpoints' / 'epoch0000-step00000002.pt'}")
    assert run.status()["status"] == "failed"
    good = load_checkpoint(run.dir / "checkpoints" / "epoch0000-step00000002.pt")["state"]
    assert finite({k: good[k] for k in NETWORKS})


def test_skip_with_an_fp16_grad_scaler(tmp_path, synth):  # noqa: F811
    """The GradScaler path (fp16 on CUDA): the flag reaches the scaler, which skips and lowers its scale."""
    run = Run.create(config(tmp_path, synth, loop={"nonfinite": "skip"}))
    trainer = run.trainer
    trainer.prepare()
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)  # enabled: the fp16 code path
    G, opt = trainer.generator, trainer.opt_g
    for bad, expect_update in ((True, False), (False, True)):
        before = copy.deepcopy((list(G.parameters()), opt.state_dict()))
        loss = G(torch.rand(1, 3, 32, 32)).mean()
        scaler.scale(loss).backward()
        trainer._optimizer_step(opt, scaler, G, torch.tensor(bad))
        assert same(before, (list(G.parameters()), opt.state_dict())) != expect_update
        assert finite(list(G.parameters()))
    assert scaler.get_scale() == 512.0  # backed off once, for the skipped step
