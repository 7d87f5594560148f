"""Helpers for the pix2pix data tests: real image files, written with PIL (and one PNG by hand)."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
from PIL import Image


def noise(size: int, channels: int = 3, seed: int = 0, width: int | None = None) -> np.ndarray:
    """A smooth-ish random uint8 image (H x W x C, or H x W for one channel)."""
    rng = np.random.default_rng(seed)
    image = rng.integers(0, 256, (size, width or size, channels), dtype=np.uint8)
    return image[..., 0] if channels == 1 else image


def save(path: Path, pixels: np.ndarray) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(pixels).save(path)
    return path


def save_aligned(path: Path, a: np.ndarray, b: np.ndarray) -> Path:
    return save(path, np.concatenate([a, b], axis=1))


def save_png16_rgb(path: Path, pixels: np.ndarray) -> Path:
    """A 16-bit RGB PNG, written by hand because PIL cannot write one."""
    height, width, _ = pixels.shape
    raw = b"".join(b"\x00" + pixels[y].astype(">u2").tobytes() for y in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 16, 2, 0, 0, 0)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw))
                     + chunk(b"IEND", b""))
    return path


def aligned_dataset(root: Path, counts: dict[str, int], size: int = 32, same: bool = False) -> Path:
    """``root/SPLIT/NNN.png`` aligned files; ``same`` makes B an exact copy of A."""
    for split, n in counts.items():
        for i in range(n):
            a = noise(size, seed=zlib.crc32(f"{split}/{i}/A".encode()))
            b = a if same else noise(size, seed=zlib.crc32(f"{split}/{i}/B".encode()))
            save_aligned(root / split / f"{i:03d}.png", a, b)
    return root


def folders_dataset(root: Path, counts: dict[str, int], size: int = 32) -> Path:
    """``root/SPLIT/A/NNN.png`` and ``root/SPLIT/B/NNN.jpg``."""
    for split, n in counts.items():
        for i in range(n):
            save(root / split / "A" / f"{i:03d}.png", noise(size, seed=i))
            save(root / split / "B" / f"{i:03d}.jpg", noise(size, seed=i + 1000))
    return root


def run_data_cli(*args: object) -> subprocess.CompletedProcess:
    """``nectargan data ARGS`` through the installed console script, in a real subprocess."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NECTARGAN_")}
    command = [str(Path(sys.executable).with_name("nectargan")), "data", *map(str, args)]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
