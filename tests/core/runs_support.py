"""Helpers for the run-inspection tests: real toy runs, fake example grids, a headless browser."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import zlib
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from nectargan_core import Run, hookimpl

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]
#: Appended to a copy of a page: after load, every <img> says whether it decoded, and its pixel size.
MARK_IMAGES = """<script>
window.addEventListener("load", () => {
  for (const image of document.images) {
    image.dataset.loaded = image.complete && image.naturalWidth > 0 ? "yes" : "no";
    image.dataset.natural = image.naturalWidth + "x" + image.naturalHeight;
  }
});
</script>"""


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


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not on PATH; .ci/run installs it")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    return found


def rendered_dom(page: Path, scratch: Path) -> str:
    """The DOM after headless Chromium loaded a copy of ``page`` with MARK_IMAGES added."""
    probe = scratch / f"rendered-{page.name}"
    probe.write_text(page.read_text(encoding="utf-8").replace("</body>", MARK_IMAGES + "</body>"),
                     encoding="utf-8")
    profile = scratch / "chromium-profile"
    profile.mkdir(exist_ok=True)
    result = subprocess.run([chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--dump-dom",
                             probe.as_uri()], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


class Tags(HTMLParser):
    """Every start tag of a document with its attributes, and the document's text."""

    def __init__(self, document: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.feed(document)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def of(self, name: str) -> list[dict[str, str | None]]:
        return [attrs for tag, attrs in self.tags if tag == name]
