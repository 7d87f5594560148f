"""Plugin discovery and loading.

Plugins are modules named by entry points in the ``nectargan`` group, e.g.::

    [project.entry-points.nectargan]
    pix2pix = "nectargan_pix2pix.plugin"

Loading is safe: a plugin whose import, hook validation or registration fails
is recorded with its error (shown by ``nectargan plugins list`` and as one
warning line) and the others keep working. Environment variables:

``NECTARGAN_STRICT_PLUGINS=1``
    any plugin failure is fatal.
``NECTARGAN_DISABLE_PLUGINS=a,b``
    block plugins by entry-point or distribution name, before they are imported.
``NECTARGAN_LOAD_PLUGINS=a,b``
    load only these external plugins (the core's own parts always load).
``NECTARGAN_TRACE_PLUGINS=1``
    print every hook call to stderr.
"""

from __future__ import annotations

import difflib
import os
import re
import sys
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

import importlib_metadata
import pluggy

from . import hookspecs
from .errors import PluginError
from .registry import HOOK_TO_KIND, Component, Registry

ENTRY_POINT_GROUP = "nectargan"
CORE_DISTRIBUTION = "nectargan-core"


def normalize(name: str) -> str:
    """PEP 503 normalisation, so ``Nectargan_Foo`` and ``nectargan-foo`` match."""
    return re.sub(r"[-_.]+", "-", name).lower()


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
    error: str | None = None
    hooks: list[str] = field(default_factory=list)
    components: list[Component] = field(default_factory=list)

    @property
    def builtin(self) -> bool:
        return normalize(self.distribution or "") == CORE_DISTRIBUTION

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "module": self.module,
            "distribution": self.distribution,
            "version": self.version,
            "status": self.status,
            "error": self.error,
            "builtin": self.builtin,
            "hooks": list(self.hooks),
            "components": {
                kind: [c.name for c in self.components if c.kind == kind]
                for kind in dict.fromkeys(c.kind for c in self.components)
            },
        }


@dataclass
class _Entry:
    name: str
    value: str
    distribution: str | None
    version: str | None
    entry_point: Any


def discover_entry_points() -> list[_Entry]:
    """Every ``nectargan`` entry point, once each, core first then by name."""
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
    entries.sort(key=lambda e: (normalize(e.distribution or "") != CORE_DISTRIBUTION, e.name))
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
        self.pm = pluggy.PluginManager(hookspecs.PROJECT_NAME)
        self.pm.add_hookspecs(hookspecs.RegistrationSpecs)
        if self.trace:
            self.pm.add_hookcall_monitoring(*make_tracer())
        self.registry = Registry()
        self.plugins: dict[str, PluginInfo] = {}
        self._modules: dict[str, Any] = {}

    # -- loading ---------------------------------------------------------
    def load_entry_points(self) -> "PluginHost":
        disabled = env_list(self.env, "NECTARGAN_DISABLE_PLUGINS") or set()
        allowed = env_list(self.env, "NECTARGAN_LOAD_PLUGINS")
        for entry in discover_entry_points():
            info = PluginInfo(entry.name, entry.value, entry.distribution, entry.version)
            names = {normalize(entry.name)}
            if entry.distribution:
                names.add(normalize(entry.distribution))
            if self._claim(info) is None:
                continue
            if names & disabled:
                info.status = "disabled"
                self.pm.set_blocked(entry.name)
                continue
            if allowed is not None and not info.builtin and not names & allowed:
                info.status = "not-allowed"
                continue
            try:
                module = entry.entry_point.load()
            except (Exception, SystemExit) as exc:  # any import failure is the plugin's
                self._fail(info, f"import of '{entry.value}' failed: {type(exc).__name__}: {exc}")
                continue
            self._register(info, module)
        return self

    def add_plugin(self, module: Any, name: str, distribution: str | None = None,
                   version: str | None = None) -> PluginInfo:
        """Register an already-imported plugin object (tests, ``--plugins`` in scripts)."""
        info = PluginInfo(name, getattr(module, "__name__", repr(module)), distribution, version)
        if self._claim(info) is not None:
            self._register(info, module)
        return info

    def _claim(self, info: PluginInfo) -> PluginInfo | None:
        if info.name in self.plugins:
            other = self.plugins[info.name]
            dup = PluginInfo(f"{info.name} ({info.distribution})", info.module,
                             info.distribution, info.version)
            self.plugins[dup.name] = dup
            self._fail(dup, f"plugin name '{info.name}' is already used by "
                            f"{other.distribution or other.module}; rename one entry point")
            return None
        self.plugins[info.name] = info
        return info

    def _register(self, info: PluginInfo, module: Any) -> None:
        try:
            self.pm.register(module, name=info.name)
        except Exception as exc:  # pluggy validation: unknown hook argument, bad marker
            self._fail(info, f"invalid hook implementation: {exc}")
            return
        self._modules[info.name] = module
        callers = self.pm.get_hookcallers(module) or []
        info.hooks = sorted(caller.name for caller in callers)
        for caller in callers:
            if not caller.has_spec():
                self._fail(info, unknown_hook_message(caller.name))
                self.pm.unregister(module)
                del self._modules[info.name]
                return
        staged: list[Component] = []
        try:
            for hook_name in info.hooks:
                kind = HOOK_TO_KIND.get(hook_name)
                if kind is None:
                    continue
                register = self.registry.registrar(kind, info.name, info.distribution, staged)
                caller = self.pm.subset_hook_caller(
                    hook_name, remove_plugins=[m for n, m in self._modules.items() if n != info.name]
                )
                caller(register=register)
        except Exception as exc:  # noqa: BLE001 - a broken plugin must not break the others
            self.pm.unregister(module)
            del self._modules[info.name]
            message = str(exc) if isinstance(exc, PluginError) else f"{type(exc).__name__}: {exc}"
            self._fail(info, f"registration failed: {message}")
            return
        for component in staged:
            self.registry.add(component)
        info.components = staged
        info.status = "loaded"

    def _fail(self, info: PluginInfo, message: str) -> None:
        info.status = "error"
        info.error = message
        if self.strict:
            raise PluginError(
                f"plugin '{info.name}' ({info.distribution or info.module}) failed: {message} "
                "[NECTARGAN_STRICT_PLUGINS=1]"
            )

    # -- using -----------------------------------------------------------
    @property
    def failures(self) -> list[PluginInfo]:
        return [p for p in self.plugins.values() if p.status == "error"]

    def warn_failures(self, stream: Any = None) -> None:
        """One warning line per plugin that failed to load."""
        stream = stream or sys.stderr
        for info in self.failures:
            print(
                f"warning: plugin '{info.name}' ({info.distribution or info.module}) not loaded: "
                f"{info.error}",
                file=stream,
            )

    def get(self, name: str) -> PluginInfo:
        if name in self.plugins:
            return self.plugins[name]
        for info in self.plugins.values():
            if info.distribution and normalize(info.distribution) == normalize(name):
                return info
        close = difflib.get_close_matches(name, list(self.plugins), n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        raise PluginError(f"no plugin named '{name}'{hint}; see 'nectargan plugins list --all'")

    def add_commands(self, cli: Any) -> None:
        """Call every loaded plugin's ``register_commands`` hook, one plugin at a time."""
        for name, module in list(self._modules.items()):
            if "register_commands" not in self.plugins[name].hooks:
                continue
            caller = self.pm.subset_hook_caller(
                "register_commands", remove_plugins=[m for n, m in self._modules.items() if n != name]
            )
            try:
                caller(cli=cli)
            except Exception as exc:  # noqa: BLE001
                self._fail(self.plugins[name], f"register_commands failed: {type(exc).__name__}: {exc}")

    def loaded(self) -> Iterable[PluginInfo]:
        return (p for p in self.plugins.values() if p.status == "loaded")


def unknown_hook_message(name: str) -> str:
    if name in hookspecs.RUN_HOOKS:
        return (
            f"hook '{name}' is a run hook and cannot be implemented on a plugin module; "
            "put it on a class registered with register_callbacks or register_visualizers"
        )
    known = list(hookspecs.REGISTRATION_HOOKS)
    close = difflib.get_close_matches(name, known, n=1)
    hint = f"; did you mean '{close[0]}'?" if close else f"; known hooks: {', '.join(known)}"
    return f"hook '{name}' is not a nectargan hook{hint}"


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
