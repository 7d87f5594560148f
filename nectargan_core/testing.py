"""pytest fixtures for plugin authors, registered through the ``pytest11`` entry point.

Installing nectargan-core makes them available to every test suite, so a
plugin's tests need no conftest.py::

    def test_my_loss_is_registered(nectargan_plugin_host):
        assert nectargan_plugin_host().registry.has("loss", "my_loss")

    def test_short_run(tiny_config, run_training):
        result = run_training(tiny_config("my_trainer"))
        assert result.metrics

pytest loads this module at start-up in every project, so it imports neither
torch nor the engine until a fixture runs.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, NamedTuple

import pytest


class TrainingResult(NamedTuple):
    """What :func:`run_training` returns: the run directory and its metrics records."""

    dir: Path
    metrics: list[dict[str, Any]]


@pytest.fixture
def nectargan_plugin_host() -> Callable[..., Any]:
    """Build a fresh PluginHost: the installed plugins plus ``plugins`` registered for this test only.

    Call it as ``nectargan_plugin_host(module_or_object, ...)``; each extra
    plugin is registered under its ``__name__`` (or class name). Pass
    ``installed=False`` to load only the core and the given plugins, e.g. to
    test a plugin module that is not installed. ``NECTARGAN_*`` variables of
    the calling shell are ignored so results do not depend on them.
    """
    from .plugins import PluginHost

    def make(*plugins: Any, installed: bool = True) -> PluginHost:
        env = {k: v for k, v in os.environ.items() if not k.startswith("NECTARGAN_")}
        if not installed:
            env["NECTARGAN_LOAD_PLUGINS"] = ""
        host = PluginHost(env).load_entry_points()
        for plugin in plugins:
            name = getattr(plugin, "__name__", type(plugin).__name__)
            info = host.add_plugin(plugin, name)
            if info.status != "loaded":
                raise AssertionError(f"plugin {name} did not load: {info.error}")
        return host

    return make


@pytest.fixture
def tiny_paired_dataset(tmp_path_factory) -> Path:
    """A folder of aligned A|B pairs, ``train/`` (8 pairs) and ``val/`` (2), 32x32 RGB PNGs.

    The layout pix2pix-style paired datasets read: each file is A and B side by
    side. B is A mirrored left to right, so a model can learn the mapping.
    """
    import numpy as np
    from PIL import Image

    root = tmp_path_factory.mktemp("paired")
    rng = np.random.default_rng(0)
    for split, count in (("train", 8), ("val", 2)):
        folder = root / split
        folder.mkdir()
        for index in range(count):
            a = rng.integers(0, 256, size=(32, 32, 3), dtype=np.uint8)
            Image.fromarray(np.concatenate([a, a[:, ::-1]], axis=1)).save(folder / f"{index:03d}.png")
    return root


@pytest.fixture
def tiny_config(tmp_path) -> Callable[..., dict[str, Any]]:
    """Build a small run config for ``trainer``: CPU, one epoch, a log record every step, no console output.

    ``tiny_config("my_trainer", loop={"epochs": 2}, data={...})`` merges each
    keyword into the section of that name (replacing non-dict values). Runs
    go under this test's temporary directory.
    """

    def make(trainer: str, **sections: Any) -> dict[str, Any]:
        config: dict[str, Any] = {
            "trainer": trainer,
            "run": {"name": trainer, "output_dir": str(tmp_path / "runs"), "device": "cpu", "seed": 0},
            "loop": {"epochs": 1, "log_every_steps": 1},
            "visualizers": {},
        }
        for name, value in sections.items():
            current = config.get(name)
            config[name] = {**current, **value} if isinstance(current, dict) and isinstance(value, dict) else value
        return config

    return make


@pytest.fixture
def run_training() -> Callable[..., TrainingResult]:
    """Train a run to the end with the Python API and return its directory and metrics records.

    ``run_training(config, overrides=["loop.epochs=2"], plugins=[obj], host=host)``:
    ``plugins`` are run-hook objects for this run only; ``host`` (from
    ``nectargan_plugin_host``) selects which plugins are installed.
    """

    def train(config: Any, *, overrides: Any = (), plugins: Any = (), host: Any = None) -> TrainingResult:
        from .run import Run

        run = Run.create(config, overrides=overrides, plugins=plugins, host=host).fit()
        return TrainingResult(run.dir, run.metrics())

    return train
