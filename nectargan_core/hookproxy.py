"""What a plugin manager registers in place of a part: its hook implementations and nothing else.

pluggy finds hook implementations by walking ``dir(plugin)``. Up to 1.6 it
reads each name with ``getattr``, which runs properties and ``__getattr__``:
a trainer whose ``val_set`` property needs ``setup()`` failed to register at
all. From 1.7 it reads them with ``inspect.getattr_static``. Registering a
:class:`HookProxy` instead makes every pluggy release find the same hooks
without running any of the part's code: the proxy's own attributes are the
hook implementations, found statically here and bound the way Python binds them.

The proxy is also where a visualizer or callback is guarded (see
:mod:`nectargan_core.guard`); :func:`part_of` gives back the part itself.
"""

from __future__ import annotations

import functools
import inspect
import types
from typing import Any, Callable, Iterator

from . import hookspecs

MARKER = hookspecs.PROJECT_NAME + "_impl"
_ABSENT = object()


def _names(obj: Any) -> Iterator[str]:
    """The attribute names of ``obj`` as ``dir`` would list them, read without calling its ``__dir__``."""
    seen: set[str] = set()
    owners: list[Any] = [_instance_dict(obj)]
    klass = obj if isinstance(obj, type) else type(obj)
    owners.extend(vars(base) for base in type.__getattribute__(klass, "__mro__"))
    for namespace in owners:
        for name in list(namespace):
            if isinstance(name, str) and name not in seen:
                seen.add(name)
                yield name


def _instance_dict(obj: Any) -> dict[str, Any]:
    try:
        namespace = object.__getattribute__(obj, "__dict__")
    except AttributeError:  # __slots__ only
        return {}
    return namespace if isinstance(namespace, dict) else {}


def _static_attr(obj: Any, name: str) -> tuple[Any, Callable[..., Any]] | None:
    """``(marker holder, callable bound as getattr would bind it)`` for a hookable attribute, else None.

    The same rules as pluggy 1.7's discovery: plain functions, static and class
    methods and bound methods are hookable; properties and other descriptors are
    skipped, not run; values stored on an instance are not bound.
    """
    if not isinstance(obj, (type, types.ModuleType)):
        value = _instance_dict(obj).get(name, _ABSENT)
        if value is _ABSENT:
            slot = inspect.getattr_static(obj, name, None)
            if isinstance(slot, types.MemberDescriptorType):  # reading a slot runs no user code
                try:
                    value = slot.__get__(obj, type(obj))
                except AttributeError:
                    value = _ABSENT
        if value is not _ABSENT:
            if isinstance(value, types.MethodType):
                return value.__func__, value
            if inspect.isfunction(value):
                return value, value
            return None
    static = inspect.getattr_static(obj, name, None)
    if isinstance(static, staticmethod):
        return static, static.__func__
    if isinstance(static, classmethod):
        owner = obj if isinstance(obj, type) else type(obj)
        return static, static.__get__(owner, owner)
    if isinstance(static, types.MethodType):
        return static.__func__, static
    if inspect.isfunction(static):
        if isinstance(obj, (type, types.ModuleType)):
            return static, static
        return static, static.__get__(obj, type(obj))
    return None


def _options(holder: Any) -> dict[str, Any] | None:
    """The hookimpl options on ``holder`` or, for a static or class method, on its function."""
    for candidate in (holder, getattr(holder, "__func__", None)):
        options = getattr(candidate, MARKER, None) if candidate is not None else None
        if options is not None:
            return options if isinstance(options, dict) else None
    return None


def hook_implementations(obj: Any) -> dict[str, tuple[Callable[..., Any], dict[str, Any]]]:
    """``{attribute: (callable, hookimpl options)}`` for every attribute of ``obj`` marked with ``hookimpl``.

    ``obj`` is a module, a class or an instance. Nothing on ``obj`` runs: no
    property, no ``__getattr__``, no ``__dir__``. Each callable carries the
    marker itself, so a pluggy that reads it with ``getattr`` finds it.
    """
    found = {}
    for name in _names(obj):
        hit = _static_attr(obj, name)
        if hit is None:
            continue
        holder, function = hit
        options = _options(holder)
        if options is None:
            continue
        if getattr(function, MARKER, None) is not options:  # the marker sat on a staticmethod/classmethod
            function = _marked(function, options)
        found[name] = (function, options)
    return found


def _marked(function: Callable[..., Any], options: dict[str, Any]) -> Callable[..., Any]:
    @functools.wraps(function)
    def call(*args: Any, **kwargs: Any) -> Any:
        return function(*args, **kwargs)

    setattr(call, MARKER, options)
    return call


class HookProxy:
    """Stands in for a part in a plugin manager: its attributes are the part's hook implementations, and nothing
    else pluggy could look into. pluggy up to 1.6 reads every attribute the proxy lists and asks
    ``hasattr(plugin, hook)`` of every registered object, so the proxy forwards nothing to the part and keeps
    the part behind a function (:func:`part_of`): a part's ``__getattr__``, or its metaclass's, never runs."""

    def __init__(self, part: Any, label: str, hooks: dict[str, Callable[..., Any]]) -> None:
        object.__setattr__(self, "_part", lambda: part)
        object.__setattr__(self, "_label", label)
        for name, function in hooks.items():
            object.__setattr__(self, name, function)

    def __repr__(self) -> str:
        return f"<hooks of {self._label}>"


def proxy_for(part: Any, label: str,
              wrap: Callable[[str, Callable[..., Any], dict[str, Any]], Callable[..., Any]] | None = None) -> HookProxy:
    """The proxy to register for ``part``; ``wrap(name, function, options)`` may replace each implementation."""
    hooks = {}
    for name, (function, options) in hook_implementations(part).items():
        hooks[name] = wrap(name, function, options) if wrap else function
    return HookProxy(part, label, hooks)


def object_name(part: Any) -> str:
    """The name of a module or class, else of the part's class: read without running the part's code."""
    return part.__name__ if isinstance(part, (type, types.ModuleType)) else type(part).__name__


def part_of(plugin: Any) -> Any:
    """The part a registered plugin object stands for (the object itself when it is no proxy)."""
    return object.__getattribute__(plugin, "_part")() if type(plugin) is HookProxy else plugin
