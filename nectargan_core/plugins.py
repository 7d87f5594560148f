"""Plugin discovery and loading.

Plugins are modules named by entry points in the ``nectargan`` group, e.g.::

    [project.entry-points.nectargan]
    pix2pix = "nectargan_pix2pix.plugin"

Loading is safe: a plugin whose import, hook validation or registration fails
is recorded with its errors (shown by ``nectargan plugins list`` and as one
warning line each; the traceback is kept for ``--traceback``) and the others
keep working. Hook validation covers the run hooks of the trainers, visualizers
and callbacks a plugin registers, read from their source without importing
them (:mod:`nectargan_core.hookcheck`).

Plugins never displace each other: a part name or a command that two plugins
register stays registered for both, reachable by ``distribution:name``, and is
listed as a conflict (see :mod:`nectargan_core.registry`). Environment variables:

``NECTARGAN_STRICT_PLUGINS=1``
    any plugin failure is fatal.
``NECTARGAN_DISABLE_PLUGINS=a,b``
    block plugins by entry-point or distribution name, before they are imported.
``NECTARGAN_LOAD_PLUGINS=a,b``
    load only these external plugins (the core's own parts always load).
``NECTARGAN_TRACE_PLUGINS=1``
    print every hook call to stderr.
``NECTARGAN_DEBUG=1``
    print the traceback of every plugin failure (as ``nectargan --traceback`` does).
"""

from __future__ import annotations

import difflib
import html
import os
import sys
import traceback
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Mapping, Optional

import importlib_metadata
import pluggy

from . import hookcheck, hookspecs
from .errors import NameConflictError, PluginError
from .first_party import provider_hint
from .hookproxy import object_name, proxy_for
from .registry import HOOK_TO_KIND, QUALIFIER, Component, Registry, normalize, qualified_names
from .text import printable

ENTRY_POINT_GROUP = "nectargan"
CORE_DISTRIBUTION = "nectargan-core"


def env_list(env: Mapping[str, str], key: str) -> set[str] | None:
    """The comma-separated names in ``env[key]``, or None when it is unset."""
    raw = env.get(key)
    if raw is None:
        return None
    return {normalize(part) for part in raw.split(",") if part.strip()}


def env_flag(env: Mapping[str, str], key: str) -> bool:
    return env.get(key, "").strip().lower() in {"1", "true", "yes", "on"}


@dataclass
class PluginInfo:
    """What ``nectargan plugins list`` shows about one entry point."""

    name: str
    module: str
    distribution: str | None
    version: str | None
    status: str = "pending"  # loaded | error | disabled | not-allowed
    #: One line per problem (a plugin may have several bad hooks).
    errors: list[str] = field(default_factory=list)
    #: The full traceback (or, for hook problems, where each one is) behind ``--traceback``.
    traceback: str | None = None
    hooks: list[str] = field(default_factory=list)
    components: list[Component] = field(default_factory=list)
    #: Commands this plugin added to ``nectargan`` (qualified when another plugin took the name too).
    commands: list[str] = field(default_factory=list)
    #: One line per name this plugin shares with another plugin.
    conflicts: list[str] = field(default_factory=list)
    #: Unique among the loaded plugins: the entry-point name, or ``name@distribution`` for a second one.
    key: str = ""

    @property
    def builtin(self) -> bool:
        """Whether this is the core's own plugin (distribution nectargan-core)."""
        return normalize(self.distribution or "") == CORE_DISTRIBUTION

    @property
    def error(self) -> str | None:
        """Why the plugin failed to load, in one line (its ``errors`` joined), or None."""
        return "; ".join(self.errors) if self.errors else None

    @property
    def owner(self) -> str:
        """What qualifies this plugin's names: its normalized distribution, else its key."""
        return normalize(self.distribution) if self.distribution else self.key

    @property
    def label(self) -> str:
        """How messages name the plugin: ``plugin 'KEY' (DISTRIBUTION VERSION)``."""
        version = f" {self.version}" if self.version else ""
        return f"plugin '{self.key}' ({self.distribution or self.module}{version})"

    def as_dict(self) -> dict[str, Any]:
        """The plugin as ``nectargan plugins list --json`` shows it."""
        return {
            "name": self.name,
            "module": self.module,
            "distribution": self.distribution,
            "version": self.version,
            "status": self.status,
            "error": self.error,
            "errors": list(self.errors),
            "traceback": self.traceback,
            "builtin": self.builtin,
            "hooks": list(self.hooks),
            "components": {
                kind: [c.name for c in self.components if c.kind == kind]
                for kind in dict.fromkeys(c.kind for c in self.components)
            },
            "commands": list(self.commands),
            "conflicts": list(self.conflicts),
        }


@dataclass
class _Entry:
    name: str
    value: str
    distribution: str | None
    version: str | None
    entry_point: Any


def discover_entry_points() -> list[_Entry]:
    """Every ``nectargan`` entry point, once each, core first then by name (then distribution)."""
    seen: set[tuple[str | None, str, str]] = set()
    entries: list[_Entry] = []
    for ep in importlib_metadata.entry_points(group=ENTRY_POINT_GROUP):
        dist = getattr(ep, "dist", None)
        dist_name = dist.metadata["Name"] if dist is not None else None
        version = dist.version if dist is not None else None
        key = (normalize(dist_name) if dist_name else None, ep.name, ep.value)
        if key in seen:  # the same distribution found twice on sys.path
            continue
        seen.add(key)
        entries.append(_Entry(ep.name, ep.value, dist_name, version, ep))
    entries.sort(key=lambda e: (normalize(e.distribution or "") != CORE_DISTRIBUTION, e.name,
                                normalize(e.distribution or "")))
    return entries


def make_tracer(prefix: str = "nectargan trace") -> tuple[Any, Any]:
    """Monitoring callbacks for ``PluginManager.add_hookcall_monitoring``."""

    def before(hook_name: str, impls: list[Any], kwargs: Mapping[str, Any]) -> None:
        names = ", ".join(impl.plugin_name for impl in impls)
        args = ", ".join(sorted(kwargs))
        print(f"{prefix}: {hook_name}({args}) -> [{names}]", file=sys.stderr)

    def after(outcome: Any, hook_name: str, impls: list[Any], kwargs: Mapping[str, Any]) -> None:
        exc = outcome.exception
        if exc is not None:
            print(f"{prefix}: {hook_name} raised {type(exc).__name__}: {exc}", file=sys.stderr)

    return before, after


class PluginHost:
    """Loaded plugins: the registration plugin manager, the registry and per-plugin status."""

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        self.env = dict(os.environ if env is None else env)
        self.strict = env_flag(self.env, "NECTARGAN_STRICT_PLUGINS")
        self.trace = env_flag(self.env, "NECTARGAN_TRACE_PLUGINS")
        #: Print tracebacks of plugin failures (``NECTARGAN_DEBUG=1`` or ``nectargan --traceback``).
        self.debug = env_flag(self.env, "NECTARGAN_DEBUG")
        self.pm = pluggy.PluginManager(hookspecs.PROJECT_NAME)
        self.pm.add_hookspecs(hookspecs.RegistrationSpecs)
        if self.trace:
            self.pm.add_hookcall_monitoring(*make_tracer())
        self.registry = Registry()
        self.plugins: dict[str, PluginInfo] = {}
        self._modules: dict[str, Any] = {}

    # -- loading ---------------------------------------------------------
    def load_entry_points(self) -> "PluginHost":
        """Import and register every plugin of the ``nectargan`` entry-point group; returns the host.

        ``NECTARGAN_DISABLE_PLUGINS`` and ``NECTARGAN_LOAD_PLUGINS`` (from the host's
        environment) choose which; a plugin that fails is recorded with status
        ``error`` and the others load (``NECTARGAN_STRICT_PLUGINS=1``: it raises).
        """
        disabled = env_list(self.env, "NECTARGAN_DISABLE_PLUGINS") or set()
        allowed = env_list(self.env, "NECTARGAN_LOAD_PLUGINS")
        for entry in discover_entry_points():
            info = PluginInfo(entry.name, entry.value, entry.distribution, entry.version)
            names = {normalize(entry.name)}
            if entry.distribution:
                names.add(normalize(entry.distribution))
            self._claim(info)
            if names & disabled:
                info.status = "disabled"
                self.pm.set_blocked(info.key)
                continue
            if allowed is not None and not info.builtin and not names & allowed:
                info.status = "not-allowed"
                continue
            try:
                module = entry.entry_point.load()
            except (Exception, SystemExit) as exc:  # any import failure is the plugin's
                self._fail(info, [f"import of '{entry.value}' failed: {type(exc).__name__}: {exc}"],
                           traceback.format_exc())
                continue
            self._register(info, module)
        self._note_conflicts()
        return self

    def add_plugin(self, module: Any, name: str, distribution: str | None = None,
                   version: str | None = None) -> PluginInfo:
        """Register an already-imported plugin object (tests, ``--plugins`` in scripts)."""
        info = PluginInfo(name, object_name(module), distribution, version)
        self._claim(info)
        self._register(info, module)
        self._note_conflicts()
        return info

    def _claim(self, info: PluginInfo) -> None:
        """Give ``info`` a unique key: a second plugin of the same entry-point name gets ``name@distribution``."""
        key = info.name
        if key in self.plugins:
            key = f"{info.name}@{normalize(info.distribution or info.module)}"
            number = 2
            while key in self.plugins:
                key, number = f"{info.name}@{normalize(info.distribution or info.module)}-{number}", number + 1
        info.key = key
        self.plugins[key] = info

    def _register(self, info: PluginInfo, module: Any) -> None:
        problems = hookcheck.check_object(module, "", "registration")
        if problems:
            self._fail(info, problems, hook_details(problems))
            return
        module = proxy_for(module, f"plugin '{info.key}'")  # pluggy never reads the module itself
        try:
            self.pm.register(module, name=info.key)
        except Exception as exc:  # pluggy validation the check above does not cover
            first = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
            self._fail(info, [f"invalid hook implementation: {first}"], traceback.format_exc())
            return
        self._modules[info.key] = module
        callers = self.pm.get_hookcallers(module) or []
        info.hooks = sorted(caller.name for caller in callers)
        staged: list[Component] = []
        try:
            for hook_name in info.hooks:
                kind = HOOK_TO_KIND.get(hook_name)
                if kind is None:
                    continue
                register = self.registry.registrar(kind, info.key, info.distribution, staged, info.version)
                caller = self.pm.subset_hook_caller(
                    hook_name, remove_plugins=[m for n, m in self._modules.items() if n != info.key]
                )
                caller(register=register)
        except Exception as exc:  # noqa: BLE001 - a broken plugin must not break the others
            self._unregister(info, module)
            message = str(exc) if isinstance(exc, PluginError) else f"{type(exc).__name__}: {exc}"
            self._fail(info, [f"registration failed: {message}"], traceback.format_exc(), staged)
            return
        problems = [line for component in staged for line in hookcheck.check_part(component)]
        if problems:
            self._unregister(info, module)
            self._fail(info, problems, hook_details(problems), staged)
            return
        for component in staged:
            self.registry.add(component)
        info.components = staged
        info.status = "loaded"

    def _unregister(self, info: PluginInfo, module: Any) -> None:
        self.pm.unregister(module)
        del self._modules[info.key]

    def _fail(self, info: PluginInfo, messages: list[str], trace: str | None = None,
              staged: list[Component] = ()) -> None:
        info.status = "error"
        info.errors = list(messages)
        info.traceback = trace
        reason = messages[0] + (f" (and {len(messages) - 1} more)" if len(messages) > 1 else "")
        for component in staged:
            self.registry.add_failed(component, reason)
        if self.strict:
            raise PluginError(
                f"plugin '{info.key}' ({info.distribution or info.module}) failed: {reason} "
                "[NECTARGAN_STRICT_PLUGINS=1]"
            )

    def _note_conflicts(self) -> None:
        """Tell each plugin which of its names another plugin also registers."""
        by_key = {info.key: info for info in self.plugins.values()}
        for info in self.plugins.values():
            info.conflicts = [line for line in info.conflicts if line.startswith("command ")]
        for group in self.registry.conflicts():
            for component in group:
                others = [c for c in group if c is not component]
                info = by_key.get(component.provider)
                if info is None:
                    continue
                also = " and ".join(c.source for c in others)
                if component.kind == "config_section":
                    info.conflicts.append(
                        f"config section '{component.name}' is also registered by {also}: configs cannot be "
                        "validated until one of them is uninstalled or disabled (NECTARGAN_DISABLE_PLUGINS)")
                    continue
                names = " or ".join(f"'{q}'" for q in qualified_names([component, *others]))
                info.conflicts.append(f"{component.kind} '{component.name}' is also provided by {also}: "
                                      f"configs must name {names}")
        names: dict[str, list[PluginInfo]] = {}
        for info in self.plugins.values():
            names.setdefault(info.name, []).append(info)
        for same in names.values():
            for info in same if len(same) > 1 else ():
                also = " and ".join(o.distribution or o.module for o in same if o is not info)
                info.conflicts.append(f"plugin name '{info.name}' is also used by {also}: this one is "
                                      f"'{info.key}'; name plugins by distribution")

    # -- using -----------------------------------------------------------
    @property
    def failures(self) -> list[PluginInfo]:
        """The plugins that failed to load."""
        return [p for p in self.plugins.values() if p.status == "error"]

    def warn_failures(self, stream: Any = None) -> None:
        """One warning line per problem of each plugin that failed to load (and its traceback when debugging)."""
        stream = stream or sys.stderr
        for info in self.failures:
            for line in info.errors:
                print(f"warning: plugin '{info.key}' ({info.distribution or info.module}) not loaded: {line}",
                      file=stream)
            if self.debug and info.traceback:
                print(info.traceback.rstrip(), file=stream)

    def get(self, name: str) -> PluginInfo:
        """A plugin by entry-point name, key or distribution name."""
        named = [info for info in self.plugins.values() if info.name == name]
        if len(named) > 1:
            raise NameConflictError(
                f"plugin name '{name}' is used by {len(named)} distributions: "
                f"{', '.join(i.distribution or i.module for i in named)}; name the distribution instead")
        if named:
            return named[0]
        if name in self.plugins:
            return self.plugins[name]
        for info in self.plugins.values():
            if info.distribution and normalize(info.distribution) == normalize(name):
                return info
        close = difflib.get_close_matches(name, [i.name for i in self.plugins.values()], n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        install = provider_hint("plugin", name) or provider_hint("plugin", normalize(name).removeprefix("nectargan-"))
        hint += f"; {install}" if install else ""
        raise PluginError(f"no plugin named '{name}'{hint}; see 'nectargan plugins list --all'")

    def add_commands(self, cli: Any) -> None:
        """Call every loaded plugin's ``register_commands`` hook, one plugin at a time.

        Each plugin adds to a group of its own first, so a command name that
        another plugin (or the core) already has is seen instead of silently
        replacing it: the core keeps its commands, and a name two plugins add
        runs neither: it says to run ``nectargan distribution:command`` instead.
        """
        import click

        reserved = set(cli.commands)
        offered: dict[str, list[tuple[PluginInfo, Any]]] = {}
        for key, module in list(self._modules.items()):
            info = self.plugins[key]
            if "register_commands" not in info.hooks:
                continue
            own = click.Group(name=key)
            caller = self.pm.subset_hook_caller(
                "register_commands", remove_plugins=[m for n, m in self._modules.items() if n != key]
            )
            try:
                caller(cli=own)
            except Exception as exc:  # noqa: BLE001
                self._fail(info, [f"register_commands failed: {type(exc).__name__}: {exc}"], traceback.format_exc())
                continue
            for name, command in own.commands.items():
                offered.setdefault(name, []).append((info, command))
        for name, owners in offered.items():
            core = name in reserved or any(info.builtin for info, _ in owners)
            if len(owners) == 1 and not core:
                cli.add_command(owners[0][1], name)
                owners[0][0].commands.append(name)
                continue
            qualified = {info.key: f"{info.owner}{QUALIFIER}{name}" for info, _ in owners if not info.builtin}
            for info, command in owners:
                if info.builtin:
                    cli.add_command(command, name)
                    info.commands.append(name)
                    continue
                cli.add_command(command, qualified[info.key])
                info.commands.append(qualified[info.key])
                others = ["the core"] if name in reserved else list(dict.fromkeys(
                    "the core" if o.builtin else o.label for o, _ in owners if o is not info))
                info.conflicts.append(f"command '{name}' is also added by {' and '.join(others)}: "
                                      f"run this one as 'nectargan {qualified[info.key]}'")
            if not core:
                cli.add_command(ambiguous_command(name, [info for info, _ in owners], qualified))

    def _each_answer(self, hook: str, **kwargs: Any) -> Iterator[tuple[PluginInfo, Any, Optional[BaseException]]]:
        """Each loaded plugin implementing ``hook``, called on its own: ``(plugin, answer, exception)``.

        For hooks outside a run whose answers are optional extras (a hint, a report section): one
        plugin's failure must not take away the others' answers or the command's own output.
        """
        firstresult = getattr(self.pm.hook, hook).spec.opts.get("firstresult", False)
        for key, module in list(self._modules.items()):
            if hook not in self.plugins[key].hooks:
                continue
            caller = self.pm.subset_hook_caller(hook, remove_plugins=[m for n, m in self._modules.items() if n != key])
            try:
                answers = caller(**kwargs)
            except (Exception, SystemExit) as exc:  # noqa: BLE001 - a plugin's sys.exit() is its failure, not ours
                yield self.plugins[key], None, exc
                continue
            if not firstresult:  # a list of this one plugin's answer, empty when it answered None
                answers = answers[0] if answers else None
            yield self.plugins[key], answers, None

    def option_hint(self, command: str, option: str) -> Optional[str]:
        """The first loaded plugin's ``option_hint`` for ``option`` of ``command``, or None; a plugin whose hook
        fails is skipped (a hint must never replace the error it adds to)."""
        for _, hint, error in self._each_answer("option_hint", command=command, option=option):
            if error is None and isinstance(hint, str) and hint.strip():
                return " ".join(hint.split())
        return None

    def report_sections(self, report: Any) -> list[Any]:
        """Every loaded plugin's ``report_sections`` for ``report`` (a ``RunReport``), in plugin order.

        A plugin whose hook raises (or exits) or answers with anything but a list or tuple of valid
        ``ReportSection`` objects gets one short note section on the page instead of its sections, and a
        warning line on stderr (its traceback too under ``NECTARGAN_DEBUG``); the others still show. Under
        ``NECTARGAN_STRICT_PLUGINS`` the failure is a PluginError.
        """
        from .reporting.sections import ReportSection

        sections: list[Any] = []
        for info, answer, error in self._each_answer("report_sections", report=report):
            if error is None and answer is None:
                continue
            problem = (f"{type(error).__name__}: {error}" if error is not None
                       else f"returned a {type(answer).__name__}, not a list of ReportSection"
                       if not isinstance(answer, (list, tuple)) else None)
            if problem is None:
                found = [section.problem() if isinstance(section, ReportSection)
                         else f"returned a {type(section).__name__} where a ReportSection belongs" for section in answer]
                problem = next((p for p in found if p), None)
            if problem is None:
                sections.extend(answer)
                continue
            text = printable(" ".join(str(problem).split()))[:300]
            if self.strict:
                raise PluginError(f"{info.label}: report_sections failed: {text}") from (
                    error if isinstance(error, Exception) else None)
            print(f"warning: {info.label}: report_sections failed, its section is left out of the report: {text}",
                  file=sys.stderr)
            if self.debug and error is not None:
                traceback.print_exception(type(error), error, error.__traceback__, file=sys.stderr)
            sections.append(ReportSection(
                "plugin-note", f"Left out: {info.owner}'s section",
                f'<p class="note">The report_sections hook of {html.escape(info.label)} failed, so its section '
                f"is not on this page: {html.escape(text)}</p>"))
        return sections

    def loaded(self) -> Iterable[PluginInfo]:
        """The plugins that loaded."""
        return (p for p in self.plugins.values() if p.status == "loaded")


def hook_details(problems: list[str]) -> str:
    """What ``--traceback`` shows for hook problems: each problem and the spec it was checked against."""
    lines = ["Hook problems (checked against nectargan_core.hookspecs, see docs/hooks.md):"]
    lines += [f"  {line}" for line in problems]
    return "\n".join(lines)


def ambiguous_command(name: str, owners: list[PluginInfo], qualified: dict[str, str]) -> Any:
    """A stand-in for a command name that several plugins add: running it says which names to run instead."""
    import click

    choices = " or ".join(f"'nectargan {qualified[info.key]}'" for info in owners)
    message = (f"command '{name}' is added by {len(owners)} plugins: "
               f"{' and '.join(info.label for info in owners)}; run {choices}")

    @click.command(name, help=f"Ambiguous: {message}.", context_settings={"ignore_unknown_options": True,
                                                                        "allow_extra_args": True})
    def command() -> None:
        raise NameConflictError(message)

    return command


def unknown_hook_message(name: str) -> str:
    """Why ``name`` on a plugin module is not a registration hook (kept for callers of the old helper)."""
    return hookcheck.unknown_hook_message(name, "registration")


_HOST: PluginHost | None = None


def get_plugins() -> PluginHost:
    """The process-wide plugin host, loaded on first use."""
    global _HOST
    if _HOST is None:
        _HOST = PluginHost().load_entry_points()
    return _HOST


def reset_plugins() -> None:
    """Forget the loaded plugins (tests; after installing a plugin at run time)."""
    global _HOST
    _HOST = None
