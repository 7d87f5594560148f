"""The registry: every named part that plugins contribute, and who contributed it.

Registration hooks receive a ``register`` callable bound to one kind of part
and one provider. It checks the name and stages the part; the loader commits a
plugin's parts only if all of its registration hooks succeed, so a plugin that
fails half-way leaves nothing behind.

Names never substitute for each other. Two plugins may register the same name:
both parts stay registered, each reachable by its qualified name
``distribution:name`` (or ``plugin:name``, the entry-point name), and the bare
name becomes ambiguous: looking it up is an error naming both providers and the
qualified names to use. Which plugin loaded first never matters.

Looking names up inside :meth:`Registry.recording` notes which part each name
resolved to, so a run can record the distribution and version behind every
part it uses (see :mod:`nectargan_core.provenance`); :meth:`Registry.pinned`
gives a view that resolves ambiguous bare names the way a run recorded them.
"""

from __future__ import annotations

import copy
import difflib
import re
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping

from .brokenimports import any_shadowed, failed_package, install_hint, shadow_line
from .errors import NameConflictError, PluginError
from .first_party import provider_hint
from .lazy import resolve

#: Kind of part -> the registration hook that provides it.
KINDS: dict[str, str] = {
    "model": "register_models",
    "loss": "register_losses",
    "loss_spec": "register_loss_specs",
    "schedule": "register_schedules",
    "trainer": "register_trainers",
    "dataset": "register_datasets",
    "visualizer": "register_visualizers",
    "callback": "register_callbacks",
    "config_section": "register_config_sections",
    "preset": "register_presets",
    "metric": "register_metrics",
}
#: What each kind's ``register`` call must say besides the name: ``metric`` needs its direction.
REQUIRED_META: dict[str, dict[str, tuple[str, ...]]] = {"metric": {"direction": ("min", "max")}}
HOOK_TO_KIND = {hook: kind for kind, hook in KINDS.items()}
#: Kinds whose parts are classes implementing run hooks.
RUN_HOOK_KINDS = ("trainer", "visualizer", "callback")

NAME_PATTERN = re.compile(r"^[A-Za-z][A-Za-z0-9_.+-]{0,63}$")
QUALIFIER = ":"
"""Separates the distribution (or plugin) from the part's name in a qualified name (``nectargan-losses:l1``)."""


def normalize(name: str) -> str:
    """PEP 503 normalisation, so ``Nectargan_Foo`` and ``nectargan-foo`` match."""
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True)
class Component:
    """One registered part: a model, a loss, a trainer, ..."""

    kind: str
    name: str
    ref: Any = field(repr=False)
    provider: str
    distribution: str | None = None
    options_ref: Any = field(default=None, repr=False)
    description: str = ""
    meta: dict[str, Any] = field(default_factory=dict)
    version: str | None = None

    def load(self) -> Any:
        """The registered object, importing it now if it was given as a reference."""
        try:
            return resolve(self.ref)
        except (ImportError, AttributeError, ValueError) as exc:
            own = (self.ref.split(":")[0].split(".")[0],) if isinstance(self.ref, str) else ()
            culprit = failed_package(exc, own)
            hidden = shadow_line(culprit or any_shadowed() or "", exc)
            if hidden is not None:
                advice = hidden
            elif culprit is None:
                advice = f"{exc}; reinstall or disable that plugin"
            elif isinstance(exc, ModuleNotFoundError):
                advice = f"{exc}; install it ({install_hint(culprit)}), or disable that plugin"
            else:
                advice = (f"importing {culprit} failed: {exc}; install a version of {culprit} that works with the "
                          f"installed packages (usually a newer one: pip install -U {culprit}), or disable that plugin")
            raise PluginError(
                f"{self.kind} '{self.name}' from plugin '{self.provider}' cannot be loaded: {advice}"
            ) from exc

    @property
    def options(self) -> Any:
        """The pydantic model of this part's options, or None if it takes none."""
        return resolve(self.options_ref) if self.options_ref is not None else None

    @property
    def provided_by(self) -> str:
        """How messages name the part's plugin: ``plugin 'NAME' (DISTRIBUTION)``."""
        if self.distribution:
            return f"plugin '{self.provider}' ({self.distribution})"
        return f"plugin '{self.provider}'"

    @property
    def source(self) -> str:
        """``nectargan-foo 1.2.0 (plugin 'foo')``: what to install to get this part."""
        if not self.distribution:
            return f"plugin '{self.provider}'"
        version = f" {self.version}" if self.version else ""
        return f"{normalize(self.distribution)}{version} (plugin '{self.provider}')"

    @property
    def qualified(self) -> str:
        """``distribution:name`` (``plugin:name`` for a plugin that no distribution installed)."""
        owner = normalize(self.distribution) if self.distribution else self.provider
        return f"{owner}{QUALIFIER}{self.name}"

    def summary(self) -> dict[str, Any]:
        """A JSON-ready description (no torch import)."""
        data: dict[str, Any] = {
            "kind": self.kind,
            "name": self.name,
            "qualified": self.qualified,
            "provider": self.provider,
            "distribution": self.distribution,
            "version": self.version,
            "description": self.description,
        }
        data.update({k: v for k, v in self.meta.items() if isinstance(v, (str, int, float, bool))})
        return data


@dataclass(frozen=True)
class Use:
    """One name looked up while recording: what it resolved to, and whether it was qualified."""

    kind: str
    component: Component
    qualified: bool


class Recording:
    """The parts resolved inside :meth:`Registry.recording`, and the pins it resolves by."""

    def __init__(self, pins: Mapping[tuple[str, str], str] | None = None,
                 hints: Mapping[tuple[str, str], str] | None = None,
                 refuse: Callable[[Use], str | None] | None = None) -> None:
        #: (kind, name) -> normalized distribution (or plugin) that an ambiguous bare name means.
        self.pins = dict(pins or {})
        #: (kind, name) -> what to install when the name is not provided any more.
        self.hints = dict(hints or {})
        #: Says why a resolved part must not be used (a substitute for a recorded one), or None.
        self.refuse = refuse
        self.uses: list[Use] = []

    def note(self, use: Use) -> None:
        """Record ``use``, unless ``refuse`` objects to it: then a one-line PluginError saying why."""
        reason = self.refuse(use) if self.refuse is not None else None
        if reason:
            raise PluginError(reason)
        self.uses.append(use)


def check_name(kind: str, name: Any) -> str:
    if not isinstance(name, str) or not NAME_PATTERN.match(name):
        raise PluginError(
            f"invalid {kind} name {name!r}: names start with a letter and use only "
            "letters, digits and _ . + - (at most 64 characters)"
        )
    return name


def default_description(obj: Any) -> str:
    """A part's description when ``register`` got none: a mapping's ``description`` entry, else the
    first line of the object's own docstring (never the docstring of a built-in type such as dict)."""
    if isinstance(obj, Mapping):
        return str(obj.get("description") or "").strip()
    if isinstance(obj, (str, bytes, int, float, list, tuple, set)):
        return ""
    doc = getattr(obj, "__doc__", None)
    if not doc or (not isinstance(obj, type) and doc == getattr(type(obj), "__doc__", None)
                   and type(obj).__module__ == "builtins"):
        return ""
    return doc.strip().splitlines()[0] if doc.strip() else ""


class Registry:
    """Registered parts by kind and name; a name may have several providers."""

    def __init__(self) -> None:
        self._parts: dict[str, dict[str, list[Component]]] = {kind: {} for kind in KINDS}
        #: Parts of plugins that failed to load, with the reason: named in "unknown name" errors.
        self._failed: dict[tuple[str, str], tuple[Component, str]] = {}
        self._pins: dict[tuple[str, str], str] = {}
        self._recording: Recording | None = None

    # -- reading ---------------------------------------------------------
    def names(self, kind: str) -> list[str]:
        """The registered names of ``kind`` (``model``, ``loss``, ...), sorted."""
        return sorted(self._parts[kind])

    def all(self, kind: str) -> list[Component]:
        """Every part of ``kind``, by name, then qualified name (a name with two providers appears twice)."""
        return sorted((c for parts in self._parts[kind].values() for c in parts),
                      key=lambda c: (c.name, c.qualified))

    def __iter__(self) -> Iterator[Component]:
        for kind in KINDS:
            yield from self.all(kind)

    def has(self, kind: str, name: str) -> bool:
        """Whether ``name`` (bare or qualified) names at least one registered part."""
        return bool(self._candidates(kind, name)[0])

    def install_advice(self, kind: str, name: str) -> str:
        """What to install for a part named ``name`` that is not registered: the project's own distribution that
        provides it, else the generic advice."""
        return provider_hint(kind, str(name).rpartition(QUALIFIER)[2]) or (
            f"install the plugin that provides it (nectargan plugins list shows the {kind}s)")

    def providers(self, kind: str, name: str) -> list[Component]:
        """Every part registered as ``name`` (bare), in loading order."""
        return list(self._parts[kind].get(name, ()))

    def conflicts(self) -> list[list[Component]]:
        """Groups of parts that share a kind and a bare name (each group has two or more)."""
        return [parts for kind in KINDS for _, parts in sorted(self._parts[kind].items()) if len(parts) > 1]

    def get(self, kind: str, name: str, *, key: str | None = None,
            among: Callable[[Component], bool] | None = None, label: str | None = None) -> Component:
        """The part called ``name`` (bare or ``distribution:name``), or a one-line error.

        Unknown names list what exists (with a "did you mean"); a bare name that
        several plugins provide raises :class:`NameConflictError` naming them
        all and the qualified names to write instead. ``among`` narrows the
        parts considered (e.g. losses that are GAN objectives) and ``label``
        names them in messages (``GAN objective`` instead of ``loss``).
        """
        if not isinstance(name, str):
            raise PluginError(f"{key + ': ' if key else ''}{label or kind} name must be a string (got {name!r})")
        candidates, qualified = self._candidates(kind, name)
        if among is not None:
            candidates = [c for c in candidates if among(c)]
        bare = name.rpartition(QUALIFIER)[2]
        if len(candidates) > 1 and not qualified:
            pinned = self._pinned(kind, bare, candidates)
            if pinned is not None:
                candidates = [pinned]
        where = f"{key}: " if key else ""
        if len(candidates) == 1:
            if self._recording is not None:
                try:
                    self._recording.note(Use(kind, candidates[0], qualified))
                except PluginError as exc:
                    raise PluginError(where + str(exc)) from None
            return candidates[0]
        if candidates:
            raise NameConflictError(where + ambiguous_message(label or kind, name, candidates))
        raise PluginError(where + self._unknown_message(kind, name, qualified, among, label))

    def listing(self, kind: str, among: Callable[[Component], bool] | None = None) -> list[str]:
        """The names of ``kind`` to show as "available": bare, or qualified where several plugins provide one."""
        shown: list[str] = []
        for name, parts in sorted(self._parts[kind].items()):
            parts = [c for c in parts if among is None or among(c)]
            if len(parts) == 1:
                shown.append(name)
            elif parts:
                shown.extend(sorted(qualified_names(parts)))
        return shown

    def note(self, component: Component) -> None:
        """Record that a run uses ``component`` although no name was looked up (e.g. a config section)."""
        if self._recording is not None:
            self._recording.note(Use(component.kind, component, False))

    def provided_by(self, provider: str) -> list[Component]:
        """The parts registered by the plugin ``provider``."""
        return [c for c in self if c.provider == provider]

    def _candidates(self, kind: str, name: str) -> tuple[list[Component], bool]:
        """The parts ``name`` may mean, and whether it was qualified."""
        owner, sep, bare = name.rpartition(QUALIFIER)
        parts = self._parts[kind].get(bare, [])
        if not sep:
            return list(parts), False
        wanted = normalize(owner)
        by_distribution = [c for c in parts if c.distribution and normalize(c.distribution) == wanted]
        return by_distribution or [c for c in parts if normalize(c.provider) == wanted], True

    def _pinned(self, kind: str, name: str, candidates: list[Component]) -> Component | None:
        pins = dict(self._pins)
        if self._recording is not None:
            pins.update(self._recording.pins)
        owner = pins.get((kind, name))
        if owner is None:
            return None
        chosen = [c for c in candidates if normalize(c.distribution or c.provider) == owner]
        return chosen[0] if len(chosen) == 1 else None

    def _unknown_message(self, kind: str, name: str, qualified: bool,
                         among: Callable[[Component], bool] | None = None, label: str | None = None) -> str:
        owner, _, bare = name.rpartition(QUALIFIER)
        failed = self._failed.get((kind, bare))
        if failed is not None and (not qualified or normalize(owner) in {
                normalize(failed[0].distribution or ""), normalize(failed[0].provider)}):
            component, reason = failed
            return (f"{kind} '{bare}' comes from {component.source}, which failed to load: {reason}; "
                    "fix or reinstall it (see 'nectargan plugins list')")
        provided = [c for c in self._parts[kind].get(bare, []) if among is None or among(c)]
        if qualified and provided:
            providers = " or ".join(f"'{c.qualified}'" for c in provided)
            return f"no plugin '{owner}' provides a {label or kind} '{bare}'; it is provided as {providers}"
        hint = self._recording.hints.get((kind, bare)) if self._recording is not None else None
        message = unknown_name_message(label or kind, name, self.listing(kind, among))
        install = provider_hint(kind, bare) if not provided else None
        if hint:
            message = message.replace("; available:", f"; {hint}; available:", 1)
        elif install:  # a part of ours whose distribution is not installed
            message = message.replace("; available:", f"; {install}; available:", 1)
        return message

    # -- recording and pinning -------------------------------------------
    @contextmanager
    def recording(self, pins: Mapping[tuple[str, str], str] | None = None,
                  hints: Mapping[tuple[str, str], str] | None = None,
                  refuse: Callable[[Use], str | None] | None = None) -> Iterator[Recording]:
        """Note every part a lookup resolves to, resolving ambiguous bare names by ``pins``.

        ``pins`` maps (kind, name) to the normalized distribution (or plugin)
        the name meant when it was recorded; ``hints`` add what to install to
        "unknown name" errors; ``refuse`` may turn a lookup into an error where
        it resolves (a substitute for a recorded part), so the substitute's
        options are never checked. Not reentrant: an inner recording replaces the outer one.
        """
        previous, self._recording = self._recording, Recording(pins, hints, refuse)
        try:
            yield self._recording
        finally:
            self._recording = previous

    def pinned(self, pins: Mapping[tuple[str, str], str]) -> "Registry":
        """A view of the same parts that resolves ambiguous bare names by ``pins`` (see :meth:`recording`)."""
        view = copy.copy(self)
        view._pins = {**self._pins, **pins}
        view._recording = None
        return view

    # -- writing ---------------------------------------------------------
    def add(self, component: Component) -> None:
        """Register ``component``; another plugin's part of the same name stays registered beside it."""
        parts = self._parts[component.kind].setdefault(component.name, [])
        if any(c.provider == component.provider for c in parts):
            raise PluginError(f"{component.kind} '{component.name}' is registered twice by {component.provided_by}")
        parts.append(component)

    def add_failed(self, component: Component, reason: str) -> None:
        """Remember a part of a plugin that failed to load, so looking its name up says why it is missing."""
        self._failed.setdefault((component.kind, component.name), (component, reason))

    def registrar(
        self, kind: str, provider: str, distribution: str | None, staged: list[Component],
        version: str | None = None,
    ) -> Callable[..., None]:
        """The ``register`` callable handed to one plugin's ``register_*`` hook."""

        def register(
            name: str,
            obj: Any,
            *,
            options: Any = None,
            description: str | None = None,
            **meta: Any,
        ) -> None:
            check_name(kind, name)
            if obj is None:
                raise PluginError(f"{kind} '{name}' from plugin '{provider}' was registered as None")
            for key, allowed in REQUIRED_META.get(kind, {}).items():
                if meta.get(key) not in allowed:
                    raise PluginError(f"{kind} '{name}' from plugin '{provider}': register it with "
                                      f"{key}={' or '.join(repr(a) for a in allowed)} (got {meta.get(key)!r})")
            if description is None:
                description = default_description(obj)
            component = Component(
                kind=kind,
                name=name,
                ref=obj,
                provider=provider,
                distribution=distribution,
                options_ref=options,
                description=description,
                meta=dict(meta),
                version=version,
            )
            for other in staged:
                if other.kind == kind and other.name == name:
                    raise PluginError(
                        f"{kind} '{name}' is registered twice by {component.provided_by}"
                    )
            staged.append(component)

        register.__name__ = f"register_{kind}"
        return register


def qualified_names(candidates: list[Component]) -> list[str]:
    """A name per candidate that tells them apart: ``distribution:name``, or ``plugin:name`` within one distribution."""
    owners = [normalize(c.distribution) if c.distribution else None for c in candidates]
    return [c.qualified if owner and owners.count(owner) == 1 else f"{c.provider}{QUALIFIER}{c.name}"
            for c, owner in zip(candidates, owners)]


def ambiguous_message(kind: str, name: str, candidates: list[Component]) -> str:
    """``loss 'tv' is provided by 2 plugins: ...; name one of them: 'a:tv' or 'b:tv'``."""
    sources = " and ".join(c.source for c in candidates)
    names = " or ".join(f"'{q}'" for q in qualified_names(candidates))
    return f"{kind} '{name}' is provided by {len(candidates)} plugins: {sources}; name one of them: {names}"


def unknown_name_message(kind: str, name: str, known: list[str], *, key: str | None = None) -> str:
    """The one-line error for a name no plugin registered: the key at fault, the closest known name, all known names."""
    where = f"{key}: " if key else ""
    close = difflib.get_close_matches(str(name).rpartition(QUALIFIER)[2], known, n=1)
    hint = f" (did you mean '{close[0]}'?)" if close else ""
    available = ", ".join(known) if known else "none installed"
    return f"{where}unknown {kind} '{name}'{hint}; available: {available}"
