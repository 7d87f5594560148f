"""Fixtures for the tensorboard tests: a toy run config and a synthetic pix2pix dataset."""

from __future__ import annotations

from pathlib import Path

import pytest

from nectargan_translate.data_cli import data_group
from support import cli_runner


@pytest.fixture
def toy_config(tmp_path):
    """A toy run of 2 batches per epoch that logs every step, with the tensorboard visualizer and ``options``."""

    def make(epochs: int = 2, **options) -> dict:
        return {
            "trainer": "toy",
            "run": {"output_dir": str(tmp_path / "runs"), "name": "toy", "seed": 3, "device": "cpu",
                    "deterministic": True},
            "loop": {"epochs": epochs, "log_every_steps": 1},
            "toy": {"samples": 8, "batch_size": 4, "val_samples": 4},
            "visualizers": {"tensorboard": options},
        }

    return make


@pytest.fixture(scope="session")
def synth(tmp_path_factory) -> Path:
    """16 synthetic 32x32 pairs in train and val folders: ``nectargan data synth DIR --count 16 --size 32``."""
    root = tmp_path_factory.mktemp("tensorboard_synth") / "data"
    made = cli_runner().invoke(data_group, ["synth", str(root), "--count", "16", "--size", "32"])
    assert made.exit_code == 0, made.output
    return root
