"""``nectargan config``: show, validate, schema and init."""

from __future__ import annotations

import json
from pathlib import Path

import click

from ..atomic import atomic_write_text, describe_os_error
from ..config import build_config_model, derived_keys, dump_yaml, load_config, starter_yaml, validate_config
from ..errors import ConfigError, NectarGANError
from ..plugins import get_plugins
from .options import all_overrides, config_options


@click.group("config")
def config_group() -> None:
    """Show, validate and create run configs."""


@config_group.command("show")
@config_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of YAML.")
def show(config_file: str | None, overrides: tuple[str, ...], trainer: str | None, as_json: bool) -> None:
    """Print the resolved config: the file, the overrides and every default.

    \b
    Examples:
      nectargan config show -c run.yaml --set loop.epochs=5
      nectargan config show --trainer pix2pix --json
    """
    config = load_config(config_file, all_overrides(overrides, trainer), get_plugins().registry)
    data = config.to_dict()
    click.echo(json.dumps(data, indent=2) if as_json else dump_yaml(data).rstrip())


@config_group.command("validate")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--set", "overrides", metavar="KEY=VALUE", multiple=True, help="Override a value first.")
def validate(file: str, overrides: tuple[str, ...]) -> None:
    """Check a config file; print every problem with its key path; exit 2 if any.

    \b
    Example:
      nectargan config validate run.yaml
    """
    load_config(file, overrides, get_plugins().registry)
    click.echo(f"{file}: ok")


@config_group.command("schema")
@click.option("--trainer", metavar="NAME", default=None, help="Include this trainer's sections.")
def schema(trainer: str | None) -> None:
    """Print the JSON Schema of the config (for editors and validators).

    \b
    Example:
      nectargan config schema --trainer pix2pix > nectargan.schema.json
    """
    model = build_config_model(get_plugins().registry, trainer)
    click.echo(json.dumps(model.model_json_schema(), indent=2))


@config_group.command("init")
@click.option("-o", "--output", metavar="FILE", default=None, type=click.Path(dir_okay=False),
              help="Write to FILE instead of printing (missing folders are created).")
@click.option("--trainer", metavar="NAME", default=None, help="Include this trainer's sections.")
@click.option("--force", is_flag=True, help="Overwrite FILE if it exists.")
def init(output: str | None, trainer: str | None, force: bool) -> None:
    """Write a commented starter config with every key and its default.

    Each chosen part (the dataset, the generator, the discriminator, ...) is
    written with every one of its options. Keys the trainer takes from another
    key (pix2pix: the networks' channel counts, from data) are written
    commented out, naming that key.

    \b
    Example:
      nectargan config init --trainer pix2pix -o run.yaml
    """
    registry = get_plugins().registry
    model = build_config_model(registry, trainer)
    config = validate_config({"trainer": trainer} if trainer else {}, registry, source="defaults")
    text = starter_yaml(model, config.to_dict(), registry, derived_keys(config, registry))
    if output is None:
        click.echo(text.rstrip())
        return
    path = Path(output)
    if path.exists() and not force:
        raise ConfigError(f"{path}: already exists; use --force to overwrite it")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, text)
    except OSError as exc:
        problem = describe_os_error(exc)
        if problem is None:
            raise
        raise NectarGANError(f"cannot write the config: {problem}") from None
    click.echo(f"wrote {path}")
