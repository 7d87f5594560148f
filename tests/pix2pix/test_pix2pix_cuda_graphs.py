"""pix2pix on CUDA with its step replayed as a graph and the data cache on the GPU: no host sync per step.

Skipped without a GPU (the prepared GPU script, benchmarks/gpu_check.sh, runs
it). A step that makes the host wait for the GPU (a copy from pageable
memory, ``.item()``) keeps the next replay from being queued while the GPU
runs this one: the card then idles for the host's share of every step.
"""

from __future__ import annotations

import pytest
import torch

from nectargan_core import Run

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


@pytest.mark.parametrize("cache", ["device", "memory", "off"])
def test_replayed_steps_never_wait_for_the_gpu(tiny_config, tiny_paired_dataset, cache):
    config = tiny_config("pix2pix", run={"device": "cuda"}, loop={"log_every_steps": 1000, "val_every_epochs": None},
                         data={"root": str(tiny_paired_dataset), "cache": cache, "num_workers": 0, "batch_size": 1},
                         examples={"every_epochs": None})
    trainer = Run.create(config).trainer
    trainer.prepare()
    assert trainer.step_graphs.enabled, trainer.step_graphs.decision.text
    loader = trainer.train_loader
    batches = iter(loader)

    def step(batch_idx: int) -> None:
        batch = next(batches)
        trainer.prepare_step(batch, batch_idx)
        outputs = trainer.step_graphs(batch, batch_idx)
        trainer.global_step += 1
        trainer.batch_in_epoch += 1
        trainer._accumulate(outputs)
        trainer.hook.on_train_batch_end(trainer=trainer, outputs=outputs, batch=batch, batch_idx=batch_idx)

    for i in range(5):  # warm-up steps and the capture
        step(i)
    assert trainer.step_graphs.replays >= 1
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for i in range(5, 8):
            step(i)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert trainer.step_graphs.replays >= 4
