"""The ``visdom`` visualizer: run hooks that only queue updates; a sender thread does the rest.

Everything here runs on the training thread, so each hook does a few dict
look-ups and one non-blocking ``put``. Reading images, encoding, and every
network call happen in :class:`~nectargan_visdom.sender.Sender`.
"""

from __future__ import annotations

import html
from functools import partial
from itertools import islice
from pathlib import Path
from typing import Any, Callable, Mapping, Optional

from nectargan_core import dump_yaml, hookimpl, read_metrics

from .board import Board
from .client import Client
from .options import VisdomOptions
from .sender import Report, Sender
from .updates import ImageUpdate, LogUpdate, UpdateQueue, ValidationUpdate



class VisdomVisualizer:
    def __init__(self, **options: Any) -> None:
        self.options = VisdomOptions(**options)
        self.env: Optional[str] = None
        self.where = server_url(self.options.server, self.options.port)
        self._queue: Optional[UpdateQueue] = None
        self._sender: Optional[Sender] = None
        self._last_image: Optional[tuple[Path, int]] = None
        self._kept_records: Optional[int] = None

    @hookimpl
    def on_resume(self, trainer: Any) -> None:
        # The engine has cut metrics.jsonl back to the checkpoint: what is there now is the history to redraw.
        self._kept_records = sum(1 for _ in read_metrics(trainer.run_dir.metrics_file))

    @hookimpl
    def on_train_start(self, trainer: Any) -> None:
        options = self.options
        self.env = options.env or default_env(trainer)
        board = Board(options, config_html(trainer.config.to_dict()))
        self._queue = UpdateQueue(options.queue_size)
        self._sender = Sender(
            board, self._queue, partial(Client, options.server, options.port, self.env, options.timeout),
            self.where, options.retry_max, preload=history_loader(board, trainer, self._kept_records),
        )
        self._sender.start()
        print(f"visdom: plotting to {self.where}/env/{self.env}", flush=True)

    @hookimpl
    def on_log(self, record: Mapping[str, Any]) -> None:
        if self._queue is not None and (self.options.losses or self.options.lr):
            self._queue.put(LogUpdate(record["epoch_progress"], record.get("losses"), record.get("lr")))

    @hookimpl
    def on_validation_end(self, trainer: Any, metrics: Mapping[str, float]) -> None:
        if self._queue is not None and self.options.validation and metrics:
            self._queue.put(ValidationUpdate(progress(trainer), dict(metrics)))

    @hookimpl
    def on_epoch_end(self, trainer: Any, epoch: int) -> None:
        every = self.options.images_every_epochs
        if self._queue is None or not every or (epoch + 1) % every:
            return
        newest = trainer.run_dir.latest_example()
        if newest is not None and newest != self._last_image:
            self._last_image = newest
            self._queue.put(ImageUpdate(newest[0], f"after epoch {epoch + 1}: {newest[0].name}"))

    @hookimpl
    def on_train_end(self) -> None:
        self._finish()

    @hookimpl
    def on_exception(self) -> None:
        self._finish()

    def _finish(self) -> None:
        if self._sender is None:
            return
        report = self._sender.stop(self.options.flush_timeout)
        self._sender = self._queue = None
        print(f"visdom: env '{self.env}' at {self.where}: {describe(report)}", flush=True)


def describe(report: Report) -> str:
    dropped = (f"{report.dropped} update{'s' if report.dropped != 1 else ''} dropped (queue full)"
               if report.dropped else "no updates dropped")
    if not report.stopped:
        return f"still sending at the flush deadline; {dropped}"
    if report.undelivered:
        return f"{report.undelivered} window(s) not delivered (server unreachable); {dropped}"
    return f"all plots delivered; {dropped}"


def server_url(server: str, port: int) -> str:
    base = server if "://" in server else f"http://{server}"
    return f"{base.rstrip('/')}:{port}"


def default_env(trainer: Any) -> str:
    """``<run name>_v<N>``: one env per run version, grouped by run name in visdom's env list."""
    return f"{trainer.config.run.name}_v{trainer.run_dir.path.name.removeprefix('version_')}"


def config_html(config: Mapping[str, Any]) -> str:
    return f"<pre>{html.escape(dump_yaml(config))}</pre>"


def progress(trainer: Any) -> float:
    """Fractional epoch now, on the same axis as the records' ``epoch_progress``."""
    total = trainer.num_batches()
    return trainer.epochs_done + (trainer.batch_in_epoch / total if total else 0.0)


def history_loader(board: Board, trainer: Any, kept: Optional[int]) -> Optional[Callable[[], None]]:
    """For a resumed run: load the curves from the ``kept`` records its metrics log held at the resume
    (in the sender's thread, off the training path).

    The windows are redrawn whole from these records, so points a killed run
    sent for steps after the checkpoint disappear; records the resumed run
    appends meanwhile arrive as live updates, not twice.
    """
    if kept is None:
        return None
    path, batches = trainer.run_dir.metrics_file, trainer.num_batches()
    return lambda: board.load_history(islice(read_metrics(path), kept), batches)
