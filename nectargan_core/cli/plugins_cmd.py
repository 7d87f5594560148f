"""``nectargan plugins``: what is installed, what it provides, what failed and what conflicts; new, install, uninstall."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import click

from ..errors import PluginError
from ..plugins import env_flag, get_plugins, normalize
from ..scaffold import KINDS
from ..text import printable


@click.group("plugins")
def plugins_group() -> None:
    """Inspect, create, install and uninstall plugins."""


def _components_text(parts: dict[str, list[str]]) -> str:
    return "; ".join(f"{kind}: {', '.join(names)}" for kind, names in parts.items()) or "-"


def _show_traceback(flag: bool) -> bool:
    return flag or env_flag(os.environ, "NECTARGAN_DEBUG")


def _echo_entry(entry: dict[str, Any], traceback: bool, *, hooks: bool = True) -> None:
    """One plugin as ``plugins list`` and ``plugins install`` show it (``entry`` is ``PluginInfo.as_dict()``)."""
    version = f" {entry['version']}" if entry["version"] else ""
    click.echo(f"{entry['name']} ({entry['distribution'] or entry['module']}{version}) [{entry['status']}]")
    for line in entry["errors"]:
        click.echo(f"  error: {line}")
    if traceback and entry["traceback"]:
        click.echo("  " + entry["traceback"].rstrip().replace("\n", "\n  "))
    if hooks and entry["hooks"]:
        click.echo(f"  hooks: {', '.join(entry['hooks'])}")
    if entry["components"]:
        click.echo(f"  provides: {_components_text(entry['components'])}")
    if entry["commands"]:
        click.echo(f"  commands: {', '.join(entry['commands'])}")
    for line in entry["conflicts"]:
        click.echo(f"  conflict: {line}")


@plugins_group.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.option("--all", "show_all", is_flag=True, help="Include the core's built-in plugins and disabled ones.")
@click.option("--traceback", "traceback", is_flag=True, help="Show the full traceback of each plugin failure.")
def list_plugins(as_json: bool, show_all: bool, traceback: bool) -> None:
    """List installed plugins with status, hooks, registered parts, commands and conflicts.

    A name that two plugins register is listed under both as a conflict: it
    stays usable as DISTRIBUTION:NAME. Run hooks of the trainers, visualizers
    and callbacks are checked here (a bad one marks its plugin as error).

    \b
    Examples:
      nectargan plugins list
      nectargan plugins list --all --json
      nectargan plugins list --traceback
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
        _echo_entry(info.as_dict(), _show_traceback(traceback))


@plugins_group.command("show")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--traceback", "traceback", is_flag=True, help="Show the full traceback of a failure.")
def show_plugin(name: str, as_json: bool, traceback: bool) -> None:
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
    for line in info.errors:
        click.echo(f"error:        {line}")
    if _show_traceback(traceback) and info.traceback:
        click.echo(info.traceback.rstrip())
    click.echo(f"hooks:        {', '.join(info.hooks) or '-'}")
    if info.commands:
        click.echo(f"commands:     {', '.join(info.commands)}")
    for line in info.conflicts:
        click.echo(f"conflict:     {line}")
    for component in info.components:
        extra = f" - {component.description}" if component.description else ""
        click.echo(f"  {component.kind} {component.name} ({component.qualified}){extra}")


@plugins_group.command("new")
@click.argument("name")
@click.option("--kind", type=click.Choice(KINDS),
              default="loss", show_default=True, help="The kind of part the example registers.")
@click.option("--dir", "directory", type=click.Path(file_okay=False, path_type=Path), default=Path("."),
              show_default=True, help="Where to create the nectargan-NAME folder.")
def new_plugin(name: str, kind: str, directory: Path) -> None:
    """Create a plugin distribution nectargan-NAME with a working example part and its tests.

    \b
    Example:
      nectargan plugins new sharpness --kind loss
      pip install -e "./nectargan-sharpness[test]" && pytest nectargan-sharpness
    """
    from ..scaffold import render

    target = render(name, kind, directory)
    click.echo(printable(f"created {target} ({kind} '{name}')"))
    where = str(target) if target.is_absolute() else f"./{target}"
    click.echo(f"next: pip install -e \"{where}[test]\" && pytest {where}")


def _pip(*args: str) -> None:
    """Run pip of this interpreter, so plugins land where nectargan runs; its output goes to the terminal."""
    done = subprocess.run([sys.executable, "-m", "pip", *args], check=False)
    if done.returncode:
        raise PluginError(f"pip {args[0]} failed with exit code {done.returncode}")


def _pip_install_reporting(specs: tuple[str, ...]) -> set[str]:
    """``pip install SPECS``; the normalized names of the distributions pip (re)installed.

    From pip's installation report, so a folder or wheel whose version did not
    change (a plugin rebuilt during development) still counts as installed.
    """
    import tempfile

    with tempfile.TemporaryDirectory(prefix="nectargan-pip-") as folder:
        report = Path(folder) / "report.json"
        _pip("install", "--report", str(report), *specs)
        try:
            data = json.loads(report.read_text())
        except (OSError, ValueError):
            return set()  # a pip that wrote no report: fall back to comparing versions
    names = {item.get("metadata", {}).get("name") for item in data.get("install", []) if isinstance(item, dict)}
    return {normalize(name) for name in names if isinstance(name, str)}


def _fresh_plugin_list() -> list[dict[str, Any]]:
    """Every plugin as a new process sees it (this process has already imported the old versions),
    with its run hooks checked, its commands and its conflicts."""
    done = subprocess.run([sys.executable, "-m", "nectargan_core", "plugins", "list", "--all", "--json"],
                          capture_output=True, text=True, check=False,
                          env={**os.environ, "NECTARGAN_STRICT_PLUGINS": "0"})
    if done.returncode:
        last = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
        raise PluginError(f"listing plugins in a new process failed: {last}")
    return json.loads(done.stdout)


def _matches(entry: dict[str, Any], names: set[str]) -> bool:
    return normalize(entry["name"]) in names or normalize(entry["distribution"] or "") in names


@plugins_group.command("install", context_settings={"ignore_unknown_options": True})
@click.argument("specs", nargs=-1, required=True)
def install_plugins(specs: tuple[str, ...]) -> None:
    """Install plugins with pip (into this environment) and check every installed plugin again.

    SPECS are anything pip installs (names, folders, wheels, URLs); pip options
    such as --upgrade or --no-deps pass through. Prints each plugin it added or
    changed with its parts, commands and the names it shares with other
    plugins (use DISTRIBUTION:NAME for those). Exits non-zero when a plugin it
    installed fails to load, or a plugin that loaded before does not any more.
    Set NECTARGAN_DEBUG=1 to see the tracebacks of failures.

    \b
    Examples:
      nectargan plugins install nectargan-visdom
      nectargan plugins install ./nectargan-sharpness
    """
    earlier = _fresh_plugin_list()
    before = {(e["name"], e["distribution"], e["version"]) for e in earlier}
    loaded_before = {(e["name"], e["distribution"]) for e in earlier if e["status"] == "loaded"}
    installed = _pip_install_reporting(specs)
    after = _fresh_plugin_list()
    requested = {normalize(spec) for spec in specs if not spec.startswith("-")} | installed
    changed = [e for e in after
               if (e["name"], e["distribution"], e["version"]) not in before or _matches(e, requested)]
    if not changed:
        raise PluginError(f"pip installed {' '.join(specs)}, but no new nectargan plugin appeared; "
                          "is the 'nectargan' entry point declared?")
    traceback = _show_traceback(False)
    for entry in changed:
        _echo_entry(entry, traceback, hooks=False)
    broken = [e for e in after if e not in changed and e["status"] == "error"
              and (e["name"], e["distribution"]) in loaded_before]
    for entry in broken:
        click.echo(f"no longer loads: {entry['name']} ({entry['distribution']} {entry['version']})")
        for line in entry["errors"]:
            click.echo(f"  error: {line}")
    conflicts = sum(len(e["conflicts"]) for e in changed)
    if any(e["status"] == "error" for e in changed) or broken:
        raise PluginError("installed, but a plugin does not load (see above)")
    if conflicts:
        click.echo(f"warning: installed; {conflicts} name(s) shared with other plugins (see 'conflict:' above): "
                   "configs must name them as DISTRIBUTION:NAME", err=True)


def _plugins_requiring(removed: set[str]) -> dict[str, list[str]]:
    """``{plugin distribution: [what it requires from removed]}`` for the installed nectargan plugins that
    stay, from their declared requirements (markers and extras are not evaluated: a plugin that names a
    distribution at all is reported)."""
    import re

    import importlib_metadata

    needing: dict[str, list[str]] = {}
    for dist in importlib_metadata.distributions():
        name = dist.metadata["Name"] or ""
        if not name or normalize(name) in removed or not dist.entry_points.select(group="nectargan"):
            continue
        needs = sorted({normalize(re.split(r"[\s\[=<>!~;(]", text, maxsplit=1)[0]) for text in dist.requires or []
                        if "extra ==" not in text} & removed)
        if needs:
            needing[name] = needs
    return needing


@plugins_group.command("uninstall")
@click.argument("names", nargs=-1, required=True)
def uninstall_plugins(names: tuple[str, ...]) -> None:
    """Uninstall plugin distributions with pip and confirm they are gone.

    NAMES are distribution names or plugin (entry-point) names as shown by
    'nectargan plugins list'.

    \b
    Example:
      nectargan plugins uninstall nectargan-sharpness
    """
    wanted = {normalize(name) for name in names}
    earlier = _fresh_plugin_list()
    listed = [e for e in earlier if _matches(e, wanted)]
    unknown = wanted - {normalize(e[key] or "") for e in listed for key in ("name", "distribution")}
    if unknown:
        raise PluginError(f"no installed plugin named {', '.join(sorted(unknown))}; see 'nectargan plugins list'")
    if any(e["builtin"] for e in listed):
        raise PluginError("the core's built-in plugins are part of nectargan-core and cannot be uninstalled")
    distributions = sorted({normalize(e["distribution"]) for e in listed if e["distribution"]})
    needing = _plugins_requiring(set(distributions))
    _pip("uninstall", "--yes", *distributions)
    after = _fresh_plugin_list()
    left = [e for e in after if _matches(e, wanted)]
    if left:
        raise PluginError(f"still installed: {', '.join(e['name'] for e in left)} "
                          "(installed in another location on sys.path?)")
    click.echo(f"uninstalled: {', '.join(distributions)}")
    loaded_before = {(e["name"], e["distribution"]) for e in earlier if e["status"] == "loaded"}
    broken = [e for e in after if e["status"] == "error" and (e["name"], e["distribution"]) in loaded_before]
    for entry in broken:  # a plugin that needed what was uninstalled (cyclegan without translate)
        click.echo(f"no longer loads: {entry['name']} ({entry['distribution']} {entry['version']})")
        for line in entry["errors"]:
            click.echo(f"  error: {line}")
    # A plugin can still load without what it requires (pix2pix without nectargan-models: its presets then
    # name models nobody provides): its declared requirements say so.
    silent = {dist: needs for dist, needs in needing.items()
              if normalize(dist) not in {normalize(e["distribution"] or "") for e in broken}}
    for dist, needs in sorted(silent.items()):
        click.echo(f"no longer works: {dist} requires {', '.join(needs)}")
    failing = [e["distribution"] or e["name"] for e in broken] + sorted(silent)
    if failing:
        raise PluginError(f"uninstalled, but {', '.join(failing)} needed it (see above): uninstall "
                          f"{'that' if len(failing) == 1 else 'those'} too, or install again what "
                          f"{'it needs' if len(failing) == 1 else 'they need'}")
