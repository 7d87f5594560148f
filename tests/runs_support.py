"""Helpers for the run-inspection tests: real toy runs, fake example grids (the browser is in pages.py)."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path
from typing import Any

from nectargan_core import Run, hookimpl
from pages import Tags, chromium, rendered_dom  # noqa: F401 - the report tests take them from here

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def toy_config(output_dir: Path, name: str = "toy", epochs: int = 3, **toy: Any) -> dict[str, Any]:
    """A run of the toy trainer that takes a fraction of a second: 4 steps per epoch, a log per step."""
    return {
        "trainer": "toy",
        "run": {"output_dir": str(output_dir), "name": name, "device": "cpu"},
        "loop": {"epochs": epochs, "log_every_steps": 1},
        "checkpoint": {"best_metric": "val/mse"},
        "toy": {"samples": 16, "batch_size": 4, "val_samples": 4, **toy},
        "visualizers": [],
    }


class GanLosses:
    """Turns the toy trainer's losses into a GAN's: G/ and D/ terms plus dotted detail keys."""

    @hookimpl(wrapper=True)
    def train_step(self):
        losses = yield
        loss, noise = losses["loss"], losses["noise"]
        return {"G/gan": loss, "G/l1": loss / 2, "G/l1.raw": loss * 5,
                "D/real": noise, "D/fake": 1 - noise, "D/gan_d.weight": 1.0}


class GanTotals:
    """Losses as the pix2pix trainer logs them: each network's terms and total (D's total is its one term)."""

    @hookimpl(wrapper=True)
    def train_step(self):
        losses = yield
        loss, noise = losses["loss"], losses["noise"]
        return {"D/gan_d": noise, "D/total": noise, "D/gan_d.weight": 0.5,
                "G/gan": loss, "G/l1": loss / 2, "G/total": loss * 1.5}


class StopAt:
    """Stops a run at a step the way Ctrl-C does (graceful, status 'interrupted')."""

    def __init__(self, step: int) -> None:
        self.step = step

    @hookimpl
    def on_train_batch_end(self, trainer):
        if trainer.global_step == self.step:
            trainer.request_stop("stopped by test", interrupted=True)


def make_run(output_dir: Path, *plugins: Any, **options: Any) -> Path:
    """Train a toy run to the end and return its directory."""
    run = Run.create(toy_config(output_dir, **options), plugins=plugins)
    run.fit()
    return run.dir


def write_png(path: Path, width: int, height: int, rgb: tuple[int, int, int] = (200, 80, 40)) -> bytes:
    """A valid one-colour RGB PNG (so a browser can decode it); returns its bytes."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + bytes(rgb) * width for _ in range(height))
    png = (PNG_SIGNATURE + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
           + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(png)
    return png


def png_size(data: bytes) -> tuple[int, int]:
    assert data.startswith(PNG_SIGNATURE)
    return struct.unpack(">II", data[16:24])
