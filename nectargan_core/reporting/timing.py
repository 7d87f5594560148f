"""How fast a run trained, from the ``elapsed`` seconds in its metrics records.

``elapsed`` counts from the start of a training session and restarts at 0 when
a run is resumed, so the log is cut into sessions wherever it goes down.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from .history import as_int

Record = Mapping[str, Any]


@dataclass(frozen=True)
class Timing:
    #: Median over logging intervals: the training speed, without validation pauses.
    seconds_per_step: float | None
    #: Every logged second over every step: what validation and checkpoints cost on top.
    overall_seconds_per_step: float | None
    images_per_second: float | None
    #: ``(epoch number from 1, seconds)``; an epoch cut by a resume shows only its last part.
    epoch_seconds: list[tuple[int, float]]
    wall_seconds: float
    steps: int
    sessions: int


def sessions_of(records: Iterable[Record]) -> list[list[Record]]:
    """The timed records (train and epoch), one list per training session."""
    sessions: list[list[Record]] = []
    previous = None
    for record in records:
        elapsed = record.get("elapsed")
        if not isinstance(elapsed, (int, float)):
            continue
        if previous is None or elapsed < previous:
            sessions.append([])
        sessions[-1].append(record)
        previous = elapsed
    return sessions


def interval_seconds_per_step(session: list[Record]) -> list[float]:
    """Seconds per step of each logging interval; the time up to an epoch record (validation) is left out."""
    rates, start = [], 0.0
    for record in session:
        steps = record.get("steps")
        if record.get("kind") == "train" and isinstance(steps, int) and steps > 0:
            rates.append((record["elapsed"] - start) / steps)
        start = record["elapsed"]
    return rates


def epoch_durations(session: list[Record]) -> list[tuple[int, float]]:
    durations, start = [], 0.0
    for record in session:
        if record.get("kind") == "epoch":
            durations.append((as_int(record.get("epoch"), -1) + 1, record["elapsed"] - start))
            start = record["elapsed"]
    return durations


def timing_of(records: Iterable[Record], batch_size: int | None = None) -> Timing:
    """Speed, epoch durations and wall time of a run; ``batch_size`` turns s/iter into img/s."""
    sessions = sessions_of(records)
    rates = [rate for session in sessions for rate in interval_seconds_per_step(session)]
    steps = sum(as_int(r.get("steps")) for session in sessions for r in session if r.get("kind") == "train")
    wall = sum(session[-1]["elapsed"] for session in sessions)
    per_step = statistics.median(rates) if rates else None
    return Timing(
        seconds_per_step=per_step,
        overall_seconds_per_step=wall / steps if steps else None,
        images_per_second=batch_size / per_step if batch_size and per_step else None,
        epoch_seconds=[d for session in sessions for d in epoch_durations(session)],
        wall_seconds=wall,
        steps=steps,
        sessions=len(sessions),
    )
