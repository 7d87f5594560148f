"""Image decode speed: ``read_image`` (Pillow) against torchvision's native decoders.

``python benchmarks/decode.py [--size 256] [--count 64] [--repeats 7]``

Writes ``count`` RGB images of ``size x size`` as PNG (zlib level 6, Pillow's
default) and as JPEG (quality 90), with photo-like content (smooth gradients,
shapes, mild noise), then times decoding every file to a float32
``3 x H x W`` tensor in [0, 1] three ways, alternated round by round:

* ``read_image``: what the dataset, ``test`` and ``predict`` use (Pillow, the
  PNG chunk checksums, EXIF orientation);
* ``torchvision``: ``torchvision.io.decode_image`` on the file's bytes, then
  the same scaling (what ``read_image`` did before it stopped handing file
  bytes to torchvision, whose PNG decoder crashes the process on corrupt data);
* ``pil_only``: ``Image.open(path)`` + ``numpy.asarray`` + the same scaling,
  the floor for any Pillow-based reader.

Prints the median time per image of each (and the ratio to torchvision) over
``repeats`` rounds.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import warnings
from pathlib import Path
from typing import Callable

import numpy as np
import torch
from PIL import Image, ImageDraw

from nectargan_translate.data.decode import read_image


def photo_like(size: int, seed: int) -> Image.Image:
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:size, 0:size] / size
    base = np.stack([x, y, (x + y) / 2], -1) * rng.uniform(80, 200, 3)
    image = Image.fromarray(np.clip(base + rng.normal(0, 6, base.shape), 0, 255).astype(np.uint8))
    draw = ImageDraw.Draw(image)
    for _ in range(6):
        x0, y0 = rng.integers(0, size - size // 4, 2)
        side = int(rng.integers(size // 10, size // 4))
        draw.ellipse([int(x0), int(y0), int(x0) + side, int(y0) + side], fill=tuple(int(v) for v in rng.integers(0, 255, 3)))
    return image


def torchvision_read(path: Path) -> torch.Tensor:
    from torchvision.io import ImageReadMode, decode_image, read_file

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return decode_image(read_file(str(path)), mode=ImageReadMode.UNCHANGED).to(torch.float32) / 255.0


def pil_only(path: Path) -> torch.Tensor:
    with Image.open(path) as image:
        array = np.asarray(image)
    return torch.from_numpy(array).permute(2, 0, 1).contiguous().to(torch.float32) / 255.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--count", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    torch.set_num_threads(1)  # as in a DataLoader worker
    readers: dict[str, Callable[[Path], torch.Tensor]] = {
        "read_image": read_image, "torchvision": torchvision_read, "pil_only": pil_only}
    with tempfile.TemporaryDirectory() as tmp:
        for kind, options in (("png", {}), ("jpg", {"quality": 90})):
            files = []
            for index in range(args.count):
                path = Path(tmp) / f"{index}.{kind}"
                photo_like(args.size, index).save(path, **options)
                files.append(path)
            for name, reader in readers.items():  # same pixels from every reader
                assert torch.equal(reader(files[0]), read_image(files[0])), name
            times: dict[str, list[float]] = {name: [] for name in readers}
            for _ in range(args.repeats):
                for name, reader in readers.items():
                    start = time.perf_counter()
                    for path in files:
                        reader(path)
                    times[name].append((time.perf_counter() - start) / len(files))
            size_kb = statistics.mean(p.stat().st_size for p in files) / 1024
            base = statistics.median(times["torchvision"])
            for name, values in times.items():
                median = statistics.median(values)
                print(f"{kind} {args.size}x{args.size} ({size_kb:.0f} KB): {name:12s} {median * 1e3:7.3f} ms/image"
                      f"  ({median / base:.2f}x torchvision)")


if __name__ == "__main__":
    main()
