"""``nectargan plugins``: what is installed, what it provides, and what failed."""

from __future__ import annotations

import json

import click

from ..plugins import PluginInfo, get_plugins


@click.group("plugins")
def plugins_group() -> None:
    """Inspect installed plugins."""


def _components_text(info: PluginInfo) -> str:
    parts = info.as_dict()["components"]
    return "; ".join(f"{kind}: {', '.join(names)}" for kind, names in parts.items()) or "-"


@plugins_group.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.option("--all", "show_all", is_flag=True, help="Include the core's built-in plugins and disabled ones.")
def list_plugins(as_json: bool, show_all: bool) -> None:
    """List installed plugins with status, hooks and registered parts.

    \b
    Examples:
      nectargan plugins list
      nectargan plugins list --all --json
    """
    host = get_plugins()
    infos = [
        p for p in host.plugins.values()
        if show_all or (not p.builtin and p.status in {"loaded", "error"})
    ]
    if as_json:
        click.echo(json.dumps([p.as_dict() for p in infos], indent=2))
        return
    if not infos:
        click.echo("No plugins installed. Try: pip install nectargan-pix2pix")
        return
    for info in infos:
        version = f" {info.version}" if info.version else ""
        click.echo(f"{info.name} ({info.distribution or info.module}{version}) [{info.status}]")
        if info.error:
            click.echo(f"  error: {info.error}")
        if info.hooks:
            click.echo(f"  hooks: {', '.join(info.hooks)}")
        if info.components:
            click.echo(f"  provides: {_components_text(info)}")


@plugins_group.command("show")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def show_plugin(name: str, as_json: bool) -> None:
    """Show one plugin (by entry-point or distribution name) and each part it registers.

    \b
    Example:
      nectargan plugins show core
    """
    info = get_plugins().get(name)
    data = info.as_dict()
    data["parts"] = [c.summary() for c in info.components]
    if as_json:
        click.echo(json.dumps(data, indent=2))
        return
    click.echo(f"name:         {info.name}")
    click.echo(f"distribution: {info.distribution or '-'} {info.version or ''}".rstrip())
    click.echo(f"module:       {info.module}")
    click.echo(f"status:       {info.status}")
    if info.error:
        click.echo(f"error:        {info.error}")
    click.echo(f"hooks:        {', '.join(info.hooks) or '-'}")
    for component in info.components:
        extra = f" - {component.description}" if component.description else ""
        click.echo(f"  {component.kind} {component.name}{extra}")
