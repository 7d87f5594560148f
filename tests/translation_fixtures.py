"""Fixtures shared by the translate and pix2pix tests: synthetic paired datasets and one tiny trained pix2pix run,
each made once per session (tests/conftest.py imports them, so every folder of tests sees one copy)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest


from support import cli_runner, run_cli

#: A UNet of depth 4 (inputs: multiples of 16) with dropout in 2 decoder layers, and a narrow PatchGAN.
TINY_MODELS = ("models.generator.name=unet", "models.generator.depth=4", "models.generator.ngf=8",
               "models.generator.dropout_layers=2", "models.discriminator.ndf=8")


@dataclass(frozen=True)
class TrainedRun:
    path: Path  # the run directory
    data: Path  # its dataset: 10 train, 2 val and 4 test pairs of 32x32; test is read at original sizes


@pytest.fixture(scope="session")
def trained_run(tmp_path_factory) -> TrainedRun:
    """Two epochs of a tiny pix2pix run (checkpoints for epochs 1 and 2, and best.pt by val/psnr)."""
    root = tmp_path_factory.mktemp("pix2pix_run")
    data = root / "data"
    made = run_cli("data", "synth", str(data), "--count", "16", "--size", "32", "--val", "0.125", "--test", "0.25")
    assert made.returncode == 0, made.stderr
    settings = [f"data.root={data}", "data.load_size=32", "data.crop_size=32", "data.num_workers=0",
                "data.test.preprocess=none", "loop.epochs=2", "run.device=cpu", "run.output_dir=runs",
                "visualizers=[]", "examples.every_epochs=null", "checkpoint.best_metric=val/psnr",
                "checkpoint.best_mode=max", *TINY_MODELS]
    trained = run_cli("train", "--trainer", "pix2pix", *(arg for s in settings for arg in ("--set", s)), cwd=root)
    assert trained.returncode == 0, trained.stderr
    return TrainedRun(root / "runs" / "run" / "version_0", data)


@pytest.fixture(scope="session")
def make_synth(tmp_path_factory):
    """``make_synth(count, size)``: a synthetic paired dataset (made once per count and size)."""
    from nectargan_translate.data_cli import data_group

    made: dict[tuple[int, int], Path] = {}

    def make(count: int, size: int) -> Path:
        if (count, size) not in made:
            root = tmp_path_factory.mktemp(f"synth{count}x{size}") / "data"
            result = cli_runner().invoke(data_group, ["synth", str(root), "--count", str(count), "--size", str(size)])
            assert result.exit_code == 0, result.output
            made[count, size] = root
        return made[count, size]

    return make


def pix2pix_config(tmp_path, root, **sections):
    """A tiny pix2pix run's config on the dataset at ``root``; ``sections`` merge into (or replace) its sections."""
    base = {
        "trainer": "pix2pix",
        "run": {"output_dir": str(tmp_path / "runs"), "device": "cpu", "seed": 5, "deterministic": True},
        "loop": {"epochs": 1, "log_every_steps": 2},
        "data": {"root": str(root), "load_size": 32, "crop_size": 32, "num_workers": 0, "batch_size": 2},
        "models": {"generator": {"name": "unet", "depth": 5, "ngf": 8},
                   "discriminator": {"name": "patchgan", "ndf": 8, "n_layers": 2}},
        "optim": {"implementation": "single"},
        "visualizers": [],
    }
    for key, value in sections.items():
        base[key] = {**base.get(key, {}), **value} if isinstance(value, dict) else value
    return base
