"""What verifying a checkpoint costs, next to loading it.

    python benchmarks/checkpoint_verify.py [--mb 200] [--repeats 5] [--json OUT]

Writes one checkpoint of ``--mb`` MB of float32 weights with ``save_checkpoint``
into a temp folder, then times (median of ``--repeats``, file in the page
cache after the first read):

* ``crc32``: ``verify_container``, the check of a checkpoint without its
  sidecar (every zip member read and checked against its CRC-32);
* ``sha256``: the check against the sidecar (the file's SHA-256);
* ``torch.load``: loading it (``weights_only=True``, CPU), which both precede.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import torch

from nectargan_core.checkpoint import save_checkpoint, sha256_of, verify_container


def timed(action, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        path = save_checkpoint({"state": {"net": {"weight": torch.randn(args.mb * 250_000)}}}, Path(folder) / "c.pt")
        size = path.stat().st_size
        verify_container(path)  # into the page cache
        results = {
            "size_mb": size / 1e6,
            "crc32_s": timed(lambda: verify_container(path), args.repeats),
            "sha256_s": timed(lambda: sha256_of(path), args.repeats),
            "torch_load_s": timed(lambda: torch.load(path, map_location="cpu", weights_only=True), args.repeats),
        }
    for name in ("crc32", "sha256", "torch_load"):
        seconds = results[f"{name}_s"]
        print(f"{name:>10}: {seconds:.3f} s ({results['size_mb'] / seconds:.0f} MB/s)")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
