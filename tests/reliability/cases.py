"""Generators of fault cases for the reliability tests: nothing here is a fixed list of files.

* :func:`image_bytes` makes small real PNG (8 and 16 bit), JPEG and TIFF files;
  :func:`mutants` derives seeded byte-level mutants of them (bit flips, random
  bytes, runs of garbage, cuts, insertions) and, for PNG, mutants whose chunk
  checksums are recomputed, so that the damage reaches the decoder itself
  instead of stopping at the checksum check.
* :func:`signal_plan` draws (signal, step, workers) stops from a seed.

Every generator takes a seed: the default test run takes a small seeded
sample, the ``slow`` series a larger one, and a failure names the seed and
the mutant so that it can be regenerated.
"""

from __future__ import annotations

import io
import random
import struct
import zlib
from dataclasses import dataclass
from typing import Iterator

import numpy as np
from PIL import Image

FORMATS = ("png", "png16", "jpeg", "tiff")
SUFFIX = {"png": ".png", "png16": ".png", "jpeg": ".jpg", "tiff": ".tif"}
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def image_bytes(kind: str, width: int = 32, height: int = 16, seed: int = 0) -> bytes:
    """A small real image file (an aligned A|B pair when ``width == 2 * height``) as bytes."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width]
    base = np.stack([x * 255 // max(width - 1, 1), y * 255 // max(height - 1, 1), (x + y) % 256], -1)
    pixels = np.clip(base + rng.integers(-20, 20, base.shape), 0, 255).astype(np.uint8)
    buffer = io.BytesIO()
    if kind == "png":
        Image.fromarray(pixels).save(buffer, format="PNG")
    elif kind == "png16":
        return png16(pixels.astype(np.uint16) * 257 + rng.integers(0, 200, pixels.shape).astype(np.uint16))
    elif kind == "jpeg":
        Image.fromarray(pixels).save(buffer, format="JPEG", quality=90)
    elif kind == "tiff":
        Image.fromarray(pixels).save(buffer, format="TIFF", compression="tiff_adobe_deflate")
    else:
        raise ValueError(kind)
    return buffer.getvalue()


def png16(pixels: np.ndarray) -> bytes:
    """A 16-bit RGB PNG (Pillow cannot write one) with Paeth-filtered rows."""
    height, width, _ = pixels.shape
    raw = pixels.astype(">u2").tobytes()
    stride = width * 6
    rows = []
    previous = bytearray(stride)
    for row in range(height):
        line = raw[row * stride:(row + 1) * stride]
        filtered = bytearray(stride)
        for i in range(stride):
            left = line[i - 6] if i >= 6 else 0
            up = previous[i]
            corner = previous[i - 6] if i >= 6 else 0
            p = left + up - corner
            pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
            predictor = left if pa <= pb and pa <= pc else up if pb <= pc else corner
            filtered[i] = (line[i] - predictor) % 256
        rows.append(b"\x04" + bytes(filtered))
        previous = bytearray(line)
    return (PNG_SIGNATURE + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 16, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(b"".join(rows))) + chunk(b"IEND", b""))


def chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png_chunks(data: bytes) -> list[tuple[int, bytes, int]]:
    """``(offset, type, length)`` of every chunk of a well-formed PNG."""
    found, offset = [], len(PNG_SIGNATURE)
    while offset + 8 <= len(data):
        length, kind = struct.unpack(">I4s", data[offset:offset + 8])
        found.append((offset, kind, length))
        offset += 12 + length
    return found


def fix_png_checksums(data: bytearray) -> bytearray:
    """Recompute every chunk CRC that still lies inside the file (a mutant that passes the checksum check)."""
    offset = len(PNG_SIGNATURE)
    while offset + 12 <= len(data):
        length = struct.unpack(">I", data[offset:offset + 4])[0]
        stop = offset + 8 + length
        if stop + 4 > len(data):
            break
        data[stop:stop + 4] = struct.pack(">I", zlib.crc32(bytes(data[offset + 4:stop])))
        offset = stop + 4
    return data


@dataclass(frozen=True)
class Mutant:
    """One damaged file: its bytes and how it was made (shown when a test fails)."""

    kind: str
    name: str
    data: bytes

    @property
    def suffix(self) -> str:
        return SUFFIX[self.kind]


def mutants(kind: str, count: int, seed: int, *, original: bytes | None = None) -> Iterator[Mutant]:
    """``count`` seeded byte-level mutants of an image of ``kind``.

    Operations: flip one bit, set one byte, overwrite a run of 2-16 random
    bytes, cut the file short, insert or delete a few bytes. Mutations land in
    the image data most of the time (for PNG inside an IDAT chunk, where one
    damaged byte crashed torchvision's decoder), otherwise anywhere after the
    first bytes. Every third PNG mutant gets its checksums recomputed.
    """
    rng = random.Random(f"{kind}-{seed}")
    source = original if original is not None else image_bytes(kind, seed=seed)
    if kind.startswith("png"):
        idat = [(offset + 8, offset + 8 + length) for offset, name, length in png_chunks(source) if name == b"IDAT"]
        data_start, data_end = idat[0][0], idat[-1][1]
    else:
        data_start, data_end = min(len(source) // 4, 64), len(source) - 2
    for index in range(count):
        data = bytearray(source)
        operation = rng.choice(["bit", "byte", "run", "cut", "insert", "delete"])
        inside = rng.random() < 0.75
        position = rng.randrange(data_start, data_end) if inside else rng.randrange(4, len(data))
        if operation == "bit":
            data[position] ^= 1 << rng.randrange(8)
        elif operation == "byte":
            data[position] = rng.randrange(256)
        elif operation == "run":
            run = rng.randrange(2, 17)
            data[position:position + run] = bytes(rng.randrange(256) for _ in range(run))
        elif operation == "cut":
            del data[position:]
        elif operation == "insert":
            data[position:position] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 9)))
        else:
            del data[position:position + rng.randrange(1, 9)]
        fixed = kind.startswith("png") and index % 3 == 2
        if fixed:
            fix_png_checksums(data)
        where = "data" if inside else "any"
        yield Mutant(kind, f"{kind}-s{seed}-{index:03d}-{operation}-{where}{'-crcfixed' if fixed else ''}",
                     bytes(data))


def signal_plan(count: int, seed: int, *, max_step: int = 6) -> list[tuple[str, int, int]]:
    """``count`` seeded stops: (signal name, the step after which it is sent, DataLoader workers 0 or 2).

    The first four cover both signals with 2 and with 0 workers (2 first: the
    case that failed), at drawn steps; the rest are drawn entirely.
    """
    rng = random.Random(f"signals-{seed}")
    plan = [(name, rng.randrange(1, max_step + 1), workers)
            for workers in (2, 0) for name in ("SIGTERM", "SIGINT")]
    while len(plan) < count:
        plan.append((rng.choice(["SIGTERM", "SIGINT"]), rng.randrange(1, max_step + 1), rng.choice([0, 2])))
    return plan[:count]
