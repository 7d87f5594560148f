"""Fault isolation for visualizers and callbacks.

A visualizer that cannot reach its server, or a callback with a bug, must not
end a run that may have hours of compute in it. Each hook implementation of
such a part is wrapped: the first exception is reported in one warning line
naming the part and the hook, and the part is disabled for the rest of the
run. With ``NECTARGAN_STRICT_PLUGINS=1`` the exception propagates instead.
The trainer and plugin objects passed through the Python API are not
guarded: their errors are the run's errors.
"""

from __future__ import annotations

import functools
import sys
from typing import Any, Callable


class GuardedPart:
    """Stands in for a part in the run's plugin manager; other attributes reach the part itself."""

    def __init__(self, part: Any, label: str) -> None:
        self._part = part
        self._label = label
        self.disabled = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._part, name)

    def _fail(self, hook: str, exc: Exception) -> None:
        self.disabled = True
        print(f"warning: {self._label} failed in {hook}: {type(exc).__name__}: {exc}; "
              "disabled for the rest of this run", file=sys.stderr, flush=True)


def guard(part: Any, label: str, parse_opts: Callable[[Any, str], Any], strict: bool) -> Any:
    """``part`` itself under strict mode, else a :class:`GuardedPart` whose hooks cannot raise.

    ``parse_opts`` is the plugin manager's ``parse_hookimpl_opts``. Wrapper
    hooks (generators around other implementations) are passed through as they are.
    """
    if strict:
        return part
    proxy = GuardedPart(part, label)
    for name in dir(part):
        if name.startswith("_"):
            continue
        options = parse_opts(part, name)
        if options is None:
            continue
        method = getattr(part, name)
        if options.get("hookwrapper") or options.get("wrapper"):
            setattr(proxy, name, method)
            continue
        setattr(proxy, name, _guarded(proxy, name, method))
    return proxy


def _guarded(proxy: GuardedPart, hook: str, method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)  # keeps the hookimpl marker and, through __wrapped__, the argument names
    def call(*args: Any, **kwargs: Any) -> Any:
        if proxy.disabled:
            return None
        try:
            return method(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - reported once, then the part is off
            proxy._fail(hook, exc)
            return None

    return call
