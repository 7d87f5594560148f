"""``nectargan config``: show, validate, schema and init."""

from __future__ import annotations

import json
from pathlib import Path

import click

from ..atomic import atomic_write_text, describe_os_error
from ..config import build_config_model, derived_keys, dump_yaml, load_config, starter_yaml, validate_config
from ..errors import ConfigError, NectarGANError
from ..presets import preset_data
from ..registry import Registry
from ..plugins import get_plugins
from ..text import printable
from .options import all_overrides, config_options, config_source


@click.group("config")
def config_group() -> None:
    """Show, validate and create run configs."""


@config_group.command("show")
@config_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of YAML.")
def show(config_file: str | None, preset: str | None, overrides: tuple[str, ...], trainer: str | None,
         as_json: bool) -> None:
    """Print the resolved config: the file (or preset), the overrides and every default.

    \b
    Examples:
      nectargan config show -c run.yaml --set loop.epochs=5
      nectargan config show --trainer pix2pix --json
      nectargan config show --preset pix2pix-reference
    """
    source = config_source(config_file, preset)
    config = load_config(source, all_overrides(overrides, trainer), get_plugins().registry)
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
    click.echo(printable(f"{file}: ok"))


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
@click.option("--preset", metavar="NAME", default=None,
              help="Start from a registered preset (a recipe such as pix2pix-reference) instead of the defaults.")
def init(output: str | None, trainer: str | None, force: bool, preset: str | None) -> None:
    """Write a commented starter config with every key and its default (or the preset's value).

    Each chosen part (the dataset, the generator, the discriminator, ...) is
    written with every one of its options. Keys the trainer takes from another
    key (pix2pix: the networks' channel counts, from data) are written
    commented out, naming that key.

    \b
    Examples:
      nectargan config init --trainer pix2pix -o run.yaml
      nectargan config init --preset pix2pix-reference -o reference.yaml
    """
    registry = get_plugins().registry
    if preset is not None:
        text = preset_yaml(registry, preset, trainer)
    else:
        config = validate_config({"trainer": trainer} if trainer else {}, registry, source="defaults")
        text = starter_yaml(build_config_model(registry, trainer), config.to_dict(), registry,
                            derived_keys(config, registry))
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
    click.echo(printable(f"wrote {path}"))


def preset_yaml(registry: Registry, name: str, trainer: str | None) -> str:
    """The starter config of preset ``name``: every key, with the preset's values where it sets them."""
    data = preset_data(registry, name)
    if trainer is not None and trainer != data["trainer"]:
        raise ConfigError(f"--trainer {trainer}: preset '{name}' is a config for trainer '{data['trainer']}'")
    config = load_config(data, (), registry)
    component = registry.get("preset", name)
    title = [f"# NectarGAN run config: preset '{name}' of {component.provided_by}",
             f"# {component.description}" if component.description else "#",
             "# Keys the preset does not set show their defaults. Validate with: nectargan config validate FILE"]
    return starter_yaml(build_config_model(registry, data["trainer"]), values=config.to_dict(), registry=registry,
                        derived=derived_keys(config, registry), title=title)
