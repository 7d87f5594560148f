"""pytest fixtures for plugin authors, registered through the ``pytest11`` entry point.

Installing nectargan-core makes them available to every test suite, so a
plugin's tests need no conftest.py::

    def test_my_loss_is_registered(nectargan_plugin_host):
        assert nectargan_plugin_host().registry.has("loss", "my_loss")

    def test_short_run(tiny_config, run_training):
        result = run_training(tiny_config("my_trainer"))
        assert result.metrics

A trainer's plugin makes ``tiny_config`` fast for its trainer by registering
a preset named ``<trainer>-tiny`` (nectargan-pix2pix registers
``pix2pix-tiny``: 32 px images, small networks, a run of seconds).

pytest loads this module at start-up in every project, so it imports neither
torch nor the engine until a fixture runs.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Collection, NamedTuple

import pytest
from pydantic import BaseModel

__all__ = ["nectargan_plugin_host", "tiny_paired_dataset", "tiny_config", "run_training", "TrainingResult", "tiny_preset",
           "merge_sections", "TINY_PRESET_SUFFIX"]


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
        env = _host_env()
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


TINY_PRESET_SUFFIX = "-tiny"
"""The suffix of the preset that ``tiny_config(trainer)`` starts from: ``pix2pix-tiny`` for ``pix2pix``."""


def _host_env() -> dict[str, str]:
    """The environment without ``NECTARGAN_*`` variables, so a test does not depend on the calling shell."""
    return {k: v for k, v in os.environ.items() if not k.startswith("NECTARGAN_")}


def tiny_preset(trainer: str, registry: Any = None) -> dict[str, Any]:
    """The config values of preset ``<trainer>-tiny`` when a plugin registers one, else ``{}``.

    ``registry`` defaults to the installed plugins' (``NECTARGAN_*`` variables ignored).
    """
    from .presets import preset_data

    if registry is None:
        from .plugins import PluginHost

        registry = PluginHost(_host_env()).load_entry_points().registry
    name = trainer + TINY_PRESET_SUFFIX
    if not registry.has("preset", name):
        return {}
    data = preset_data(registry, name)
    if data["trainer"] != trainer:
        raise AssertionError(f"preset '{name}' is for trainer '{data['trainer']}', not '{trainer}'")
    return data


def merge_sections(config: dict[str, Any], sections: dict[str, Any],
                   choices: Collection[str] = ("data",)) -> dict[str, Any]:
    """``config`` with each of ``sections`` merged into the section of that name, one level deep.

    A mapping updates the keys of a mapping section (``loop={"epochs": 2}``,
    ``run={"name": "b"}`` keep the other keys), unless the section is one of
    ``choices``, the sections that choose a part by name, and the mapping
    names another part (``data={"name": "my_pairs", ...}`` in place of the
    preset's ``paired``): another part takes other options, so it replaces
    the section. Any other value, or a value for a section that is not a
    mapping, replaces it. A key given a mapping, such as
    ``models={"generator": {...}}``, replaces that key's whole value.
    ``tiny_config`` passes the choice sections of the trainer's options.
    """
    merged = dict(config)
    for name, value in sections.items():
        current = merged.get(name)
        other_part = name in choices and bare(value.get("name", current.get("name"))) != bare(current.get("name")) \
            if isinstance(current, dict) and isinstance(value, dict) else True
        merged[name] = value if other_part else {**current, **value}
    return merged


def bare(name: Any) -> Any:
    """A part's name without its ``distribution:`` qualifier (``nectargan-translate:paired`` -> ``paired``)."""
    return name.rpartition(":")[2] if isinstance(name, str) else name


def choice_sections(trainer: str, registry: Any) -> frozenset[str]:
    """The sections of ``trainer``'s config that choose a registered part by name (pix2pix: ``data``)."""
    import typing

    from .config import ComponentChoice

    def chooses(annotation: Any) -> bool:  # SomeChoice, or Optional[SomeChoice]
        options = typing.get_args(annotation) or (annotation,)
        return any(isinstance(a, type) and issubclass(a, ComponentChoice) for a in options)

    models = [c.load() for c in registry.all("config_section")]  # registered as the section's model itself
    if registry.has("trainer", trainer):
        models.append(registry.get("trainer", trainer).options)
    return frozenset(name for model in models if isinstance(model, type) and issubclass(model, BaseModel)
                     for name, field in model.model_fields.items() if chooses(field.annotation))


@pytest.fixture
def tiny_config(tmp_path) -> Callable[..., dict[str, Any]]:
    """Build a small run config for ``trainer``: CPU, one epoch, a log record every step, no console output.

    ``tiny_config(trainer, *, preset="auto", **sections) -> dict``. It starts
    from the trainer's tiny preset (``<trainer>-tiny``, when its plugin
    registers one; ``preset=None`` for none, or ``preset="name"`` for another),
    sets ``run`` (``output_dir`` under this test's temporary directory,
    ``device: cpu``, ``seed: 0``), ``loop`` (``epochs: 1``,
    ``log_every_steps: 1``) and ``visualizers: {}``, then merges each keyword
    into the section of that name (see :func:`merge_sections`):
    ``tiny_config("pix2pix", data={"root": str(tiny_paired_dataset)}, loop={"epochs": 2})``.
    """

    def make(trainer: str, *, preset: str | None = "auto", **sections: Any) -> dict[str, Any]:
        from .plugins import PluginHost
        from .presets import preset_data

        registry = PluginHost(_host_env()).load_entry_points().registry
        if preset == "auto":
            base = tiny_preset(trainer, registry)
        elif preset is None:
            base = {}
        else:
            base = preset_data(registry, preset)
        choices = choice_sections(trainer, registry)
        config = merge_sections({**base, "trainer": trainer}, {
            "run": {"name": trainer, "output_dir": str(tmp_path / "runs"), "device": "cpu", "seed": 0},
            "loop": {"epochs": 1, "log_every_steps": 1},
        }, choices)
        config["visualizers"] = {}
        return merge_sections(config, sections, choices)

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
