"""No silent coercion: pydantic's lax mode would read ``epochs: '3'`` or ``lr: true`` as numbers; these checks refuse them
with a message that names the key, and bound every integer to 64 bits."""

from __future__ import annotations

import json
import math
import types
import typing
from typing import Any, Iterator, Literal, Optional, Union

from pydantic import BaseModel
from pydantic_core import PydanticCustomError, PydanticUndefined

from ..limits import MAX_INT, MIN_INT
from ..strict_yaml import StrictDumper
from ..text import printable


def is_subclass(annotation: Any, base: type | tuple[type, ...]) -> bool:
    """Whether ``annotation`` is a class deriving from ``base``; ``list[str]`` is none (Python 3.10 says
    ``isinstance(list[str], type)`` and then ``issubclass`` raises)."""
    return isinstance(annotation, type) and not isinstance(annotation, types.GenericAlias) \
        and issubclass(annotation, base)


# -- no silent coercion ------------------------------------------------------
def refuse_coercion(field: Any, value: Any) -> Any:
    """``value`` for ``field`` unless pydantic would coerce it into something else silently.

    Refused: a boolean where the field wants a number (pydantic reads ``true``
    as 1, also inside lists and tuples and against ``Literal[1, 3, 4]``), and
    null where the field does not take null (the message names the default,
    which is what leaving the key out gives).
    """
    annotation = field.annotation
    if value is None and not _accepts_none(annotation):
        raise ValueError(f"must not be null; {_null_hint(field)}")
    where = _boolean_as_number(annotation, value)
    if where is not None:
        raise ValueError(f"{where}a boolean where a number is expected (got {json.dumps(_first_bool(value))}); "
                         "write the number")
    problem = _wrong_scalar(annotation, value)
    if problem is not None:
        raise ValueError(problem)
    return value


def scalar_kinds(annotation: Any) -> tuple[Optional[set[type]], set[str]]:
    """The Python types of the scalar values ``annotation`` means (None when it means more than scalars:
    Any, models, paths, collections..., which pydantic's own checks decide), and its literal texts."""
    kinds: set[type] = set()
    texts: set[str] = set()
    for arm in _arms(annotation):
        if typing.get_origin(arm) is Literal:
            for choice in typing.get_args(arm):
                texts.add(choice) if isinstance(choice, str) else kinds.add(type(choice))
        elif arm is float:
            kinds.update((float, int))  # an integer is an exact float
        elif arm in (bool, int, str, type(None)):
            kinds.add(arm)
        else:
            return None, texts
    return kinds, texts


def _wrong_scalar(annotation: Any, value: Any) -> Optional[str]:
    """Why ``value`` is not a value of ``annotation`` although pydantic would convert it, or None.

    pydantic's lax mode reads ``"off"``, ``"yes"``, ``1`` and ``"1"`` as booleans
    and ``"2"`` and ``2.0`` as the integer 2. A YAML 1.2 file means what it says:
    ``off`` is text, ``2.0`` is a float. Lists and tuples are checked item by item.
    """
    if isinstance(value, (list, tuple)):
        for types_ in _item_types(annotation, len(value)):
            for index, (item_type, item) in enumerate(zip(types_, value)):
                problem = _wrong_scalar(item_type, item)
                if problem is not None:
                    return f"item {index + 1}: {problem}"
        return None
    if not isinstance(value, (bool, int, float, str)):
        return None
    kinds, texts = scalar_kinds(annotation)
    if kinds is None or type(value) in kinds or not kinds - {type(None)} or (isinstance(value, str) and value in texts):
        return None
    shown = json.dumps(value) if not isinstance(value, float) or math.isfinite(value) else str(value)
    if kinds <= {bool, type(None)}:
        return f"must be true or false (got {shown}); YAML booleans are only true and false, unquoted"
    if int in kinds and float not in kinds and isinstance(value, (float, str)):
        return f"must be an integer (got {shown}); write a whole number without quotes or decimal point"
    if float in kinds and isinstance(value, str):
        if isinstance(value, OverrideText):  # a bare --set value: nobody wrote quotes
            if value.strip().lower().lstrip("+-.") in {"inf", "infinity", "nan"}:
                return f"must be a finite number (got {shown})"
            return f"must be a number (got {shown})"
        return f"must be a number (got {shown}); write it without quotes"
    return None


#: pydantic error type of the checks above; ``describe_errors`` puts ctx["key"] into the error's key path.
KEYED_ERROR = "nectargan_key_error"


def at_key(key: str, check: Any, *args: Any) -> None:
    """Run ``check``; report its ValueError at ``key`` (a model validator's error has the model's path)."""
    try:
        check(*args)
    except ValueError as exc:
        raise PydanticCustomError(KEYED_ERROR, "{key}: {message}", {"key": key, "message": str(exc)}) from None


def _null_hint(field: Any) -> str:
    """What to write instead of null: remove the key for its default (shown), or an empty collection."""
    if field.default_factory is None and field.default is PydanticUndefined:
        return "this key needs a value"
    try:
        default = field.get_default(call_default_factory=True)
    except TypeError:  # a factory that needs the other values
        return "remove the key to use its default"
    if isinstance(default, BaseModel):
        return "remove the key to use its defaults"
    hint = f"remove the key to use the default ({json.dumps(default, default=str)})"
    if isinstance(default, (list, dict)) and default:
        hint += ", or write [] for none"
    return hint


def within_int64(value: Any) -> Any:
    """``value`` if every integer in it fits a signed 64-bit integer (torch, NumPy and JSON readers need it)."""
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        where, item = stack.pop()
        if isinstance(item, int) and not isinstance(item, bool) and not MIN_INT <= item <= MAX_INT:
            shown = str(item) if item.bit_length() <= 96 else f"a number of about {int(item.bit_length() * 0.30103)} digits"
            raise ValueError(f"{where}{shown} does not fit a 64-bit integer (at most {MAX_INT})")
        if isinstance(item, (list, tuple)):
            stack.extend((f"{where}item {i + 1}: ", child) for i, child in enumerate(item))
        elif isinstance(item, dict):
            stack.extend((f"{where}{printable(key)}: ", child) for key, child in item.items())
    return value


def _strip(annotation: Any) -> Any:
    while typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    return annotation


def _arms(annotation: Any) -> tuple[Any, ...]:
    annotation = _strip(annotation)
    if typing.get_origin(annotation) in (Union, types.UnionType):
        return tuple(_strip(arm) for arm in typing.get_args(annotation))
    return (annotation,)


def _item_types(annotation: Any, length: int) -> Iterator[list[Any]]:
    """For each list, set or tuple arm of ``annotation``, the annotations of a ``length``-item value's items."""
    for arm in _arms(annotation):
        origin, args = typing.get_origin(arm), typing.get_args(arm)
        if origin in (list, set, frozenset) and args:
            yield [args[0]] * length
        elif origin is tuple and args:
            yield [args[0]] * length if (len(args) == 2 and args[1] is Ellipsis) else list(args)


def _accepts_none(annotation: Any) -> bool:
    return any(arm in (Any, object, type(None), None) for arm in _arms(annotation))


def _takes_bool(annotation: Any) -> bool:
    """Whether a boolean is a meant value of ``annotation`` (bool, Any, a Literal with True/False, ...)."""
    for arm in _arms(annotation):
        if arm in (bool, Any, object):
            return True
        if typing.get_origin(arm) is Literal and any(isinstance(v, bool) for v in typing.get_args(arm)):
            return True
    return False


def _numeric(annotation: Any) -> bool:
    """Whether some arm of ``annotation`` is a number pydantic would read a boolean as (int, float, Literal[1, 3])."""
    for arm in _arms(annotation):
        if is_subclass(arm, (int, float)) and arm is not bool:
            return True
        if typing.get_origin(arm) is Literal and any(
                isinstance(v, (int, float)) and not isinstance(v, bool) for v in typing.get_args(arm)):
            return True
    return False


def _boolean_as_number(annotation: Any, value: Any) -> Optional[str]:
    """``""`` (or ``"item N: "``) where ``value`` holds a boolean that ``annotation`` would read as a number."""
    if isinstance(value, bool):
        return "" if _numeric(annotation) and not _takes_bool(annotation) else None
    if not isinstance(value, (list, tuple)):
        return None
    for item_types in _item_types(annotation, len(value)):
        for index, (item_type, item) in enumerate(zip(item_types, value)):
            if _boolean_as_number(item_type, item) is not None:
                return f"item {index + 1}: "
    return None


def _first_bool(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return next((item for item in value if isinstance(item, bool)), value)
    return value


class OverrideText(str):
    """A bare ``--set`` value: text for a text key, else read as a YAML 1.2 scalar once the key's type is known.

    So ``--set run.name=007`` stays the text ``007`` while ``--set loop.epochs=5`` is
    the integer 5, and ``--set run.deterministic=off`` is the text ``off`` (refused,
    as in a file) rather than pydantic's lax False.
    """


# A bare --set value kept as given (a key of free-form options) is written out as the text it is.
StrictDumper.add_representer(OverrideText, StrictDumper.represent_str)
