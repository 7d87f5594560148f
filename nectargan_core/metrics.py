"""The metrics log: JSON lines, one record per logging interval and per validation.

Every line is written whole and flushed, so other tools (plots, reports,
visualizers in other processes) may read the file while a run writes it; a
reader ignores a last line that is still incomplete.
"""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

from .atomic import atomic_write
from .errors import RunDirError
from .filekind import NotRegularFile, open_regular
from .jsonfiles import value_fits
from .text import printable

#: The longest line read back (a record is a few hundred bytes; one with thousands of loss terms ~100 KB).
MAX_LINE = 1024 * 1024


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
        # never through a link: a metrics.jsonl linked elsewhere would have the run write outside its directory
        fd = open_regular(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644, follow_links=False)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
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
            with os.fdopen(open_regular(self.path, follow_links=False), "rb") as handle:  # never a FIFO, device, link
                data = handle.read()
        except FileNotFoundError:
            data = b""
        except NotRegularFile as exc:
            raise RunDirError(f"{self.path}: is {exc.strerror}, not the run's metrics log; move it out of the run "
                              "directory and resume again") from None
        except OSError as exc:  # a loop of links, no permission
            raise RunDirError(f"{self.path}: cannot be read ({exc.strerror}); fix or move it out of the run "
                              "directory and resume again") from None
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
        handle = os.fdopen(open_regular(path), "rb")
    except FileNotFoundError:
        if not Path(path).parent.is_dir():
            raise FileNotFoundError(f"{path}: no such folder; give the metrics.jsonl of a run directory") from None
        return
    except OSError as exc:  # a FIFO, a device, a folder, a loop of links, unreadable: the run is shown without it
        why = exc.strerror if isinstance(exc, NotRegularFile) else f"cannot be read ({exc.strerror})"
        _warn_once(f"warning: {printable(str(path))}: is {why}, not a metrics log; left out" if isinstance(
            exc, NotRegularFile) else f"warning: {printable(str(path))}: {why}; left out")
        return
    with handle:
        for raw in _lines(handle):
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


def _lines(handle: Any) -> Iterator[bytes]:
    """The file's lines, each at most :data:`MAX_LINE` bytes: a longer one is skipped whole (never held)."""
    while True:
        line = handle.readline(MAX_LINE + 1)
        if not line:
            return
        if len(line) > MAX_LINE and not line.endswith(b"\n"):
            while line and not line.endswith(b"\n"):  # the rest of the over-long line
                line = handle.readline(MAX_LINE)
            continue
        yield line


_warned: set[str] = set()


def _warn_once(line: str) -> None:
    if line not in _warned:
        _warned.add(line)
        print(line, file=sys.stderr, flush=True)


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
