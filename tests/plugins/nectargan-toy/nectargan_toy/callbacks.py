"""Callbacks of the toy plugin: a hook recorder and a stateful counter."""

from __future__ import annotations

import json

from nectargan_core import hookimpl


class Recorder:
    """Appends ``{"hook": name, ...}`` to a JSON-lines file for every run hook."""

    def __init__(self, path: str) -> None:
        self.path = path

    def _write(self, hook: str, **fields) -> None:
        with open(self.path, "a") as handle:
            handle.write(json.dumps({"hook": hook, **fields}) + "\n")

    @hookimpl
    def on_train_start(self, trainer):
        self._write("on_train_start", step=trainer.global_step)

    @hookimpl
    def on_epoch_start(self, epoch):
        self._write("on_epoch_start", epoch=epoch)

    @hookimpl(hookwrapper=True)
    def train_step(self, batch_idx):
        self._write("train_step", batch_idx=batch_idx)
        yield

    @hookimpl
    def on_train_batch_end(self, batch_idx):
        self._write("on_train_batch_end", batch_idx=batch_idx)

    @hookimpl
    def on_log(self, record):
        self._write("on_log", step=record["step"])

    @hookimpl
    def on_validation_start(self, epoch):
        self._write("on_validation_start", epoch=epoch)

    @hookimpl
    def on_validation_end(self, epoch, metrics):
        self._write("on_validation_end", epoch=epoch, metrics=sorted(metrics))

    @hookimpl
    def on_epoch_end(self, epoch, metrics):
        self._write("on_epoch_end", epoch=epoch)

    @hookimpl
    def on_save_checkpoint(self, checkpoint):
        self._write("on_save_checkpoint", step=checkpoint["global_step"])

    @hookimpl
    def on_load_checkpoint(self, checkpoint):
        self._write("on_load_checkpoint", step=checkpoint["global_step"])

    @hookimpl
    def on_train_end(self):
        self._write("on_train_end")

    @hookimpl
    def on_exception(self, exception):
        self._write("on_exception", error=str(exception))


class Counter:
    """Counts training steps; the count survives resume through checkpoint state."""

    def __init__(self) -> None:
        self.steps = 0
        self.restored = None

    @hookimpl
    def on_train_batch_end(self):
        self.steps += 1

    @hookimpl
    def on_save_checkpoint(self, checkpoint):
        checkpoint["plugins"]["counter"] = {"steps": self.steps}

    @hookimpl
    def on_load_checkpoint(self, checkpoint):
        self.restored = checkpoint["plugins"]["counter"]["steps"]
        self.steps = self.restored
