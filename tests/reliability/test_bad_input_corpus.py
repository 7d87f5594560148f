"""A corpus of bad inputs, generated at run time (nothing binary in the repo).

Bad images go through ``nectargan data check`` as a real subprocess with a
timeout (a decompression bomb must neither allocate nor hang); bad configs go
through ``nectargan config validate``. Each must give clear lines, a non-zero
exit and no traceback.
"""

from __future__ import annotations

import io
import struct
import zlib
from pathlib import Path

import pytest
from PIL import Image

from support import run_cli


def png_bytes(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def huge_png_header(width: int = 100_000, height: int = 100_000) -> bytes:
    """A valid PNG signature and IHDR claiming ``width`` x ``height``, with a tiny body."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0" * 64)) + chunk(b"IEND", b"")


def jpeg_bytes() -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (64, 32), (10, 200, 30)).save(buffer, format="JPEG")
    return buffer.getvalue()


#: file name -> (bytes, a fragment the report line about it must contain)
BAD_FILES = {
    "huge.png": (huge_png_header(), "exceeds limit"),
    "zero.png": (b"", "cannot read image"),
    "text.jpg": (b"just some text, not a JPEG\n", "cannot read image"),
    "truncated.png": (png_bytes(Image.new("RGB", (64, 32), (1, 2, 3)).resize((64, 32)))[:-30], "cannot read image"),
    "truncated.jpg": (jpeg_bytes()[: len(jpeg_bytes()) // 2], "cannot read image"),
    "odd.png": (png_bytes(Image.new("RGB", (33, 16))), "width 33 is odd"),
}


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> tuple[int, str, Path]:
    root = tmp_path_factory.mktemp("corpus")
    train = root / "train"
    train.mkdir()
    for name, (data, _) in BAD_FILES.items():
        (train / name).write_bytes(data)
    # Handled, not errors: palette and 16-bit images are converted on load.
    Image.new("P", (64, 32), 3).save(train / "palette.png")
    Image.new("I;16", (64, 32), 40000).save(train / "sixteen.png")
    result = run_cli("data", "check", str(root), timeout=60)
    return result.returncode, result.stdout + result.stderr, train


def test_corpus_fails_with_no_traceback(report):
    code, output, _ = report
    assert code != 0 and "Traceback" not in output, output


@pytest.mark.parametrize("name", list(BAD_FILES))
def test_each_bad_file_is_named_with_its_problem(report, name):
    _, output, train = report
    lines = [line for line in output.splitlines() if str(train / name) in line]
    assert lines and BAD_FILES[name][1] in lines[0], output


@pytest.mark.parametrize("name", ["palette.png", "sixteen.png"])
def test_palette_and_16_bit_images_are_handled(report, name):
    _, output, train = report
    assert str(train / name) not in output, output


@pytest.mark.parametrize("yaml_text,fragment", [
    ("loop: {epochs: many}\n", "loop.epochs"),
    ("loop: {epochs: -3}\n", "loop.epochs"),
    ("loop: {log_every_steps: 0}\n", "loop.log_every_steps"),
    ("loop: {nonfinite: ignore}\n", "loop.nonfinite"),
    ("checkpoint: {keep_last: 0}\n", "checkpoint.keep_last"),
    ("run: {seed: [1, 2]}\n", "run.seed"),
    ("loop: {epochz: 3}\n", "did you mean 'epochs'"),
    ("trainer: no_such_trainer\n", "no_such_trainer"),
    ("visualizers: [no_such_visualizer]\n", "no_such_visualizer"),
    ("- a list\n- not a mapping\n", "mapping"),
    ("loop: {epochs: 1\n", "yaml"),
])
def test_bad_config_is_one_line(tmp_path, yaml_text, fragment):
    path = tmp_path / "bad.yaml"
    path.write_text(yaml_text)
    result = run_cli("config", "validate", str(path), timeout=60)
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert result.returncode != 0 and "Traceback" not in result.stderr, result.stderr
    assert len(errors) == 1 and fragment.lower() in errors[0].lower(), result.stderr
