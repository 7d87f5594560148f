"""A run's metrics log as curves: loss terms, validation metrics and learning rates.

Every curve is indexed by fractional epoch (``2.5`` is halfway through the
third epoch), so runs with different batch sizes or logging intervals line up.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from ..losskeys import is_detail, network_of, repeated_terms
from ..metrics import read_metrics


#: How the log writes non-finite values (``str(float)``); any other string is not a number.
NON_FINITE = {"nan", "inf", "-inf"}


def to_float(value: Any) -> float:
    """A logged value as a float; the log writes NaN/Inf as strings, other writers may write null.

    Any other string (``"999"``, written by something else) is no number: NaN, never the best value.
    """
    if isinstance(value, bool) or value is None or (isinstance(value, str) and value.lower() not in NON_FINITE):
        return math.nan
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def as_int(value: Any, default: int = 0) -> int:
    """An integer from a status file or metrics record (any JSON value), else ``default``."""
    if isinstance(value, bool):
        return default
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return default


def section(record: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """``record[key]`` if it is a mapping, else empty: a log written by another tool may hold anything."""
    value = record.get(key)
    return value if isinstance(value, Mapping) else {}


def moving_average(values: Iterable[float], window: int) -> list[float]:
    """Trailing mean of the last ``window`` finite values, so one NaN does not blank the curve."""
    recent: deque[float] = deque(maxlen=max(1, window))
    smoothed = []
    for value in values:
        if math.isfinite(value):
            recent.append(value)
        smoothed.append(sum(recent) / len(recent) if recent else math.nan)
    return smoothed


@dataclass
class Series:
    """One curve: y values over fractional epochs."""

    x: list[float] = field(default_factory=list)
    y: list[float] = field(default_factory=list)

    def add(self, x: float, y: Any) -> None:
        """Append one point; a value that is not a number becomes NaN (a gap in the plot)."""
        self.x.append(x)
        self.y.append(to_float(y))


@dataclass(frozen=True)
class History:
    """The records of one metrics log, in the order they were written."""

    records: tuple[Mapping[str, Any], ...]

    @classmethod
    def read(cls, path: str | Path) -> "History":
        """The history of a ``metrics.jsonl`` file, read with ``read_metrics`` (an incomplete last line is skipped)."""
        return cls(tuple(read_metrics(path)))

    def of(self, kind: str) -> list[Mapping[str, Any]]:
        """The records of one kind (``train``, ``val``, ...), in file order."""
        return [record for record in self.records if record.get("kind") == kind]

    @property
    def empty(self) -> bool:
        """Whether the run logged no training or validation record yet."""
        return not self.of("train") and not self.of("val")

    def losses(self, details: bool = False) -> dict[str, dict[str, Series]]:
        """Training loss terms grouped by network: ``{"G": {"G/gan": Series, ...}, "D": {...}}``."""
        groups: dict[str, dict[str, Series]] = {}
        for record in self.of("train"):
            for key, value in section(record, "losses").items():
                if details or not is_detail(key):
                    groups.setdefault(network_of(key), {}).setdefault(key, Series()).add(train_x(record), value)
        return groups

    def repeated(self) -> dict[str, str]:
        """Loss terms equal to their network's total by construction, mapped to it (``D/gan_d`` -> ``D/total``)."""
        return repeated_terms({key: None for record in self.of("train") for key in section(record, "losses")})

    def learning_rates(self) -> dict[str, Series]:
        """The learning rate of each optimizer over training."""
        curves: dict[str, Series] = {}
        for record in self.of("train"):
            for name, value in section(record, "lr").items():
                curves.setdefault(name, Series()).add(train_x(record), value)
        return curves

    def validation(self) -> dict[str, Series]:
        """Each validation metric over training."""
        locate = self._epoch_locator()
        curves: dict[str, Series] = {}
        for record in self.of("val"):
            x = locate(record)
            for name, value in section(record, "metrics").items():
                curves.setdefault(name, Series()).add(x, value)
        return curves

    def _epoch_locator(self) -> Callable[[Mapping[str, Any]], float]:
        """Fractional epoch of a record that carries only a step (validation), from the train records.

        Validation at an epoch's end shares its step with that epoch's last
        train record; mid-epoch validation falls between two train records
        and is placed by linear interpolation.
        """
        points = sorted({int(r.get("step", 0)): train_x(r) for r in self.of("train")}.items())
        points.insert(0, (0, 0.0))
        steps = [step for step, _ in points]

        def locate(record: Mapping[str, Any]) -> float:
            step = int(record.get("step", 0))
            i = bisect_left(steps, step)
            if i < len(points) and steps[i] == step:
                return points[i][1]
            if 0 < i < len(points):
                (s0, x0), (s1, x1) = points[i - 1], points[i]
                return x0 + (x1 - x0) * (step - s0) / (s1 - s0)
            return float(record.get("epoch", 0)) + 1.0

        return locate

    def best(self, metric: str, mode: str) -> float | None:
        """The best finite value of validation ``metric``, chosen the way best.pt is."""
        values = [to_float(metric_value(section(record, "metrics"), metric)) for record in self.of("val")]
        finite = [value for value in values if math.isfinite(value)]
        if not finite:
            return None
        return max(finite) if mode == "max" else min(finite)


def metric_value(metrics: Mapping[str, Any], key: str) -> Any:
    """``key`` in validation metrics, with or without its ``val/`` prefix (as checkpoint.best_metric allows)."""
    return metrics.get(key, metrics.get(key.removeprefix("val/")))


def train_x(record: Mapping[str, Any]) -> float:
    """A train record's fractional epoch (``epoch_progress``; the epoch number if that is missing)."""
    return to_float(record.get("epoch_progress", record.get("epoch", 0)))
