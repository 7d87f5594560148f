"""``--set KEY=VALUE``: keys and values read as a config file would read them, applied to the config's data."""

from __future__ import annotations

import json
import re
from typing import Any, Iterable

import yaml

from ..errors import ConfigError
from ..strict_yaml import load_yaml
from .choices import names_to_dict
from .strict import OverrideText, scalar_kinds


KEY_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_+:\-]*(\.[A-Za-z_][A-Za-z0-9_+:\-]*)*$")


def parse_override_value(raw: str) -> Any:
    """The value of ``--set key=value``.

    Scalars stay strings and are converted by the config model (so ``007`` is a
    valid run name and ``1e-4`` a valid float); ``null``, ``[...]`` and
    ``{...}`` are parsed as YAML; a value in quotes is the string inside them.
    """
    stripped = raw.strip()
    if len(stripped) >= 2 and stripped[0] == stripped[-1] and stripped[0] in "'\"":
        return stripped[1:-1]  # quoted: always a string, e.g. --set 'name="{x}/y"'
    if stripped in {"null", "~", "None"}:
        return None
    if stripped[:1] in "[{":
        try:
            return load_yaml(stripped)
        except yaml.YAMLError as exc:
            problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
            raise ConfigError(f"--set value {raw!r} is not valid YAML: {problem}") from None
    return OverrideText(raw)


def read_override(annotation: Any, text: str) -> Any:
    """The value of a bare ``--set`` text for a key of type ``annotation`` (see :class:`OverrideText`)."""
    kinds, texts = scalar_kinds(annotation)
    if kinds is None or str in kinds or text in texts:
        return str(text)  # plain str: pydantic before 2.6 refuses a str subclass as a Literal choice
    try:
        value = load_yaml(text)
    except yaml.YAMLError:
        value = text
    if isinstance(value, (bool, int, float)):
        return value
    return OverrideText(text) if kinds & {int, float} else str(text)  # the marker words a number's error


def apply_overrides(data: dict[str, Any], overrides: Iterable[str]) -> dict[str, Any]:
    """Apply ``a.b.c=value`` overrides to a nested dict (returns a new dict)."""
    result = json.loads(json.dumps(data, default=str))
    for override in overrides:
        key, sep, raw = override.partition("=")
        key = key.strip()
        if not sep or not KEY_PATTERN.match(key):
            raise ConfigError(f"--set {override!r}: expected key.path=value, e.g. --set loop.epochs=5")
        parts = key.split(".")
        node = result
        for i, part in enumerate(parts[:-1]):
            child = node.get(part)
            if isinstance(child, list) and part in {"visualizers", "callbacks"}:
                child = names_to_dict(child)
                node[part] = child
            if child is None:
                child = node[part] = {}
            if not isinstance(child, dict):
                raise ConfigError(
                    f"--set {override!r}: '{'.'.join(parts[: i + 1])}' is a value, not a section"
                )
            node = child
        node[parts[-1]] = parse_override_value(raw)
    return result
