"""pydantic's validation errors as one line per mistake, with the key path, the value and the keys allowed."""

from __future__ import annotations

import difflib
import re
from typing import Any, Mapping

from pydantic import BaseModel, ValidationError

from ..limits import MAX_INT
from .strict import KEYED_ERROR, is_subclass


#: ``kind 'name': option: problem``: a part's option at fault, as :func:`validate_options` words it.
PART_OPTION = re.compile(r"^[a-z_]+ '([^']+)': ([A-Za-z_][\w.]*): ")


def origin_of(line: str, source: str, origins: Mapping[str, str] | None) -> str:
    """Where the value an error ``line`` (``key.path: problem``) is about came from: the last ``--set``
    (``origins`` is in the order they apply) of that key or of a section above it, else ``source``.

    A part's option (``data: dataset 'paired': cache: ...``) is looked up as
    ``data.cache`` (or ``visualizers.console.bar`` for a mapping of parts) too.
    """
    key, _, rest = line.partition(": ")
    keys = [key]
    part = PART_OPTION.match(rest)
    if part is not None:
        keys += [f"{key}.{part.group(2)}", f"{key}.{part.group(1)}.{part.group(2)}"]
    found = [text for k, text in (origins or {}).items()
             if any(candidate == k or candidate.startswith(f"{k}.") for candidate in keys)]
    return found[-1] if found else source


def describe_errors(exc: ValidationError, model: type[BaseModel], prefix: str = "") -> list[str]:
    """One line per validation error: ``prefix.key.path: problem (got value)``.

    ``prefix`` is the key path of ``model`` inside a larger config (e.g. ``loss``);
    errors of the model as a whole are reported at the prefix itself.
    """
    lines = []
    for error in exc.errors(include_url=False):
        loc = [str(part) for part in error["loc"]]
        message = error["msg"]
        if error["type"] == KEYED_ERROR:
            loc.append(str(error["ctx"]["key"]))
            message = str(error["ctx"]["message"])
        path = ".".join(loc)
        if message.startswith("Value error, "):
            message = message[len("Value error, "):]
        if error["type"] == "extra_forbidden":
            allowed = allowed_keys(model, loc[:-1])
            close = difflib.get_close_matches(loc[-1], allowed, n=1)
            hint = f"did you mean '{close[0]}'? " if close else ""
            message = f"unknown key; {hint}allowed keys: {', '.join(allowed)}"
        elif error["type"] == "missing":
            message = "this key is required"
        elif error["type"] == "model_type":  # "... or instance of PrecisionSection": a class name users never see
            shown = repr(error.get("input"))
            shown = shown if len(shown) <= 60 else shown[:57] + "..."
            message = f"must be a section: a mapping of its keys to values (got {shown})"
        elif error["type"] == "int_parsing_size":
            message = f"too large: config integers fit 64 bits (at most {MAX_INT})"
            shown = repr(error["input"])
            message += f" (got {shown if len(shown) <= 30 else shown[:27] + '...'})"
        elif "input" in error and error["type"] not in {"value_error", "assertion_error", KEYED_ERROR}:
            shown = repr(error["input"])
            message = f"{message} (got {shown if len(shown) <= 60 else shown[:57] + '...'})"
        where = ".".join(part for part in (prefix, path) if part)
        lines.append(f"{where}: {message}" if where else message)
    return lines


def allowed_keys(model: type[BaseModel], loc: list[str]) -> list[str]:
    """The field names of the sub-model at ``loc`` (best effort, for error hints)."""
    current: Any = model
    in_mapping = False  # the next part is a key of a dict[str, Model]
    for part in loc:
        if in_mapping:
            in_mapping = False
            continue
        fields = getattr(current, "model_fields", None)
        if not fields or part not in fields:
            return []
        current = fields[part].annotation
        if getattr(current, "__origin__", None) is dict:
            current = current.__args__[1]
            in_mapping = True
        for arg in getattr(current, "__args__", ()) or ():  # Optional[Model]
            if is_subclass(arg, BaseModel):
                current = arg
    fields = getattr(current, "model_fields", None) or {}
    return sorted(fields)
