"""Which weights made an output, said the way ``nectargan train`` counts epochs (from 1)."""

from __future__ import annotations

from pathlib import Path

from nectargan_translate.inference import LoadedGenerator


def loaded(name: str, epoch: int, step: int, batch: int) -> LoadedGenerator:
    return LoadedGenerator(model=None, config=None, checkpoint=Path("run/checkpoints") / name, epoch=epoch,
                           global_step=step, batch_in_epoch=batch)


def test_a_mid_epoch_checkpoint_is_in_the_epoch_the_console_named():
    # a newcomer interrupted "at epoch 1/2, batch 15/33 (step 15)" and test said "(epoch 0, step 15)"
    assert loaded("epoch0000-step00000015.pt", 0, 15, 15).label == "epoch0000-step00000015.pt (epoch 1, batch 15, step 15)"


def test_an_epoch_end_checkpoint_is_that_epoch():
    assert loaded("best.pt", 3, 99, 0).label == "best.pt (epoch 3, step 99)"
    assert loaded("best.pt", 3, 99, 0).tag == "best-epoch0003-step00000099"
