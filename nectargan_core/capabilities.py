"""Trainer capabilities: core options that only work when the trainer implements them.

Most core options (epochs, checkpoints, the validation cadence) are the
engine's own and work for every trainer. A few need the trainer's step to
cooperate: ``loop.nonfinite: skip`` is only safe when the trainer leaves the
update of a non-finite batch out; a trainer that does not would go on
training on NaN weights. A trainer declares what it implements in its
``capabilities`` class attribute (declaring ``kit = TrainerKit()`` adds what
the kit implements), and the config is refused when it asks for something the
chosen trainer does not declare: one line, exit 2, before any run directory
is made.

Torch-free: the trainer class is imported (which imports torch) only when the
config asks for an option that needs a capability.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping

from .errors import ConfigError

if TYPE_CHECKING:  # pragma: no cover
    from .registry import Registry

NONFINITE_SKIP = "nonfinite_skip"
"""The trainer leaves the update of a batch with a non-finite loss out (``loop.nonfinite: skip``)."""


@dataclass(frozen=True)
class Requirement:
    """A core option value that only a trainer with ``capability`` may be given."""

    capability: str
    key: str
    value: Any
    #: What the trainer must do for it, as a phrase ("leave ... out").
    needs: str
    #: The value to use instead with a trainer that cannot.
    instead: Any


REQUIREMENTS: tuple[Requirement, ...] = (
    Requirement(NONFINITE_SKIP, "loop.nonfinite", "skip", "leave the update of a non-finite batch out", "stop"),
)


def value_at(config: Any, key: str) -> Any:
    """The value of a dotted ``key`` in a validated config (None when a section is absent)."""
    value = config
    for part in key.split("."):
        value = getattr(value, part, None)
    return value


def requirements_of(config: Any) -> list[Requirement]:
    """The requirements the values of ``config`` trigger."""
    return [r for r in REQUIREMENTS if value_at(config, r.key) == r.value]


def check_capabilities(config: Any, registry: "Registry | None", source: str = "config",
                       origins: "Mapping[str, str] | None" = None) -> None:
    """Refuse ``config`` when its trainer does not declare a capability one of its values needs.

    Raises :class:`ConfigError` with one line naming where the value came
    from (``origins[key]``, e.g. ``--set loop.nonfinite=skip``, else
    ``source``), the key, the value and the trainer. Does nothing (and
    imports nothing) when no value needs a capability or no trainer is chosen.
    """
    needed = requirements_of(config)
    trainer = getattr(config, "trainer", None)
    if not needed or registry is None or trainer is None:
        return
    component = registry.get("trainer", trainer, key="trainer")
    declared = getattr(component.load(), "capabilities", frozenset())
    for requirement in needed:
        if requirement.capability not in declared:
            where = (origins or {}).get(requirement.key, source)
            raise ConfigError(
                f"{where}: {requirement.key}: trainer '{trainer}' ({component.provided_by}) does not support "
                f"'{requirement.value}' (it does not declare the capability '{requirement.capability}': that it can "
                f"{requirement.needs}); set {requirement.key}: {requirement.instead}, or, as the trainer's author, "
                "build its step on nectargan_core.TrainerKit (see docs/plugins/trainer-api.md)")
