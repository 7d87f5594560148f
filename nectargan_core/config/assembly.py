"""One config model per run: the core's sections, the selected trainer's and plugins' sections, assembled and validated."""

from __future__ import annotations

import functools
from typing import Any, Mapping

from pydantic import Field, ValidationError, ValidationInfo, create_model, model_validator

from ..capabilities import check_capabilities
from ..errors import ConfigError, PluginError
from ..limits import check_data
from ..provenance import validate_recorded
from ..registry import Registry
from .choices import registry_from
from .messages import describe_errors, origin_of
from .sections import CoreConfig, Section
from .strict import is_subclass


# -- building the model ------------------------------------------------------
def build_config_model(registry: Registry | None, trainer: str | None) -> type[CoreConfig]:
    """The config model for a run with ``trainer``: core + trainer + plugin sections."""
    fields: dict[str, Any] = {}
    validators: dict[str, Any] = {}
    owners: dict[str, str] = {name: "nectargan-core" for name in CoreConfig.model_fields}
    if registry is not None:
        for component in registry.all("config_section"):
            _add_section(fields, owners, component.name, component.load(), component.provided_by)
            registry.note(component)  # every run's config holds the section: its owner goes into the provenance
        if trainer is not None:
            component = registry.get("trainer", trainer, key="trainer")
            options = component.options
            if options is not None:
                for name, info in options.model_fields.items():
                    _add_section(fields, owners, name, (info.annotation, info), component.provided_by)
                if callable(getattr(options, "resolve_config", None)):
                    validators["_trainer_resolves"] = model_validator(mode="after")(_resolving(options))
    return create_model("NectarGANConfig", __base__=CoreConfig, __validators__=validators, **fields)


def _no_trainer_for(exc: ValidationError, registry: Registry | None, source: str,
                    origins: Mapping[str, str] | None) -> None:
    """With no trainer chosen, a trainer's sections (data, models, ...) are unknown keys; say what is missing
    (one line) instead of one "unknown key" per section."""
    if registry is None:
        return
    sections = {name for c in registry.all("trainer") if c.options is not None for name in c.options.model_fields}
    unknown = sorted({str(e["loc"][0]) for e in exc.errors() if e["type"] == "extra_forbidden" and len(e["loc"]) == 1
                      and str(e["loc"][0]) in sections})
    if not unknown:
        return
    names = ", ".join(registry.names("trainer"))
    where = origin_of(f"{unknown[0]}: unknown key", source, origins)
    raise ConfigError(f"{where}: {', '.join(unknown)}: no trainer is chosen, and only a trainer's config has "
                      f"{'these sections' if len(unknown) > 1 else 'this section'}; set 'trainer' in the config or "
                      f"use --trainer NAME (installed: {names})")


def _resolving(options: Any) -> Any:
    """A validator that lets the trainer's options fill values one section takes from another.

    ``options.resolve_config(config, registry)`` runs on the validated config and
    may set values derived from other sections (pix2pix writes ``data.in_channels``
    into the generator's options, so the config says what will be built). It
    returns ``{derived key: source key}``, which ``config init`` shows as comments.
    """
    def resolve(config: Any, info: ValidationInfo) -> Any:
        registry = registry_from(info)
        if registry is not None:
            options.resolve_config(config, registry)
        return config

    return resolve


def derived_keys(config: CoreConfig, registry: Registry | None) -> dict[str, str]:
    """``{key: the key it is taken from}`` for values the trainer's ``resolve_config`` sets."""
    if registry is None or config.trainer is None:
        return {}
    options = registry.get("trainer", config.trainer, key="trainer").options
    hook = getattr(options, "resolve_config", None)
    return dict(hook(config, registry) or {}) if callable(hook) else {}


def _add_section(fields: dict[str, Any], owners: dict[str, str], name: str, spec: Any, owner: str) -> None:
    if name in owners:
        raise PluginError(f"config section '{name}' is claimed by both {owners[name]} and {owner}")
    owners[name] = owner
    if isinstance(spec, tuple):
        fields[name] = spec
    else:
        fields[name] = (spec, Field(default_factory=spec, description=(spec.__doc__ or "").strip().split("\n")[0]))


def validate_config(
    data: Mapping[str, Any], registry: Registry | None, *, source: str = "config",
    origins: Mapping[str, str] | None = None,
) -> CoreConfig:
    """Validate raw config data; raise :class:`ConfigError` naming every bad key.

    The result records who provided each part it names (``provenance``); a
    ``provenance`` block in ``data`` is checked against what is installed now
    (see :mod:`nectargan_core.provenance`). ``origins`` names where some keys'
    values came from instead of ``source`` (``--set key=value``).
    """
    return validate_recorded(data, registry, source, functools.partial(_validate_sections, origins=origins))


def _validate_sections(
    data: Mapping[str, Any], registry: Registry | None, *, source: str = "config",
    origins: Mapping[str, str] | None = None,
) -> CoreConfig:
    """Validate raw config data; raise :class:`ConfigError` naming every bad key."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: the top level must be a mapping of sections, got {type(data).__name__}")
    problem = check_data(data)
    if problem is not None:
        raise ConfigError(f"{source}: {problem}")
    trainer = data.get("trainer")
    if trainer is not None and not isinstance(trainer, str):
        raise ConfigError(f"{source}: trainer: must be a trainer name (got {trainer!r})")
    try:
        model = build_config_model(registry, trainer)
    except PluginError as exc:
        raise ConfigError(f"{source}: {exc}") from None
    # Absent sections are validated from {} like present ones, so registry-dependent
    # defaults (a default part's options) are filled in and a saved config reads back the same.
    absent = {name: {} for name, info in model.model_fields.items()
              if name not in data and is_subclass(info.annotation, Section)}
    try:
        config = model.model_validate({**absent, **data}, context={"registry": registry})
    except ValidationError as exc:
        if trainer is None:
            _no_trainer_for(exc, registry, source, origins)
        raise ConfigError("\n".join(f"{origin_of(line, source, origins)}: {line}"
                                     for line in describe_errors(exc, model))) from None
    check_capabilities(config, registry, source, origins)  # e.g. loop.nonfinite: skip needs a trainer that can skip
    return config
