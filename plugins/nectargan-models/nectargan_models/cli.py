"""``nectargan models``: list every registered network, inspect one, import reference weights.

Imported by the plugin module at load time, so torch is imported only inside
the command functions (through :mod:`nectargan_models.summary`).
"""

from __future__ import annotations

import json
import types
from pathlib import Path
from typing import Any, Collection, Literal, Union, get_args, get_origin

import click
from pydantic import BaseModel

from nectargan_core import IMAGE_SIDE_OPTION, Component, get_plugins, printable, printable_lines, require_torch

from .overrides import resolve_options


@click.group("models")
def models_group() -> None:
    """Inspect the generators and discriminators that plugins register."""


@models_group.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def list_models(as_json: bool) -> None:
    """List every registered model with its role, provider and default parameter count.

    \b
    Examples:
      nectargan models list
      nectargan models list --json
    """
    require_torch("nectargan models list")
    from .summary import build_meta, parameter_count

    rows = []
    for component in get_plugins().registry.all("model"):
        row = _identity(component)
        try:
            row["parameters"] = parameter_count(build_meta(component, _default_options(component)))
            row["error"] = None
        except Exception as exc:  # noqa: BLE001 - one broken model must not hide the others
            row["parameters"] = None
            row["error"] = f"{type(exc).__name__}: {exc}"
        rows.append(row)
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    if not rows:
        click.echo("No models registered. Try: pip install nectargan-models")
        return
    table = [["name", "role", "provider", "parameters", "description"]]
    for row in rows:
        params = f"{row['parameters']:,}" if row["parameters"] is not None else "error"
        description = row["description"] if row["error"] is None else row["error"]
        table.append([row["name"], row["role"], row["provider"], params, description])
    _echo_table(table, right_aligned={3})


@models_group.command("show")
@click.argument("name")
@click.option("--set", "overrides", metavar="OPTION=VALUE", multiple=True,
              help="Set an option, e.g. --set norm=instance (repeatable).")
@click.option("--input-size", type=IMAGE_SIDE_OPTION, default=256, show_default=True,
              help="Square input side for the output size and, for discriminators, the logit map.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def show_model(name: str, overrides: tuple[str, ...], input_size: int, as_json: bool) -> None:
    """Show a model's options (value and default), parameter count and output size.

    Discriminators also report their receptive field (patch size).

    \b
    Examples:
      nectargan models show unet_256
      nectargan models show patchgan --set n_layers=4 --input-size 512
      nectargan models show unet --set depth=6 --set block=residual --json
    """
    component = get_plugins().registry.get("model", name)
    values = resolve_options(component, overrides)
    require_torch("nectargan models show")
    from .summary import build_meta, geometry, parameter_count  # torch: only once the options are valid

    data = _identity(component)
    data["options"] = _options_table(component.options, values)
    module = build_meta(component, values)
    data["parameters"] = parameter_count(module)
    data["input_size"] = input_size
    data.update(geometry(module, input_size, component.name))
    if as_json:
        click.echo(json.dumps(data, indent=2, default=str))
        return
    click.echo(f"{data['name']}: {data['role']} from {component.provided_by}")
    if data["description"]:
        click.echo(f"  {data['description']}")
    click.echo(f"parameters: {data['parameters']:,}")
    if "receptive_field" in data:
        field = data["receptive_field"]
        click.echo(f"receptive field: {field}x{field}")
    if "input_error" in data:
        click.echo(data["input_error"])
    elif "output_size" in data:
        out = data["output_size"]
        click.echo(f"input {input_size}x{input_size} -> output {out}x{out}")
    if data["options"]:
        table = [["option", "type", "value", "default", "description"]]
        for option, info in data["options"].items():
            table.append([option, info["type"], _text(info["value"]), _text(info["default"]), info["description"]])
        click.echo("options:")
        _echo_table(table, indent="  ")


@models_group.command("import")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--arch", required=True, metavar="NAME",
              help="The reference's --netG/--netD name (unet_256, unet_128, resnet_9blocks, resnet_6blocks, basic, "
                   "n_layers, pixel) or one of our matching models (unet, resnet, patchgan, patchgan_70, pixelgan).")
@click.option("--set", "overrides", metavar="OPTION=VALUE", multiple=True,
              help="An architecture option of the model, e.g. --set norm=instance (repeatable).")
@click.option("-o", "--output", type=click.Path(path_type=Path), default=None, help="The checkpoint to write.")
@click.option("--into", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Instead of -o: add the network to a checkpoint written by an earlier import (replacing the "
                   "network of the same role), e.g. a discriminator next to its generator.")
@click.option("--force", is_flag=True, help="Replace OUTPUT if it exists.")
def import_model(file: Path, arch: str, overrides: tuple[str, ...], output: Path | None, into: Path | None,
                 force: bool) -> None:
    """Turn a pix2pix/CycleGAN reference state dict into a NectarGAN checkpoint.

    FILE is a network saved by pytorch-CycleGAN-and-pix2pix (latest_net_G.pth,
    latest_net_G_A.pth, latest_net_D.pth, ...). The file does not record the
    architecture: give the reference's --netG/--netD as --arch and its other
    options with --set (norm, ngf/ndf, n_layers, dropout, channels). Every
    tensor is mapped and checked; a file that does not fit says which option
    is probably wrong. The checkpoint works with predict, test, export and
    train --init-from.

    \b
    Examples:
      nectargan models import latest_net_G.pth --arch unet_256 -o facades.pt
      nectargan models import latest_net_G_A.pth --arch resnet_9blocks --set norm=instance -o horse2zebra.pt
      nectargan models import latest_net_D.pth --arch basic --into facades.pt
    """
    if (output is None) == (into is None):
        raise click.UsageError("give either -o OUTPUT (a new checkpoint) or --into CHECKPOINT (an earlier import)")
    from nectargan_core import load_checkpoint

    require_torch("nectargan models import")
    from .importing import import_reference, write_checkpoint

    earlier = load_checkpoint(into) if into is not None else None
    imported = import_reference(file, arch, overrides, into=earlier, into_name=str(into))
    written = write_checkpoint(imported, output or into, force=force or into is not None)
    click.echo(printable_lines(imported.summary()))
    networks = " and ".join(imported.payload["state"])
    held = imported.payload["state"]
    use = "predict, test, export or train --init-from" if "generator" in held else "train --init-from"
    lacking = next((role for role in ("generator", "discriminator") if role not in held), None)
    if lacking is not None:  # the network it lacks would start from random weights: that must be asked for
        use += f" --init-from-partial (it holds no {lacking})"
    click.echo(printable(f"wrote {written} ({networks}); use it with nectargan {use}"))


def type_name(annotation: Any) -> str:
    """A short name for an option's type: ``int``, ``int|null``, ``batch|instance|none``."""
    origin = get_origin(annotation)
    if origin is Literal:
        return "|".join(str(arg) for arg in get_args(annotation))
    if origin in (Union, types.UnionType):
        return "|".join("null" if arg is type(None) else type_name(arg) for arg in get_args(annotation))
    return getattr(annotation, "__name__", str(annotation))


def _identity(component: Component) -> dict[str, Any]:
    return {
        "name": component.name,
        "role": str(component.meta.get("role", "-")),
        "provider": component.provider,
        "distribution": component.distribution,
        "description": component.description,
    }


def _default_options(component: Component) -> dict[str, Any]:
    model = component.options
    return model().model_dump(mode="json") if model is not None else {}


def _options_table(model: type[BaseModel] | None, values: dict[str, Any]) -> dict[str, dict[str, Any]]:
    if model is None:
        return {}
    table = {}
    for option, info in model.model_fields.items():
        default = "required" if info.is_required() else info.get_default(call_default_factory=True)
        table[option] = {
            "type": type_name(info.annotation),
            "value": values.get(option),
            "default": default,
            "description": info.description or "",
        }
    return table


def _text(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def _echo_table(rows: list[list[str]], right_aligned: Collection[int] = (), indent: str = "") -> None:
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        cells = [
            str(cell).rjust(width) if i in right_aligned else str(cell).ljust(width)
            for i, (cell, width) in enumerate(zip(row, widths))
        ]
        click.echo((indent + "  ".join(cells)).rstrip())
