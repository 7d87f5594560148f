"""Provenance: which distribution, at which version, provided each part a run uses.

Configs and checkpoints name parts (``tp_tv``, ``cyclegan``); names alone
cannot tell a part from a substitute that another plugin registered under the
same name. So every resolved config records, under ``provenance``, one entry
per part that validating it looked up (trainer, models, losses, loss specs,
schedules, datasets, visualizers, callbacks, and names in plugin sections)::

    provenance:
    - {kind: loss, name: tp_tv, plugin: tp, distribution: nectargan-tp, version: 1.0.0}

A run's ``config.yaml`` and every checkpoint (in its config and in its
``.json`` record) carry it. When a config that has a ``provenance`` block is
validated again (every resume does), and when ``run.init_from`` names a
checkpoint whose record has one:

* a part that another distribution provides now is refused, in one line naming
  both and what to do (unless the config names it qualified, on purpose);
* a part whose distribution is installed at another version gets one warning line;
* a part that nothing provides any more fails as an unknown name, saying which
  distribution and version to install;
* a bare name that several plugins provide now means the one recorded.

A config or checkpoint without provenance (written before it existed) is not checked.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Optional

from pydantic import BaseModel, ConfigDict, ValidationError

from .errors import ConfigError
from .registry import Component, Recording, Registry, normalize

if TYPE_CHECKING:  # pragma: no cover
    from .config import CoreConfig

KEY = "provenance"
#: The order of kinds in a provenance block: what a run is made of, then what watches it.
ORDER = ("trainer", "model", "dataset", "loss_spec", "loss", "schedule", "visualizer", "callback", "config_section")


class PartRecord(BaseModel):
    """Who provided one part of a run."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: str
    name: str
    plugin: str
    distribution: Optional[str] = None
    version: Optional[str] = None

    @classmethod
    def of(cls, component: Component) -> "PartRecord":
        return cls(kind=component.kind, name=component.name, plugin=component.provider,
                   distribution=normalize(component.distribution) if component.distribution else None,
                   version=component.version)

    @property
    def owner(self) -> str:
        """The normalized distribution, or the plugin name when no distribution installed it."""
        return normalize(self.distribution) if self.distribution else self.plugin

    @property
    def source(self) -> str:
        if not self.distribution:
            return f"plugin '{self.plugin}'"
        return f"{self.distribution}{' ' + self.version if self.version else ''} (plugin '{self.plugin}')"

    @property
    def install(self) -> str:
        """The pip command that brings this part back."""
        if not self.distribution:
            return f"plugin '{self.plugin}' came from no installed distribution"
        pinned = f"{self.distribution}=={self.version}" if self.version else self.distribution
        return f"pip install '{pinned}'"


def records_of(recording: Recording) -> list[PartRecord]:
    """One record per distinct part looked up, by kind (trainer first), then by name."""
    records = {PartRecord.of(use.component) for use in recording.uses}
    order = {kind: index for index, kind in enumerate(ORDER)}
    return sorted(records, key=lambda r: (order.get(r.kind, len(order)), r.name, r.owner))


def parse_records(raw: Any, source: str) -> list[PartRecord]:
    """The records of a ``provenance`` block (None or absent: none)."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise ConfigError(f"{source}: {KEY}: must be a list of part records (written by nectargan; "
                          f"remove the key to record it afresh)")
    records = []
    for index, item in enumerate(raw):
        try:
            records.append(PartRecord.model_validate(item))
        except ValidationError as exc:
            first = exc.errors(include_url=False)[0]
            where = ".".join(str(p) for p in (index, *first["loc"]))
            raise ConfigError(f"{source}: {KEY}: {where}: {first['msg']} (written by nectargan; remove the key "
                              "to record it afresh)") from None
    return records


def pins_of(records: Iterable[PartRecord]) -> dict[tuple[str, str], str]:
    """(kind, name) -> owner, for names that one owner provided (what a bare name meant)."""
    owners: dict[tuple[str, str], set[str]] = {}
    for record in records:
        owners.setdefault((record.kind, record.name), set()).add(record.owner)
    return {key: next(iter(found)) for key, found in owners.items() if len(found) == 1}


def hints_of(records: Iterable[PartRecord], what: str) -> dict[tuple[str, str], str]:
    """(kind, name) -> what to install, for "unknown name" errors."""
    return {(r.kind, r.name): f"{what} used it from {r.source}: {r.install}" for r in records}


def compare(recorded: list[PartRecord], recording: Recording, what: str) -> tuple[list[str], list[str]]:
    """(refusals, warnings) for the parts ``recording`` resolved, against what ``recorded`` says.

    ``what`` names the recorder in the messages ("this config", "checkpoint X").
    """
    before: dict[tuple[str, str], list[PartRecord]] = {}
    for record in recorded:
        before.setdefault((record.kind, record.name), []).append(record)
    refusals: list[str] = []
    warnings: list[str] = []
    seen: set[tuple[str, str, str]] = set()
    for use in recording.uses:
        component = use.component
        now = PartRecord.of(component)
        key = (now.kind, now.name, now.owner)
        if key in seen or (now.kind, now.name) not in before:
            continue
        seen.add(key)
        earlier = before[(now.kind, now.name)]
        same = [r for r in earlier if r.owner == now.owner]
        if same:
            old = same[0]
            if old.version and now.version and old.version != now.version:
                warnings.append(
                    f"{now.kind} '{now.name}': {what} used {old.source}, now {now.version} is installed; "
                    f"results may differ ({old.install} to reproduce them exactly)")
            continue
        if use.qualified:
            continue  # the config names this provider on purpose
        old = earlier[0]
        refusals.append(
            f"{now.kind} '{now.name}': {what} used {old.source}, but now {now.source} provides it; "
            f"{old.install} to get it back, or write '{now.owner}:{now.name}' to use the other one on purpose")
    return refusals, warnings


def report(refusals: list[str], warnings: list[str], source: str) -> None:
    """Print one line per warning; raise one ConfigError line per refusal."""
    for line in warnings:
        print(f"warning: {source}: {line}", file=sys.stderr, flush=True)
    if refusals:
        raise ConfigError("\n".join(f"{source}: {line}" for line in refusals))


def checkpoint_records(path: str | Path) -> list[PartRecord] | None:
    """The provenance in a checkpoint's ``.json`` record, or None (no record, or one written before provenance)."""
    from .checkpoint import sidecar_path

    try:
        data = json.loads(sidecar_path(Path(path)).read_text())
    except (OSError, ValueError):
        return None
    raw = data.get(KEY) if isinstance(data, dict) else None
    if not isinstance(raw, list):
        return None
    try:
        return [PartRecord.model_validate(item) for item in raw]
    except ValidationError:
        return None


def validate_recorded(
    data: Mapping[str, Any],
    registry: Registry | None,
    source: str,
    validate: Callable[..., "CoreConfig"],
) -> "CoreConfig":
    """Validate ``data`` with ``validate`` while recording the provenance of every part it names.

    The ``provenance`` block of ``data`` (and of the checkpoint ``run.init_from``
    names) pins ambiguous names, explains missing ones and is compared with
    what resolved now (see the module docstring).
    """
    if registry is None or not isinstance(data, Mapping):
        return validate(data, registry, source=source)
    data = dict(data)
    recorded = parse_records(data.pop(KEY, None), source)
    run = data.get("run")
    init_from = run.get("init_from") if isinstance(run, Mapping) else None
    weights = checkpoint_records(init_from) if isinstance(init_from, str) and init_from else None
    pins = {**pins_of(weights or []), **pins_of(recorded)}
    hints = {**hints_of(weights or [], f"checkpoint {init_from}"), **hints_of(recorded, "this config")}
    with registry.recording(pins, hints) as recording:
        config = validate(data, registry, source=source)
    config.provenance = records_of(recording)
    report(*compare(recorded, recording, "this config"), source)
    if weights:
        report(*compare(weights, recording, f"checkpoint {init_from}"), source)
    return config


def pins_for(config: "CoreConfig") -> dict[tuple[str, str], str]:
    """How the bare names of a validated config resolve: for :meth:`Registry.pinned`."""
    return pins_of(config.provenance)
