"""One summary per run directory: what state it is in, how far it got, what it produced."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping

from ..atomic import pid_alive
from ..config import parse_file
from ..errors import ConfigError, RunDirError
from ..directions import direction
from ..rundir import VERSION_PATTERN, RunDir, iter_runs
from ..runlock import is_held
from .history import History, as_int


def read_config(run: RunDir) -> dict[str, Any]:
    """The run's resolved config as plain data (no plugins needed to read it).

    Read with the config reader's bounds, so a damaged or hostile config.yaml
    (an alias bomb, deep nesting) is one error line, not a hang.
    """
    try:
        return parse_file(run.config_file)
    except ConfigError as exc:
        raise RunDirError(f"cannot read the run's config: {exc}") from None


def as_text(value: Any) -> str | None:
    """A text field of a status file or config (any JSON value) as text, None for null."""
    return None if value is None else str(value)


def process_alive(pid: Any) -> bool:
    """Whether process ``pid`` (from a status file: any JSON value) exists on this machine."""
    return isinstance(pid, int) and pid_alive(pid)


def effective_status(status: Mapping[str, Any], held: bool | None = None) -> tuple[str, str | None]:
    """``(status, note)`` to show for a recorded status.

    A run recorded as running that nobody trains was killed without a chance
    to say so (SIGKILL, out of memory, a reboot): it is interrupted. Whether
    someone trains it is ``held``, the run's lock (:func:`~nectargan_core.runlock.is_held`,
    which works across machines sharing the folder); runs older than the lock
    fall back to whether the recorded pid exists on this machine.
    """
    recorded = str(status.get("status", "unknown"))
    alive = held if held is not None else process_alive(status.get("pid"))
    if recorded == "running" and not alive:
        return "interrupted", "process gone"
    return recorded, None


@dataclass(frozen=True)
class RunSummary:
    """What ``nectargan runs`` shows about a run, and what the report's header and status come from."""

    path: Path
    name: str
    version: int | None
    status: str
    note: str | None
    epochs: int
    epochs_total: int | None
    steps: int
    best_metric: str | None
    best_mode: str
    best_value: float | None
    latest_checkpoint: Path | None
    best_checkpoint: Path | None
    reason: str | None
    error: str | None
    updated: float | None

    @property
    def label(self) -> str:
        """``name/version_N``, or the folder's name for a run outside the usual layout."""
        return f"{self.name}/version_{self.version}" if self.version is not None else self.path.name

    @property
    def status_text(self) -> str:
        """The status with its note, as ``nectargan runs`` shows it (``failed (CUDA out of memory)``)."""
        return f"{self.status} ({self.note})" if self.note else self.status

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: paths as strings."""
        return {
            "name": self.name, "version": self.version, "path": str(self.path),
            "status": self.status, "note": self.note, "reason": self.reason, "error": self.error,
            "updated": self.updated,
            "epochs": self.epochs, "epochs_total": self.epochs_total, "steps": self.steps,
            "best_metric": self.best_metric, "best_mode": self.best_mode, "best_value": self.best_value,
            "latest_checkpoint": str(self.latest_checkpoint) if self.latest_checkpoint else None,
            "best_checkpoint": str(self.best_checkpoint) if self.best_checkpoint else None,
        }


def summarize(run: RunDir, history: History | None = None, config: Mapping[str, Any] | None = None) -> RunSummary:
    """The summary of one run (pass ``history``/``config`` when they are already loaded).

    Progress is also read from the metrics log, because status.json is
    written only when training starts and stops.
    """
    history = history if history is not None else History.read(run.metrics_file)
    config = config if config is not None else read_config(run)
    status = run.read_status()
    status = status if isinstance(status, dict) else {"status": "unknown"}
    state, note = effective_status(status, is_held(run.path))
    checkpoint = config.get("checkpoint")
    checkpoint = checkpoint if isinstance(checkpoint, dict) else {}
    loop = config.get("loop")
    loop = loop if isinstance(loop, dict) else {}
    best_metric = as_text(checkpoint.get("best_metric"))
    try:  # a config that validated knows its direction (a registered metric's, or its name's); a damaged one: min
        best_mode = direction(best_metric or "", str(checkpoint.get("best_mode", "auto")), metric_registry())
    except ValueError:
        best_mode = "min"
    epochs = [as_int(r.get("epoch"), -1) + 1 for r in history.of("epoch")]
    steps = [as_int(r.get("step")) for r in history.of("train")]
    version = VERSION_PATTERN.match(run.path.name)
    return RunSummary(
        path=run.path,
        name=run.path.parent.name,
        version=int(version.group(1)) if version else None,
        status=state,
        note=note,
        epochs=max([as_int(status.get("epoch")), *epochs]),
        epochs_total=as_int(loop.get("epochs")) or None,
        steps=max([as_int(status.get("step")), *steps]),
        best_metric=best_metric,
        best_mode=best_mode,
        best_value=history.best(best_metric, best_mode) if best_metric else None,
        latest_checkpoint=run.latest_checkpoint(),
        best_checkpoint=run.best_checkpoint if run.best_checkpoint.is_file() else None,
        reason=as_text(status.get("reason")),
        error=as_text(status.get("error")),
        updated=status.get("updated") if isinstance(status.get("updated"), (int, float)) else None,
    )


def list_runs(root: str | Path) -> Iterator[RunSummary]:
    """Summaries of every run under ``root`` (``NAME/version_N``), by name then version number."""
    for run in iter_runs(root):
        yield summarize(run)


def metric_registry() -> Any:
    """The installed plugins' registry, for the directions of registered metrics (loading plugins imports no torch)."""
    from ..plugins import get_plugins

    return get_plugins().registry
