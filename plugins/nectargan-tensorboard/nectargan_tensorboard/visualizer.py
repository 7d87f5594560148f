"""The ``tensorboard`` visualizer: a run's losses, metrics, example grids and config as TensorBoard events.

Scalars are written against the global step, so per-interval losses, epoch
means and validation metrics share one x axis; example grids are written
against the number of epochs done, the ``N`` of ``examples/epochN.png``.

On resume (the ``on_resume`` hook) the writer appends a new event file to the
same folder, opened with ``purge_step = step + 1``: TensorBoard then drops the
scalars a killed run wrote after the checkpoint the run resumed from, which the
resumed run writes again. Events are flushed whenever a checkpoint is written,
so every point up to a checkpoint is on disk before a kill can lose it.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Iterator, Mapping

from PIL import Image
from tensorboard.compat.proto.summary_pb2 import Summary
from tensorboard.plugins.hparams import metadata as hparams_metadata
from tensorboard.plugins.hparams.plugin_data_pb2 import HParamsPluginData, SessionStartInfo
from tensorboard.plugins.text.summary_v2 import text_pb
from torch.utils.tensorboard import SummaryWriter

from nectargan_core import dump_yaml, hookimpl, repeated_terms

IMAGE_TAG = "examples"
CONFIG_TAG = "config"


def flatten(data: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Nested config as dotted keys: ``{"loop": {"epochs": 2}}`` gives ``("loop.epochs", 2)``.

    Hparams hold only scalars and strings, so lists become JSON text and nulls are left out.
    """
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            yield from flatten(value, f"{name}.")
        elif isinstance(value, (list, tuple)):
            yield name, json.dumps(value)
        elif value is not None:
            yield name, value


def hparams_summary(config: Mapping[str, Any]) -> Summary:
    """The config as the HParams dashboard's session start info.

    Built by hand rather than with ``SummaryWriter.add_hparams``, which writes
    to a new sub-run, files booleans as numbers and adds an experiment summary
    whose columns would hide every other run's keys (TensorBoard shows the
    first experiment summary it finds). Without one, TensorBoard derives the
    columns from all runs and offers every scalar tag as a metric.
    """
    info = SessionStartInfo(start_time_secs=time.time())
    for key, value in flatten(config):
        if isinstance(value, bool):
            info.hparams[key].bool_value = value
        elif isinstance(value, (int, float)):
            info.hparams[key].number_value = value
        else:
            info.hparams[key].string_value = str(value)
    content = hparams_metadata.create_summary_metadata(HParamsPluginData(session_start_info=info))
    return Summary(value=[Summary.Value(tag=hparams_metadata.SESSION_START_INFO_TAG, metadata=content,
                                        tensor=hparams_metadata.NULL_TENSOR)])


def image_summary(tag: str, path: Path) -> Summary:
    """An image summary holding the file's own encoded bytes: nothing is decoded or re-encoded."""
    with Image.open(path) as image:
        width, height = image.size
        channels = len(image.getbands())
    encoded = Summary.Image(height=height, width=width, colorspace=channels, encoded_image_string=path.read_bytes())
    return Summary(value=[Summary.Value(tag=tag, image=encoded)])


class TensorBoardVisualizer:
    """One run's event files; built per run from the ``visualizers.tensorboard`` options."""

    def __init__(self, log_dir: str | None = None, flush_secs: int = 30, details: bool = False,
                 images_every_epochs: int | None = 1) -> None:
        self.log_dir = log_dir
        self.flush_secs = flush_secs
        self.details = details
        self.images_every_epochs = images_every_epochs
        self.writer: Any = None
        #: (path, mtime) of the newest grid already in the events, so an unchanged grid is never added twice.
        self._last_grid: tuple[Path, int] | None = None
        #: After a resume: the first step the resumed run writes (events from that step on are purged).
        self._purge_step: int | None = None

    def _log_dir(self, trainer: Any) -> Path:
        run = trainer.run_dir.path
        if self.log_dir is None:
            return run / "tensorboard"
        return Path(self.log_dir.format(name=run.parent.name, version=run.name))

    def _scalars(self, values: Mapping[str, float], step: int, prefix: str = "") -> None:
        repeated = repeated_terms(values)  # D/gan_d when it is all of D/total: one tag, not two
        for key, value in values.items():
            if key not in repeated and (self.details or "." not in key):
                self.writer.add_scalar(prefix + key, value, step)

    @hookimpl
    def on_resume(self, step: int) -> None:
        self._purge_step = step + 1

    @hookimpl
    def on_train_start(self, trainer: Any) -> None:
        step = trainer.global_step
        self.writer = SummaryWriter(str(self._log_dir(trainer)), purge_step=self._purge_step,
                                    flush_secs=self.flush_secs)
        config = trainer.config.to_dict()
        # TensorBoard keeps a run's first hparams; the config text is written at every (re)start.
        self.writer.file_writer.add_summary(hparams_summary(config), step)
        # text_pb keeps the tag as given (SummaryWriter.add_text would append "/text_summary").
        self.writer.file_writer.add_summary(text_pb(CONFIG_TAG, f"```yaml\n{dump_yaml(config)}```"), step)
        # Grids already there are from before a resume: the earlier process added them.
        self._last_grid = trainer.run_dir.latest_example()

    @hookimpl
    def on_log(self, record: Mapping[str, Any]) -> None:
        self._scalars(record["losses"], record["step"])
        self._scalars(record["lr"], record["step"], "lr/")

    @hookimpl
    def on_validation_end(self, trainer: Any, metrics: Mapping[str, float]) -> None:
        for key, value in metrics.items():
            self.writer.add_scalar(key if key.startswith("val/") else f"val/{key}", value, trainer.global_step)

    @hookimpl
    def on_epoch_end(self, trainer: Any, metrics: Mapping[str, float]) -> None:
        # The validation metrics in here (val/...) were written by on_validation_end.
        means = {key: value for key, value in metrics.items() if not key.startswith("val/")}
        self._scalars(means, trainer.global_step, "epoch/")
        every = self.images_every_epochs
        if every and trainer.epochs_done % every == 0:
            newest = trainer.run_dir.latest_example()
            if newest is not None and newest != self._last_grid:
                self.writer.file_writer.add_summary(image_summary(IMAGE_TAG, newest[0]), trainer.epochs_done)
                self._last_grid = newest

    @hookimpl
    def on_save_checkpoint(self) -> None:
        if self.writer is not None:  # what a resume from this checkpoint keeps must be on disk
            self.writer.flush()

    @hookimpl
    def on_train_end(self) -> None:
        self._close()

    @hookimpl
    def on_exception(self) -> None:
        self._close()

    def _close(self) -> None:
        """Flush and close: the writer thread is a daemon, so events still queued at exit would be lost."""
        if self.writer is not None:
            self.writer.close()
            self.writer = None
