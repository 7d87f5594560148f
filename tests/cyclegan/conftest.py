"""Fixtures for the CycleGAN tests: synthetic unpaired datasets, made once per count and size."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

#: A ResNet of 2 blocks and 8 base channels (inputs: multiples of 4), a 2-layer PatchGAN of 8 channels.
TINY_MODELS = {"generator": {"name": "resnet", "n_blocks": 2, "ngf": 8},
               "discriminator": {"ndf": 8, "n_layers": 2}}
TINY_SETTINGS = ("models.generator.name=resnet", "models.generator.n_blocks=2", "models.generator.ngf=8",
                 "models.discriminator.ndf=8", "models.discriminator.n_layers=2")


@pytest.fixture(scope="session")
def make_unpaired(tmp_path_factory):
    """``make_unpaired(count, size, val=0.25, test=0.25)``: ``nectargan data synth --unpaired`` output."""
    from nectargan_pix2pix.data_cli import data_group

    made: dict[tuple, Path] = {}

    def make(count: int, size: int, val: float = 0.25, test: float = 0.25) -> Path:
        key = (count, size, val, test)
        if key not in made:
            root = tmp_path_factory.mktemp(f"unpaired{count}x{size}") / "data"
            result = CliRunner().invoke(data_group, ["synth", str(root), "--unpaired", "--count", str(count),
                                                     "--size", str(size), "--val", str(val), "--test", str(test)])
            assert result.exit_code == 0, result.output
            made[key] = root
        return made[key]

    return make
