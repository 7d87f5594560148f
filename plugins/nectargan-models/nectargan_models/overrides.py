"""A model's options from ``option=value`` overrides (``nectargan models ... --set``), validated.

Its own module, free of torch, because both the ``models`` commands (loaded
with the plugin) and reference import (which needs torch) use it.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from nectargan_core import Component, ConfigError, describe_errors, parse_override_value


def resolve_options(component: Component, overrides: tuple[str, ...] | list[str]) -> dict[str, Any]:
    """The model's options with ``option=value`` overrides applied, validated; ConfigError if not."""
    raw: dict[str, Any] = {}
    for override in overrides:
        key, sep, value = override.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"--set {override!r}: expected option=value, e.g. --set norm=instance")
        raw[key] = parse_override_value(value)
    model = component.options
    if model is None:
        if raw:
            raise ConfigError(f"model '{component.name}' takes no options (got {', '.join(raw)})")
        return {}
    try:
        return model.model_validate(raw).model_dump(mode="json")
    except ValidationError as exc:
        raise ConfigError(f"model '{component.name}': " + "; ".join(describe_errors(exc, model))) from None
