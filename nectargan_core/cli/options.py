"""Options shared by commands that read a run config."""

from __future__ import annotations

from typing import Any, Callable

import click


def config_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """``-c/--config FILE``, ``--set key=value`` (repeatable) and ``--trainer NAME``."""
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
