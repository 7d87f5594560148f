"""The metrics log: JSON lines, one record per logging interval and per validation.

Every line is written whole and flushed, so other tools (plots, reports,
visualizers in other processes) may read the file while a run writes it; a
reader ignores a last line that is still incomplete.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

from .atomic import atomic_write
from .jsonfiles import value_fits


def _clean(value: Any) -> Any:
    """JSON has no NaN/Inf: write them as strings so the file stays valid JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, Mapping):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


class MetricsLog:
    """Append-only writer for ``metrics.jsonl``."""

    def __init__(self, path: str | Path, *, write: bool = True,
                 guard: Callable[[], None] | None = None) -> None:
        self.path = Path(path)
        #: Called before every write (the trainer checks that it still holds the run).
        self.guard = guard
        #: False in the processes of a distributed run other than rank 0: they
        #: count records (to stay in step) but only rank 0 writes the file.
        self.write = write
        #: Records this run has written; checkpoints store it so a resume can
        #: drop exactly the records written after the checkpoint.
        self.records = 0

    def append(self, record: Mapping[str, Any]) -> None:
        if not self.write:
            self.records += 1
            return
        line = json.dumps(_clean(dict(record)), separators=(",", ":")) + "\n"
        if self.guard is not None:
            self.guard()
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(line)
            handle.flush()
        self.records += 1

    def truncate_to(self, count: int) -> int:
        """Keep the first ``count`` complete records and drop the rest (atomic rewrite).

        A resumed run calls this with the count saved in its checkpoint, so the
        records a killed run wrote after that checkpoint disappear. Returns how
        many were dropped.
        """
        if not self.write:
            self.records = count
            return 0
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            data = b""
        lines = data.split(b"\n")[:-1]  # complete lines only
        dropped = max(0, len(lines) - count)
        if dropped or not data.endswith(b"\n") and data:
            kept = b"".join(line + b"\n" for line in lines[:count])
            atomic_write(self.path, lambda handle: handle.write(kept))
        self.records = min(count, len(lines))
        return dropped


def read_metrics(path: str | Path, kind: str | None = None) -> Iterator[dict[str, Any]]:
    """Records from a metrics log, skipping an incomplete last line; optionally of one ``kind``.

    A log not written yet (its folder exists: a run that has not logged) has no
    records; a path whose folder does not exist raises ``FileNotFoundError``
    (a mistyped run directory must not read as an empty run).
    """
    try:
        handle = open(path, "rb")
    except FileNotFoundError:
        if not Path(path).parent.is_dir():
            raise FileNotFoundError(f"{path}: no such folder; give the metrics.jsonl of a run directory") from None
        return
    with handle:
        for raw in handle:
            if not raw.endswith(b"\n"):
                break  # being written right now
            try:
                record = json.loads(raw.decode("utf-8"))
            except (ValueError, RecursionError):  # not JSON, not UTF-8 (UnicodeDecodeError), nested too deep
                continue
            if not isinstance(record, dict) or not record_fits(record):
                continue  # not a record (another tool, a damaged line)
            if kind is None or record.get("kind") == kind:
                yield record


#: The fields of a metrics record and their types; a record with one of another type is skipped as damaged.
RECORD_FIELDS: dict[str, type | tuple[type, ...]] = {
    "kind": str, "epoch": int, "step": int, "steps": int, "epoch_progress": (int, float), "time": (int, float),
    "elapsed": (int, float), "losses": dict, "metrics": dict, "lr": dict}


#: The integers a record holds fit 64 bits (what JSON readers elsewhere take); floats need only be finite.
INT64 = (-2 ** 63, 2 ** 63)


def record_fits(record: dict[str, Any]) -> bool:
    """Whether the fields the readers use have the types (and, for numbers, finite values of 63 bits) the engine
    writes; values inside ``losses``, ``metrics`` and ``lr`` are read one by one, each as a number or not."""
    return all(value_fits(record[key], kind, *(INT64 if isinstance(record[key], int) else ()))
               for key, kind in RECORD_FIELDS.items() if key in record)
