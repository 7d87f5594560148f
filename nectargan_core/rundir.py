"""Run directories: ``<output_dir>/<name>/version_<N>/``.

Each run directory holds::

    config.yaml        the resolved config (architecture options travel with the run)
    status.json        running | finished | failed | interrupted, with epoch and step
    summary.json       what defines the run (trainer, networks, data, schedule), written at start
    run.lock           held by the process training the run (one writer per run)
    metrics.jsonl      one JSON record per logging interval and per validation
    checkpoints/       epochNNNN-stepNNNNNNNN.pt (+ .json sidecars), best.pt
    examples/          images written by the trainer

Versions are compared as numbers, so version_10 comes after version_9.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from .atomic import atomic_write_text, remove_stale_temps
from .errors import RunDirError
from .jsonfiles import read_json_object, value_fits
from .text import printable

VERSION_PATTERN = re.compile(r"^version_(\d+)$")
CHECKPOINT_PATTERN = re.compile(r"^epoch(\d+)-step(\d+)\.pt$")
"""File names of periodic checkpoints in a run's ``checkpoints`` folder (groups: epoch, step)."""
EMERGENCY_PATTERN = re.compile(r"^emergency-step(\d+)\.pt$")
STATUSES = ("running", "finished", "failed", "interrupted")
#: The fields of ``status.json`` and their types (``read_status`` leaves out a field of another type).
STATUS_FIELDS: dict[str, type | tuple[type, ...]] = {
    "status": str, "updated": (int, float), "pid": int, "epoch": int, "step": int, "reason": str, "error": str,
    "checkpoint": str, "emergency_checkpoint": str, "first_step_at": (int, float)}
#: The values a number of ``status.json`` may take: times within this clock's reach (to the year 2242), a
#: process id below Linux's largest, counts that fit 63 bits.
STATUS_RANGES = {"updated": (0, 2 ** 33), "first_step_at": (0, 2 ** 33), "pid": (1, 2 ** 22), "epoch": (0, 2 ** 63),
                 "step": (0, 2 ** 63)}


def field_fits(key: str, value: Any) -> bool:
    """Whether ``value`` is a ``status.json`` ``key`` as the engine writes it (type, finite, in range)."""
    if value is None:  # the engine writes null for a reason, error or checkpoint it has none of
        return STATUS_FIELDS[key] is str
    return value_fits(value, STATUS_FIELDS[key], *STATUS_RANGES.get(key, (None, None)))
IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg"}


@dataclass(frozen=True)
class RunDir:
    """A run's directory: its files, status and checkpoints.

    A trainer reaches it as ``self.run_dir``: write example grids to
    ``examples/epochNNNN.png`` and files of your own under ``path``.
    """
    path: Path
    """The run's folder (``runs/NAME/version_N``); a plugin's own files go under it."""

    # -- layout ----------------------------------------------------------
    @property
    def config_file(self) -> Path:
        """``config.yaml``: the resolved config of the run."""
        return self.path / "config.yaml"

    @property
    def status_file(self) -> Path:
        """``status.json``: what :meth:`read_status` returns."""
        return self.path / "status.json"

    @property
    def metrics_file(self) -> Path:
        """``metrics.jsonl``: one JSON record per log interval, validation and epoch."""
        return self.path / "metrics.jsonl"

    @property
    def summary_file(self) -> Path:
        """``summary.json``: what defines the run, as printed when it starts (see :meth:`write_summary`)."""
        return self.path / "summary.json"

    @property
    def checkpoints(self) -> Path:
        """The ``checkpoints/`` folder."""
        return self.path / "checkpoints"

    @property
    def examples(self) -> Path:
        """The ``examples/`` folder, where trainers write example grids (``epochNNNN.png``)."""
        return self.path / "examples"

    @property
    def best_checkpoint(self) -> Path:
        """``checkpoints/best.pt``, written when ``checkpoint.best_metric`` improves."""
        return self.checkpoints / "best.pt"

    @staticmethod
    def checkpoint_name(epoch: int, step: int) -> str:
        """The file name of a periodic checkpoint: ``epochNNNN-stepNNNNNNNN.pt``."""
        return f"epoch{epoch:04d}-step{step:08d}.pt"

    # -- creating and opening --------------------------------------------
    @classmethod
    def create(cls, output_dir: str | Path, name: str) -> "RunDir":
        """Make the next ``version_N`` folder (numbers, not strings, decide 'next')."""
        parent = Path(output_dir) / name
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise RunDirError(f"run.output_dir: cannot create '{parent}': {exc.strerror}; choose a writable folder") from None
        if not os.access(parent, os.W_OK | os.X_OK):
            raise RunDirError(f"run.output_dir: '{parent}' is not writable; choose a writable folder")
        for _ in range(1000):
            version = next_version(parent)
            path = parent / f"version_{version}"
            try:
                path.mkdir()
            except FileExistsError:  # another process took it; try the next one
                continue
            except OSError as exc:
                raise RunDirError(f"run.output_dir: cannot create '{path}': {exc.strerror}") from None
            run = cls(path)
            run.checkpoints.mkdir()
            return run
        raise RunDirError(f"{parent}: could not allocate a new version folder")  # pragma: no cover

    @classmethod
    def open(cls, path: str | Path) -> "RunDir":
        """An existing run directory, or a one-line error saying what is wrong."""
        path = Path(path)
        if not path.is_dir():
            raise RunDirError(f"{printable(path)}: run directory not found")
        run = cls(path)
        if not run.config_file.is_file():
            raise RunDirError(f"{printable(path)}: not a NectarGAN run directory (no config.yaml)")
        return run

    # -- status ------------------------------------------------------------
    def write_status(self, status: str, **fields: Any) -> None:
        """Replace ``status.json`` atomically with ``status`` (running, finished, failed, interrupted) and ``fields``."""
        assert status in STATUSES, status
        record = {"status": status, "updated": time.time(), "pid": os.getpid(), **fields}
        atomic_write_text(self.status_file, json.dumps(record, indent=2) + "\n")

    def read_status(self) -> dict[str, Any]:
        """``status.json`` as a dict; ``{"status": "unknown"}`` when it is missing or unreadable.

        Its fields are checked: one of the wrong type (another tool's file, a damaged one) is left out, and a
        status that is not one of :data:`STATUSES` reads as ``unknown``.
        """
        try:
            data = read_json_object(self.status_file)
        except (OSError, ValueError):  # JSONFileError included: damaged, replaced, not an object
            return {"status": "unknown"}
        fields = {key: value for key, value in data.items() if key not in STATUS_FIELDS or field_fits(key, value)}
        if fields.get("status") not in STATUSES:
            fields["status"] = "unknown"
        return fields

    # -- summary -----------------------------------------------------------
    def write_summary(self, rows: dict[str, str], **extra: Any) -> None:
        """Record what defines the run (the trainer's ``describe()`` rows) in ``summary.json``."""
        record = {"rows": [[label, text] for label, text in rows.items()], **extra, "written": time.time()}
        atomic_write_text(self.summary_file, json.dumps(record, indent=2) + "\n")

    def read_summary(self) -> dict[str, Any]:
        """``summary.json`` as written, or ``{}`` when absent or unreadable (runs made before it existed).

        ``rows`` keeps only ``[label, text]`` pairs of strings and ``example_columns`` only a list of strings.
        """
        try:
            data = read_json_object(self.summary_file)
        except (OSError, ValueError):
            return {}
        rows = data.get("rows")
        data["rows"] = [row for row in rows if isinstance(row, list) and len(row) == 2
                        and all(isinstance(cell, str) for cell in row)] if isinstance(rows, list) else []
        columns = data.get("example_columns")
        data["example_columns"] = ([c for c in columns if isinstance(c, str)] if isinstance(columns, list) else [])
        return data

    # -- checkpoints -------------------------------------------------------
    def periodic_checkpoints(self) -> list[Path]:
        """Periodic checkpoints, oldest first (by global step, then epoch)."""
        found = []
        if self.checkpoints.is_dir():
            for entry in self.checkpoints.iterdir():
                match = CHECKPOINT_PATTERN.match(entry.name)
                if match:
                    found.append(((int(match.group(2)), int(match.group(1))), entry))
        return [p for _, p in sorted(found)]

    def emergency_checkpoints(self) -> list[Path]:
        """Emergency checkpoints (``emergency-stepN.pt``, saved when a run failed), oldest step first."""
        found = []
        if self.checkpoints.is_dir():
            found = [p for p in self.checkpoints.iterdir() if EMERGENCY_PATTERN.match(p.name)]
        return sorted(found, key=RunDir.emergency_step)

    @staticmethod
    def emergency_step(path: Path) -> int:
        """The step in an emergency checkpoint's name (``emergency-stepN.pt``), or -1 for any other file."""
        match = EMERGENCY_PATTERN.match(path.name)
        return int(match.group(1)) if match else -1

    def latest_example(self) -> tuple[Path, int] | None:
        """The most recently written image in ``examples/`` and its mtime in ns.

        Hidden files are skipped: they are images still being written.
        Visualizers show this after ``on_epoch_end``, when the trainer has written its grid.
        """
        try:
            found = [(p, p.stat().st_mtime_ns) for p in self.examples.iterdir()
                     if p.suffix.lower() in IMAGE_SUFFIXES and not p.name.startswith(".")]
        except OSError:
            return None
        return max(found, key=lambda item: (item[1], item[0].name), default=None)

    def latest_checkpoint(self) -> Path | None:
        """The newest periodic checkpoint, or None."""
        checkpoints = self.periodic_checkpoints()
        return checkpoints[-1] if checkpoints else None

    def remove_stale_temps(self) -> list[Path]:
        """Remove temp files of writes killed midway (writer PID not alive), with one line naming them.

        Called on resume before anything is written there (``checkpoints/.NAME.pt.tmp-PID`` after a
        SIGKILL during a checkpoint write), so that they are named; a process's first write into a
        folder would delete them silently (``atomic.sweep_stale_temps``). A temp file whose writer is
        alive is left alone.
        """
        removed = [p for folder in (self.path, self.checkpoints, self.examples) for p in remove_stale_temps(folder)]
        if removed:
            names = ", ".join(printable(p.relative_to(self.path)) for p in removed)
            print(f"removed {len(removed)} temp file(s) left by an interrupted write: {names}", file=sys.stderr)
        return removed


def next_version(parent: Path) -> int:
    versions = [int(m.group(1)) for m in map(VERSION_PATTERN.match, os.listdir(parent)) if m]
    return max(versions, default=-1) + 1


def iter_runs(output_dir: str | Path) -> Iterator[RunDir]:
    """Every run under ``output_dir`` (``name/version_N``), by name then version number."""
    root = Path(output_dir)
    if not root.is_dir():
        return
    for name_dir in sorted(p for p in root.iterdir() if p.is_dir()):
        versions = [(int(m.group(1)), p) for p in name_dir.iterdir()
                    if p.is_dir() and (m := VERSION_PATTERN.match(p.name))]
        for _, path in sorted(versions):
            if (path / "config.yaml").is_file():
                yield RunDir(path)


def latest_run(output_dir: str | Path, name: str | None = None) -> RunDir:
    """The most recently updated run under ``output_dir`` (optionally of one name)."""
    runs = [r for r in iter_runs(output_dir) if name is None or r.path.parent.name == name]
    if not runs:
        which = f" named '{name}'" if name else ""
        raise RunDirError(f"no runs{which} found under '{output_dir}'; start one with 'nectargan train'")

    def updated(run: RunDir) -> float:
        status = run.read_status()
        return float(status.get("updated") or run.path.stat().st_mtime)

    return max(runs, key=updated)
