"""Fixtures for the CycleGAN tests: synthetic unpaired datasets, made once per count and size."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import cli_runner

@pytest.fixture(scope="session")
def make_unpaired(tmp_path_factory):
    """``make_unpaired(count, size, val=0.25, test=0.25)``: ``nectargan data synth --unpaired`` output."""
    from nectargan_translate.data_cli import data_group

    made: dict[tuple, Path] = {}

    def make(count: int, size: int, val: float = 0.25, test: float = 0.25) -> Path:
        key = (count, size, val, test)
        if key not in made:
            root = tmp_path_factory.mktemp(f"unpaired{count}x{size}") / "data"
            result = cli_runner().invoke(data_group, ["synth", str(root), "--unpaired", "--count", str(count),
                                                     "--size", str(size), "--val", str(val), "--test", str(test)])
            assert result.exit_code == 0, result.output
            made[key] = root
        return made[key]

    return make
