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

from .hookproxy import HookProxy, proxy_for


def guard(part: Any, label: str, strict: bool) -> HookProxy:
    """The proxy to register for ``part``: under strict mode its hooks as they are, else hooks that cannot raise.

    Wrapper hooks (generators around other implementations) are passed through
    as they are. Nothing on ``part`` runs while its hooks are found
    (:mod:`nectargan_core.hookproxy`).
    """
    if strict:
        return proxy_for(part, label)
    state = _Guard(label)

    def wrap(name: str, method: Callable[..., Any], options: dict[str, Any]) -> Callable[..., Any]:
        if options.get("hookwrapper") or options.get("wrapper"):
            return method
        return _guarded(state, name, method)

    return proxy_for(part, label, wrap)


class _Guard:
    """Whether a guarded part is still on; the first failure turns it off with one warning line."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.disabled = False

    def fail(self, hook: str, exc: Exception) -> None:
        self.disabled = True
        print(f"warning: {self.label} failed in {hook}: {type(exc).__name__}: {exc}; "
              "disabled for the rest of this run", file=sys.stderr, flush=True)


def _guarded(state: _Guard, hook: str, method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)  # keeps the hookimpl marker and, through __wrapped__, the argument names
    def call(*args: Any, **kwargs: Any) -> Any:
        if state.disabled:
            return None
        try:
            return method(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - reported once, then the part is off
            state.fail(hook, exc)
            return None

    return call
