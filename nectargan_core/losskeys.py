"""How loss keys are named, and which of them say the same thing twice.

Trainers return their losses as ``network/term`` keys (``G/gan``, ``G/l1``,
``D/gan_d``) with a ``network/total`` per network, and dotted detail keys
beside them (``G/l1.raw``, ``G/l1.weight``) that are kept for the log. A
network with a single term has a total equal to that term (``D/total`` is
``D/gan_d`` under the vanilla objective), so every view (console, ``plot``,
visualizers) shows that total once and leaves the repeated term out.

Torch-free: the console, the report and ``nectargan plot`` use it.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

TOTAL = "total"


def is_detail(key: str) -> bool:
    """Dotted keys (``G/l1.raw``, ``D/gan_d.weight``) are diagnostics beside a loss term, not terms."""
    return "." in key


def network_of(key: str) -> str:
    """The network a loss term belongs to: the part before ``/`` (``G/gan`` -> ``G``); ``""`` if none."""
    return key.split("/", 1)[0] if "/" in key else ""


def total_of(network: str) -> str:
    return f"{network}/{TOTAL}"


def repeated_terms(keys: Iterable[str]) -> dict[str, str]:
    """Terms that their network's total repeats, mapped to that total: ``{"D/gan_d": "D/total"}``.

    A network repeats a term when its keys are exactly one term and the total.
    """
    groups: dict[str, list[str]] = {}
    for key in keys:
        if isinstance(key, str) and "/" in key and not is_detail(key):
            groups.setdefault(network_of(key), []).append(key)
    repeated = {}
    for network, members in groups.items():
        terms = [key for key in members if key != total_of(network)]
        if len(terms) == 1 and total_of(network) in members:
            repeated[terms[0]] = total_of(network)
    return repeated


def number(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, (int, float)) and not isinstance(value, bool) else str(value)


def readout(values: Mapping[str, Any], max_terms: int | None = None) -> str:
    """Losses as one line: each network's total once, its terms beside it.

    ``G/total 26.48 (gan 1.328, l1 25.15)  D/total 0.3665``: terms in brackets
    (at most ``max_terms`` per network, then ``+N more``), terms whose
    scheduled weight (``<term>.weight``) is 0 left out, a term equal to its
    network's total by construction left out, detail keys left out. Keys of
    networks without a total, and keys without a network, are listed as
    ``name value``.
    """
    repeated = repeated_terms(values)
    groups: dict[str, list[str]] = {}
    for key in values:
        if is_detail(key) or key in repeated or values.get(f"{key}.weight") == 0:
            continue
        groups.setdefault(network_of(key), []).append(key)
    parts = []
    for network, keys in groups.items():
        total = total_of(network)
        if not network or total not in keys:
            parts += [f"{key} {number(values[key])}" for key in keys]
            continue
        terms = [key for key in keys if key != total]
        shown = terms if max_terms is None else terms[:max_terms]
        inner = [f"{key.split('/', 1)[1]} {number(values[key])}" for key in shown]
        if len(terms) > len(shown):
            inner.append(f"+{len(terms) - len(shown)} more")
        parts.append(f"{total} {number(values[total])}" + (f" ({', '.join(inner)})" if inner else ""))
    return "  ".join(parts)
