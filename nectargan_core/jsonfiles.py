"""Reading back the JSON files runs and commands write: bounded in size and depth, and of a checked shape.

``status.json``, ``summary.json``, checkpoint sidecars, lock and launch
records, the results of ``nectargan test``: any of them may have been cut
short, replaced by another tool or crafted. ``json.loads`` on such a file can
read a device or FIFO forever, take all memory, or raise RecursionError (not a
ValueError) on deep nesting. Every read here refuses, with a
:class:`JSONFileError` (a ValueError naming the file and why), anything that
is not a regular file of at most ``max_bytes`` bytes of UTF-8 JSON nested at
most ``max_depth`` deep; :func:`read_json_object` also wants an object.
"""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path
from typing import Any

from .filekind import NotRegularFile, open_regular

#: The largest run file read back (status and sidecars are under a kilobyte; a summary a few).
MAX_BYTES = 64 * 1024 * 1024
#: The deepest nesting read back (what the project writes is at most 4 deep).
MAX_DEPTH = 100

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
_BRACKET = re.compile(r"[\[\]{}]")


class JSONFileError(ValueError):
    """A JSON file that cannot be read back as it should be: ``str()`` is ``"<path>: <why>"``."""


def nesting_depth(text: str, limit: int = MAX_DEPTH) -> int:
    """How deep ``text``'s arrays and objects nest (strings skipped); stops counting once past ``limit``."""
    depth = deepest = 0
    for match in _BRACKET.finditer(_STRING.sub("", text)):
        depth += 1 if match.group() in "[{" else -1
        if depth > deepest:
            deepest = depth
            if deepest > limit:
                break
    return deepest


def read_json(path: str | Path, *, max_bytes: int = MAX_BYTES, max_depth: int = MAX_DEPTH) -> Any:
    """The JSON value in ``path``; :class:`JSONFileError` when it is not a regular file, is larger than
    ``max_bytes``, is not UTF-8, nests deeper than ``max_depth`` or is not JSON. OSError when it cannot be read."""
    path = Path(path)
    try:  # one open that never waits on a FIFO: no window between a check and the read
        handle = os.fdopen(open_regular(path), "rb")
    except NotRegularFile:  # FileNotFoundError and PermissionError stay OSErrors
        raise JSONFileError(f"{path}: is not a regular file") from None
    with handle:
        size = os.fstat(handle.fileno()).st_size
        if size > max_bytes:
            raise JSONFileError(f"{path}: is larger than {max_bytes} bytes, more than such a file holds")
        raw = handle.read(size + 1)  # what is there (+1 to see growth): read(n) reserves n bytes up front
    if len(raw) > max_bytes:
        raise JSONFileError(f"{path}: is larger than {max_bytes} bytes, more than such a file holds")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise JSONFileError(f"{path}: is not UTF-8 text") from None
    if nesting_depth(text, max_depth) > max_depth:
        raise JSONFileError(f"{path}: is nested more than {max_depth} deep, which nothing here writes")
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        raise JSONFileError(f"{path}: is not valid JSON (cut short, or not written by NectarGAN)") from None


def read_json_object(path: str | Path, **limits: int) -> dict[str, Any]:
    """:func:`read_json` of a file that must hold an object (what every run file holds)."""
    data = read_json(path, **limits)
    if not isinstance(data, dict):
        raise JSONFileError(f"{path}: holds {json_kind(data)}, not a JSON object")
    return data


def value_fits(value: Any, kinds: type | tuple[type, ...], low: float | None = None,
               high: float | None = None) -> bool:
    """Whether a value read back is of ``kinds`` as written (a boolean is no number), finite, and when bounds are
    given at least ``low`` and below ``high``: the one field check of status files and metrics records."""
    if isinstance(value, bool) or not isinstance(value, kinds):
        return False
    if isinstance(value, float) and not math.isfinite(value):
        return False
    return low is None or high is None or not isinstance(value, (int, float)) or low <= value < high


def json_kind(value: Any) -> str:
    """What a JSON value is, in JSON's words: ``an array``, ``a string``, ``a number``, ``null``, ..."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return {dict: "an object", list: "an array", str: "a string", int: "a number", float: "a number",
            type(None): "null"}.get(type(value), f"a {type(value).__name__}")
