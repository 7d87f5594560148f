"""The registry: every named part that plugins contribute, and who contributed it.

Registration hooks receive a ``register`` callable bound to one kind of part
and one provider. It checks the name, refuses a name another plugin already
took (naming both providers), and stages the part; the loader commits a
plugin's parts only if all of its registration hooks succeed, so a plugin that
fails half-way leaves nothing behind.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from .errors import PluginError
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
}
HOOK_TO_KIND = {hook: kind for kind, hook in KINDS.items()}

NAME_PATTERN = re.compile(r"^[A-Za-z][A-Za-z0-9_.+-]{0,63}$")


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

    def load(self) -> Any:
        """The registered object, importing it now if it was given as a reference."""
        try:
            return resolve(self.ref)
        except (ImportError, AttributeError, ValueError) as exc:
            raise PluginError(
                f"{self.kind} '{self.name}' from plugin '{self.provider}' cannot be loaded: "
                f"{exc}; reinstall or disable that plugin"
            ) from exc

    @property
    def options(self) -> Any:
        """The pydantic model of this part's options, or None if it takes none."""
        return resolve(self.options_ref) if self.options_ref is not None else None

    @property
    def provided_by(self) -> str:
        if self.distribution:
            return f"plugin '{self.provider}' ({self.distribution})"
        return f"plugin '{self.provider}'"

    def summary(self) -> dict[str, Any]:
        """A JSON-ready description (no torch import)."""
        data: dict[str, Any] = {
            "kind": self.kind,
            "name": self.name,
            "provider": self.provider,
            "distribution": self.distribution,
            "description": self.description,
        }
        data.update({k: v for k, v in self.meta.items() if isinstance(v, (str, int, float, bool))})
        return data


def check_name(kind: str, name: Any) -> str:
    if not isinstance(name, str) or not NAME_PATTERN.match(name):
        raise PluginError(
            f"invalid {kind} name {name!r}: names start with a letter and use only "
            "letters, digits and _ . + - (at most 64 characters)"
        )
    return name


class Registry:
    """Registered parts by kind and name."""

    def __init__(self) -> None:
        self._parts: dict[str, dict[str, Component]] = {kind: {} for kind in KINDS}

    # -- reading ---------------------------------------------------------
    def names(self, kind: str) -> list[str]:
        return sorted(self._parts[kind])

    def all(self, kind: str) -> list[Component]:
        return [self._parts[kind][n] for n in self.names(kind)]

    def __iter__(self) -> Iterator[Component]:
        for kind in KINDS:
            yield from self.all(kind)

    def has(self, kind: str, name: str) -> bool:
        return name in self._parts[kind]

    def get(self, kind: str, name: str, *, key: str | None = None) -> Component:
        """The part called ``name``, or a one-line error listing what exists."""
        try:
            return self._parts[kind][name]
        except KeyError:
            raise PluginError(unknown_name_message(kind, name, self.names(kind), key=key)) from None

    def provided_by(self, provider: str) -> list[Component]:
        return [c for c in self if c.provider == provider]

    # -- writing ---------------------------------------------------------
    def add(self, component: Component) -> None:
        existing = self._parts[component.kind].get(component.name)
        if existing is not None:
            raise PluginError(
                f"{component.kind} '{component.name}' is registered twice: by "
                f"{existing.provided_by} and by {component.provided_by}; "
                "uninstall or disable one of them (NECTARGAN_DISABLE_PLUGINS)"
            )
        self._parts[component.kind][component.name] = component

    def registrar(
        self, kind: str, provider: str, distribution: str | None, staged: list[Component]
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
            if description is None:
                doc = getattr(obj, "__doc__", None) if not isinstance(obj, str) else None
                description = (doc or "").strip().splitlines()[0] if doc else ""
            component = Component(
                kind=kind,
                name=name,
                ref=obj,
                provider=provider,
                distribution=distribution,
                options_ref=options,
                description=description,
                meta=dict(meta),
            )
            for other in staged:
                if other.kind == kind and other.name == name:
                    raise PluginError(
                        f"{kind} '{name}' is registered twice by {component.provided_by}"
                    )
            existing = self._parts[kind].get(name)
            if existing is not None:
                self.add(component)  # raises the two-provider error
            staged.append(component)

        register.__name__ = f"register_{kind}"
        return register


def unknown_name_message(kind: str, name: str, known: list[str], *, key: str | None = None) -> str:
    where = f"{key}: " if key else ""
    close = difflib.get_close_matches(str(name), known, n=1)
    hint = f" (did you mean '{close[0]}'?)" if close else ""
    available = ", ".join(known) if known else "none installed"
    return f"{where}unknown {kind} '{name}'{hint}; available: {available}"
