"""Config files and ``--set`` overrides: reading YAML/TOML/JSON safely, applying overrides, loading a validated config."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterable, Mapping

import yaml
from pydantic import BaseModel

from ..errors import ConfigError
from ..filekind import NotRegularFile, open_regular
from ..limits import MAX_CONFIG_BYTES, check_data
from ..registry import Registry
from ..strict_yaml import dump_yaml_text, load_yaml
from ..text import printable
from .assembly import validate_config
from .overrides import apply_overrides
from .sections import CoreConfig


CONFIG_SUFFIXES = (".yaml", ".yml", ".toml", ".json")


# -- files and overrides -----------------------------------------------------
def load_file(path: str | Path) -> dict[str, Any]:
    """Read a YAML, TOML or JSON config file into a dict; errors name the file and line.

    YAML is read strictly (:mod:`nectargan_core.strict_yaml`); in every format a
    key given twice is an error, and the file's size, nesting and number of
    values, and the characters of its text, are bounded (:mod:`nectargan_core.limits`).
    """
    data = parse_file(path)
    problem = check_data(data)
    if problem is not None:
        raise ConfigError(f"{printable(path)}: {problem}")
    return data


def parse_file(path: str | Path) -> dict[str, Any]:
    """:func:`load_file` without the checks of the text inside (for reading what is on disk, e.g. ``nectargan runs``)."""
    path = Path(path)
    shown = printable(path)  # messages are one line each, whatever the file name holds
    if path.suffix.lower() not in CONFIG_SUFFIXES:
        raise ConfigError(f"{shown}: unsupported config format '{printable(path.suffix)}'; use .yaml, .yml, .toml or .json")
    try:
        with os.fdopen(open_regular(path), "rb") as stream:
            raw = stream.read(MAX_CONFIG_BYTES + 1)
    except FileNotFoundError:
        raise ConfigError(f"{shown}: config file not found") from None
    except NotRegularFile as exc:
        raise ConfigError(f"{shown}: not a config file but {exc.strerror}; give the path of a "
                          ".yaml, .toml or .json file") from None
    except OSError as exc:
        raise ConfigError(f"{shown}: cannot read config file: {exc.strerror or exc}") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{shown}: config file larger than {MAX_CONFIG_BYTES >> 20} MiB; a config is a few "
                          "kilobytes of settings (is this the right file?)")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{shown}: cannot read config file: not UTF-8 text (byte {exc.start})") from None
    suffix = path.suffix.lower()
    try:
        if suffix == ".json":
            data = json.loads(text, object_pairs_hook=_unique_keys) if text.strip() else {}
        elif suffix == ".toml":
            try:
                import tomllib
            except ModuleNotFoundError:  # Python 3.10: the same parser, from PyPI
                import tomli as tomllib

            data = tomllib.loads(text)
        else:
            data = load_yaml(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{shown}:{exc.lineno}: invalid JSON: {exc.msg}") from None
    except DuplicateKeyError as exc:
        raise ConfigError(f"{shown}: invalid JSON: {exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{shown}:{mark.line + 1}" if mark is not None else shown
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{where}: invalid YAML: {problem}") from None
    except RecursionError:  # the JSON and TOML parsers recurse once per level
        raise ConfigError(f"{shown}: nested deeper than the parser can follow; a config nests a few levels") from None
    except ValueError as exc:  # tomllib.TOMLDecodeError; an integer of more than 4300 digits in any format
        kind = {".json": "JSON", ".toml": "TOML"}.get(suffix, "YAML")
        problem = "a number has more than 4300 digits" if "4300 digits" in str(exc) else str(exc)[:200]
        raise ConfigError(f"{shown}: invalid {kind}: {problem}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{shown}: the top level must be a mapping of sections, got {type(data).__name__}")
    return data


class DuplicateKeyError(ValueError):
    """A JSON object gives one key twice (json.loads would keep the last silently)."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise DuplicateKeyError(f"duplicate key '{key}' in one object; keep one of them")
        result[key] = value
    return result


def load_config(
    source: str | Path | Mapping[str, Any] | None = None,
    overrides: Iterable[str] = (),
    registry: Registry | None = None,
    *,
    label: str | None = None,
) -> CoreConfig:
    """Load, override and validate a config from a file path, a dict, or nothing (defaults).

    Errors name ``label`` (the file a dict was read from), else the file, ``config`` or ``defaults``, for the
    values that did not come from a ``--set``.
    """
    if isinstance(source, BaseModel):
        data, named = source.model_dump(mode="json"), "config"
    elif isinstance(source, Mapping):
        data, named = dict(source), "config"
    elif source is None:
        data, named = {}, "defaults"
    else:
        data, named = load_file(source), printable(source)
    if label is not None:
        named = printable(label)
    problem = check_data(data)
    if problem is not None:  # before the overrides copy it: nothing deep or huge is walked twice
        raise ConfigError(f"{named}: {problem}")
    overrides = list(overrides)
    given = data
    data = apply_overrides(data, overrides)
    origins: dict[str, str] = {}
    made: set[str] = set()  # sections an earlier --set made: they stay that one's
    for override in overrides:  # in the order they apply: a key set again moves to the end
        key = override.partition("=")[0].strip()
        sections = made_by(given, key, made)
        made.update(sections)
        for path in (*sections, key):
            origins.pop(path, None)
            origins[path] = f"--set {override.strip()}"
    return validate_config(data, registry, source=named, origins=origins)


def made_by(data: Mapping[str, Any], key: str, made: Iterable[str] = ()) -> list[str]:
    """The sections above ``key`` (a dotted ``--set`` key) that setting it makes or replaces: those that are
    neither a mapping in ``data`` nor in ``made`` (made by an earlier ``--set``). An error about one of them (an
    unknown section ``no`` from ``--set no.such.key=1``) is the ``--set``'s, not the file's."""
    parts, made = key.split("."), set(made)
    node: Any = data
    for depth in range(1, len(parts)):
        path = ".".join(parts[:depth])
        node = node.get(parts[depth - 1]) if isinstance(node, Mapping) else None
        if path not in made and not isinstance(node, Mapping):
            return [".".join(parts[:d]) for d in range(depth, len(parts))]
    return []


def dump_yaml(data: Mapping[str, Any]) -> str:
    """YAML text of ``data`` that :func:`load_file` reads back unchanged (e.g. a run's config.yaml)."""
    return dump_yaml_text(dict(data), sort_keys=False, default_flow_style=False)
