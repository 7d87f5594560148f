"""Options shared by commands that read a run config."""

from __future__ import annotations

from typing import Any, Callable

import click

from ..errors import ConfigError


def config_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """``-c/--config FILE`` or ``--preset NAME``, ``--set key=value`` (repeatable) and ``--trainer NAME``."""
    func = click.option(
        "--preset", "preset", metavar="NAME", default=None,
        help="Start from a registered preset instead of a config file (see nectargan config init --preset).",
    )(func)
    func = click.option(
        "--trainer", "trainer", metavar="NAME", default=None,
        help="Trainer to use (same as --set trainer=NAME).",
    )(func)
    func = click.option(
        "--set", "overrides", metavar="KEY=VALUE", multiple=True,
        help="Override a config value, e.g. --set loop.epochs=5 (repeatable).",
    )(func)
    func = click.option(
        "-c", "--config", "config_file", metavar="FILE", default=None,
        type=click.Path(dir_okay=False), help="Config file (.yaml, .toml or .json).",
    )(func)
    return func


def all_overrides(overrides: tuple[str, ...], trainer: str | None) -> list[str]:
    return ([f"trainer={trainer}"] if trainer else []) + list(overrides)


def config_source(config_file: str | None, preset: str | None) -> str | dict[str, Any] | None:
    """What a command reads its config from: the file, the preset's values, or None (defaults)."""
    if preset is None:
        return config_file
    if config_file is not None:
        raise ConfigError("-c/--config and --preset each give a whole config: use one (to edit a preset, write it "
                          "to a file with nectargan config init --preset NAME -o FILE)")
    from ..plugins import get_plugins
    from ..presets import preset_data

    return preset_data(get_plugins().registry, preset)
