"""The ``console`` visualizer: progress you can watch, in a terminal or a CI log.

At the start it prints what defines the run (the trainer's ``describe()``
rows). On a terminal it then draws a rich progress bar per epoch (it/s, ETA,
the latest losses); when stdout is not a terminal it prints one plain line
per logging interval instead. Either way it prints a one-line summary per
epoch and per validation, and says at the end whether the run finished,
stopped early or was interrupted, and where. Epochs are counted from 1
everywhere. It reads only the records the engine has already brought to the
host, so it adds no device synchronisation.

After a resume it prints the same lines an uninterrupted run would have
printed from there (``every_logs`` counts the records kept in
``metrics.jsonl``); when a killed run had logged steps after its checkpoint,
it says where the run restarts and that the lines printed for those steps are
superseded by the ones that follow.
"""

from __future__ import annotations

import sys
import time
from typing import Any, Literal, Mapping

from pydantic import Field

from nectargan_core import hookimpl
from nectargan_core.config import Section
from nectargan_core.losskeys import readout
from nectargan_core.metrics import read_metrics
from nectargan_core.text import printable


class ConsoleOptions(Section):
    """Options of the console visualizer."""

    bar: Literal["auto", "on", "off"] = Field("auto", description="Progress bar: auto (only on a terminal), on, off")
    every_logs: int = Field(1, description="Plain mode: print every Nth metrics record", ge=1)


def format_values(values: Mapping[str, Any], limit: int = 8) -> str:
    """``name value`` pairs (validation metrics); dotted keys are details left to the log."""
    items = [(k, v) for k, v in values.items() if "." not in k][:limit]
    return "  ".join(f"{k} {v:.4g}" if isinstance(v, (int, float)) else f"{k} {v}" for k, v in items)


#: Terms shown beside each network's total on the progress bar (plain lines show them all).
BAR_TERMS = 3


def format_seconds(seconds: float) -> str:
    seconds = int(max(0, seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}"


class ConsoleVisualizer:
    def __init__(self, bar: str = "auto", every_logs: int = 1, stream: Any = None) -> None:
        self.stream = stream or sys.stdout
        isatty = getattr(self.stream, "isatty", lambda: False)()
        self.use_bar = bar == "on" or (bar == "auto" and isatty)
        self.every_logs = every_logs
        self._logs = 0
        self._progress: Any = None
        self._task: Any = None
        self._epoch_start = time.time()
        self._run_start = time.time()
        self._start_step = 0

    def _print(self, line: str) -> None:
        line = printable(line)  # run names, paths and plugin texts may hold terminal escapes or newlines
        if self._progress is not None:
            self._progress.console.print(line, highlight=False, markup=False)
        else:
            print(line, file=self.stream, flush=True)

    def _eta(self, trainer: Any) -> str:
        steps = trainer.global_step - self._start_step
        elapsed = time.time() - self._run_start
        per_epoch = trainer.num_batches() or 0
        total = trainer.config.loop.epochs * per_epoch
        if trainer.config.loop.max_steps:
            total = min(total, trainer.config.loop.max_steps) if total else trainer.config.loop.max_steps
        if steps <= 0 or not total:
            return "?"
        return format_seconds((total - trainer.global_step) * elapsed / steps)

    @hookimpl
    def on_train_start(self, trainer: Any) -> None:
        self._run_start = time.time()
        self._start_step = trainer.global_step
        loop = trainer.config.loop
        limit = f", max {loop.max_steps} steps" if loop.max_steps else ""
        self._print(f"training '{trainer.name}' on {trainer.device}: {loop.epochs} epochs{limit}, "
                    f"{trainer.num_batches() or '?'} batches/epoch -> {trainer.run_dir.path}")
        summary = getattr(trainer, "summary", None) or {}
        width = max(map(len, summary), default=0)
        for label, text in summary.items():
            self._print(f"  {label:<{width}}  {text}")
        if trainer.batch_in_epoch:  # resumed inside an epoch: on_epoch_start does not come for this one
            self._epoch_start = time.time()
        if self.use_bar:
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                                       TimeRemainingColumn)

            self._progress = Progress(
                TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                TextColumn("{task.fields[speed]}"), TimeRemainingColumn(), TextColumn("{task.fields[losses]}"),
                transient=True,
            )
            self._progress.start()
            if trainer.batch_in_epoch:
                self._new_bar(trainer, trainer.epochs_done, trainer.batch_in_epoch)

    def _new_bar(self, trainer: Any, epoch: int, completed: int = 0) -> None:
        """The bar of ``epoch`` (from 0; shown from 1), ``completed`` batches in."""
        if self._task is not None:
            self._progress.remove_task(self._task)
        self._task = self._progress.add_task(
            f"epoch {epoch + 1}/{trainer.config.loop.epochs}", total=trainer.num_batches(),
            completed=completed, speed="", losses="",
        )

    @hookimpl
    def on_resume(self, trainer: Any, step: int) -> None:
        # The records this run already logged: the next line printed is the one an uninterrupted run prints next.
        self._logs = sum(1 for _ in read_metrics(trainer.run_dir.metrics_file, "train"))
        if trainer.finished or not getattr(trainer, "records_dropped", 0):
            return  # nothing trained, or nothing printed past the checkpoint: ``nectargan train`` says where
        self._print(f"resuming '{trainer.name}' at {trainer.position_text()}: "
                    "lines printed before the stop for later steps are superseded")

    @hookimpl
    def on_epoch_start(self, trainer: Any, epoch: int) -> None:
        self._epoch_start = time.time()
        if self._progress is not None:
            self._new_bar(trainer, epoch)

    @hookimpl
    def on_train_batch_end(self, trainer: Any) -> None:
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, completed=trainer.batch_in_epoch)

    @hookimpl
    def on_log(self, trainer: Any, record: Mapping[str, Any]) -> None:
        elapsed = time.time() - self._run_start
        steps = trainer.global_step - self._start_step
        speed = f"{steps / elapsed:.2f} it/s" if elapsed > 0 else ""
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, speed=speed, losses=readout(record["losses"], BAR_TERMS))
            return
        self._logs += 1
        if self._logs % self.every_logs:
            return
        total = trainer.num_batches()
        position = f"[{trainer.batch_in_epoch}/{total}]" if total else f"[{trainer.batch_in_epoch}]"
        self._print(
            f"epoch {record['epoch'] + 1}/{trainer.config.loop.epochs} {position} step {record['step']}  "
            f"{readout(record['losses'])}  {speed}  ETA {self._eta(trainer)}"
        )

    @hookimpl
    def on_validation_end(self, epoch: int, metrics: Mapping[str, float]) -> None:
        if metrics:
            self._print(f"validation after epoch {epoch + 1}: {format_values(metrics)}")

    @hookimpl
    def on_epoch_end(self, trainer: Any, epoch: int, metrics: Mapping[str, float]) -> None:
        seconds = time.time() - self._epoch_start
        losses = {k: v for k, v in metrics.items() if not k.startswith("val/")}
        self._print(f"epoch {epoch + 1}/{trainer.config.loop.epochs} done in {seconds:.1f}s: "
                    f"{readout(losses)}  ETA {self._eta(trainer)}")

    def _close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
            self._task = None

    @hookimpl
    def on_train_end(self, trainer: Any) -> None:
        self._close()
        self._print(f"{ending(trainer)} in {format_seconds(time.time() - self._run_start)}")

    @hookimpl
    def on_exception(self) -> None:
        self._close()


def ending(trainer: Any) -> str:
    """How and where a run stopped: ``done: 2/2 epochs (step 40)``, ``interrupted at epoch 2/10, batch 5/20
    (step 25)``, or ``stopped early at end of epoch 3/10 (step 60): <reason>``."""
    loop = trainer.config.loop
    where = trainer.position_text()
    if getattr(trainer, "cut_short", trainer.interrupted):  # a stop on the last step ends a finished run
        return f"interrupted at {where}"
    if trainer.stop_reason is not None and not trainer.interrupted:
        return f"stopped early at {where}: {trainer.stop_reason}"
    if loop.max_steps is not None and trainer.global_step >= loop.max_steps and trainer.epochs_done < loop.epochs:
        return f"done: loop.max_steps={loop.max_steps} reached at {where}"
    return f"done: {trainer.epochs_done}/{loop.epochs} epochs ({trainer.global_step} steps)"
