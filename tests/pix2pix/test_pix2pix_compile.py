"""``precision.compile``: training through torch.compile, with checkpoints that stay eager-compatible."""

from __future__ import annotations

import shutil

import pytest
import torch

from nectargan_core import Run, load_checkpoint
from nectargan_translate.inference import load_generator


def inductor_unavailable() -> str | None:
    if not hasattr(torch, "compile"):
        return f"torch {torch.__version__} has no torch.compile"
    if not any(shutil.which(cc) for cc in ("cc", "gcc", "clang", "g++", "c++")):
        return "inductor on CPU needs a C++ compiler and none is on PATH"
    return None


@pytest.fixture(scope="module")
def synth(make_synth):
    return make_synth(8, 16)


def config(tmp_path, root, compile_mode, backend):
    return {
        "trainer": "pix2pix",
        "run": {"output_dir": str(tmp_path / "runs"), "device": "cpu", "seed": 5},
        "loop": {"epochs": 1, "max_steps": 2, "log_every_steps": 1},
        "data": {"root": str(root), "load_size": 16, "crop_size": 16, "num_workers": 0, "batch_size": 2},
        "models": {"generator": {"name": "unet", "depth": 3, "ngf": 4},
                   "discriminator": {"name": "patchgan", "ndf": 4, "n_layers": 1}},
        "precision": {"compile": compile_mode, "compile_backend": backend},
        "checkpoint": {"every_steps": 2},
        "examples": {"every_epochs": None},
        "visualizers": [],
    }


# aot_eager: the wrapping, checkpoints and resume in ~5-9 s; inductor: real C++ kernels (34 s with a cold
# inductor cache on 2 cores, 2-4 s warm)
@pytest.mark.parametrize("backend", ["aot_eager", pytest.param("inductor", marks=pytest.mark.slow)])
def test_compiled_training_writes_checkpoints_that_load_without_compile(tmp_path, synth, backend):
    if backend == "inductor" and (reason := inductor_unavailable()):
        pytest.skip(reason)
    torch._dynamo.reset()
    run = Run.create(config(tmp_path, synth, "default", backend))
    trainer = run.trainer
    trainer.prepare()
    before = {k: v.clone() for k, v in trainer.generator.state_dict().items()}
    run.fit()
    # the step ran through compiled wrappers; the tracked modules stayed the originals
    assert trainer._g_train is not trainer.generator and trainer._d_train is not trainer.discriminator
    assert type(trainer.generator).__name__ != "OptimizedModule"
    losses = [r["losses"] for r in run.metrics("train")]
    assert len(losses) == 2 and all(torch.isfinite(torch.tensor(v)) for r in losses for v in r.values())
    state = load_checkpoint(trainer.last_checkpoint)["state"]
    for name in ("generator", "discriminator"):
        assert not any("_orig_mod" in key for key in state[name]), name
    assert any(not torch.equal(before[k], state["generator"][k]) for k in before)  # it trained

    # resume with compile off: same keys, loads strictly, trains on
    resumed = Run.resume(run.dir, overrides=["precision.compile=off", "loop.epochs=5", "loop.max_steps=4"])
    assert resumed.trainer._g_train is resumed.trainer.generator
    resumed.fit()
    assert resumed.trainer.global_step == 4
    # and inference/export loading sees a plain generator
    loaded = load_generator(run.dir)
    assert loaded.model(torch.zeros(1, 3, 16, 16)).shape == (1, 3, 16, 16)


def test_compile_is_off_by_default(tmp_path, synth):
    cfg = config(tmp_path, synth, "off", "inductor")
    del cfg["precision"]
    trainer = Run.create(cfg).trainer
    trainer.prepare()
    assert trainer.config.precision.compile == "off"
    assert trainer._g_train is trainer.generator and trainer._d_train is trainer.discriminator
