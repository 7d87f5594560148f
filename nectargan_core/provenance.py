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

import hashlib
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Optional

from pydantic import BaseModel, ConfigDict, ValidationError, model_serializer

from .errors import ConfigError
from .jsonfiles import read_json
from .registry import Component, Recording, Registry, Use, normalize

if TYPE_CHECKING:  # pragma: no cover
    from .config import CoreConfig

KEY = "provenance"
#: The kind of the parts that are config sections (recorded because every run's config.yaml holds them).
SECTION = "config_section"
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
    #: Config sections only: a digest of the section's default values, so that a run can go on without
    #: the section's plugin when the section holds nothing but those defaults.
    defaults: Optional[str] = None

    @model_serializer(mode="wrap")
    def _without_empty_defaults(self, handler: Any) -> dict[str, Any]:
        data = handler(self)
        if data.get("defaults") is None:
            data.pop("defaults", None)  # only config sections have one
        return data

    @classmethod
    def of(cls, component: Component) -> "PartRecord":
        return cls(kind=component.kind, name=component.name, plugin=component.provider,
                   distribution=normalize(component.distribution) if component.distribution else None,
                   version=component.version,
                   defaults=section_defaults_digest(component) if component.kind == SECTION else None)

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


def digest(values: Any) -> str:
    """A short digest of JSON-ready ``values`` (key order does not matter)."""
    text = json.dumps(values, sort_keys=True, separators=(",", ":"), default=str)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()[:16]


def section_defaults_digest(component: Component) -> Optional[str]:
    """The digest of a config section's default values; None if the section has no defaults."""
    try:
        return digest(component.load()().model_dump(mode="json"))
    except Exception:  # a section model that needs values, or cannot load: nothing to compare with later
        return None


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
        same = [r for r in earlier if same_owner(r, component)]
        if same:
            old = same[0]
            if old.version and now.version and old.version != now.version and old.owner == now.owner:
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
        data = read_json(sidecar_path(Path(path)))
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
    sources = [("this config", recorded), (f"checkpoint {init_from}", weights or [])]
    section_refusals = orphan_sections(data, recorded, registry, source)
    with registry.recording(pins, hints, substitute_refusal(sources)) as recording:
        try:
            config = validate(data, registry, source=source)
        except ConfigError as exc:
            if section_refusals:
                raise ConfigError("\n".join([*section_refusals, str(exc)])) from None
            raise
    if section_refusals:
        raise ConfigError("\n".join(section_refusals))
    config.provenance = records_of(recording)
    report(*compare(recorded, recording, "this config"), source)
    if weights:
        report(*compare(weights, recording, f"checkpoint {init_from}"), source)
    return config


def same_owner(record: PartRecord, component: Component) -> bool:
    """Whether ``component`` is the part ``record`` names: the same owner, or one it declares it took over from.

    A part that moved to another distribution is registered with
    ``formerly=["old-distribution", ...]``, so runs recorded with the old
    owner resume, test and export with the new one.
    """
    now = PartRecord.of(component)
    formerly = {normalize(str(name)) for name in component.meta.get("formerly", ())}
    return record.owner == now.owner or record.owner in formerly


def substitute_refusal(sources: list[tuple[str, list[PartRecord]]]) -> Callable[[Use], Optional[str]]:
    """For :meth:`Registry.recording`: the refusal of a bare name that now resolves to another distribution.

    Raised where the name is looked up, so the key path is named and the
    substitute's options are never checked against the recorded ones.
    """
    def refuse(use: Use) -> Optional[str]:
        if use.qualified:
            return None  # the config names this provider on purpose
        now = PartRecord.of(use.component)
        for what, records in sources:
            earlier = [r for r in records if (r.kind, r.name) == (now.kind, now.name)]
            if earlier and not any(same_owner(r, use.component) for r in earlier):
                old = earlier[0]
                other = ("" if now.kind == SECTION else
                         f", or write '{now.owner}:{now.name}' to use the other one on purpose")
                label = "config section" if now.kind == SECTION else now.kind
                return (f"{label} '{now.name}': {what} used {old.source}, but now {now.source} provides it; "
                        f"{old.install} to get it back{other}")
        return None

    return refuse


def orphan_sections(data: dict[str, Any], recorded: list[PartRecord], registry: Registry,
                    source: str) -> list[str]:
    """Handle the sections of ``data`` whose recorded plugin provides no config section any more.

    A section that holds exactly its plugin's defaults (the plugin was installed
    but the run did not configure it) is removed from ``data`` with a warning,
    so the run goes on. Any other is removed too, and a refusal line naming the
    distribution and version to install is returned for it.
    """
    refusals = []
    for record in recorded:
        if record.kind != SECTION or record.name not in data or registry.has(SECTION, record.name):
            continue
        values = data.pop(record.name)
        if record.defaults is not None and digest(values) == record.defaults:
            print(f"warning: {source}: {record.name}: the config section of {record.source} is left out: that "
                  f"plugin is not loaded now and the section holds only its defaults ({record.install} to keep it)",
                  file=sys.stderr, flush=True)
            continue
        refusals.append(f"{source}: {record.name}: this config section comes from {record.source}, which is not "
                        f"loaded now, and holds settings other than its defaults; {record.install} to use it")
    return refusals


def pins_for(config: "CoreConfig") -> dict[tuple[str, str], str]:
    """How the bare names of a validated config resolve: for :meth:`Registry.pinned`."""
    return pins_of(config.provenance)
