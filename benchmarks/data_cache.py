"""Training batches per second with ``data.cache: off`` (workers decode every epoch) and ``memory`` (decoded once).

``python benchmarks/data_cache.py [--count 200] [--size 256] [--batch 16] [--workers 2] [--epochs 3]
[--device cpu]``

Writes ``count`` synthetic pairs (``nectargan data synth``, aligned PNGs of
``size x size`` per side), then for each cache setting builds the paired
training loader as the trainer does (``build_dataloader(train_set,
device=...)``, load_size ``size + size // 8``, crop ``size``, hflip) and
iterates ``epochs`` epochs, touching every batch's A and B on ``device``.
Prints the time to build the loader (the cache decodes the split there), each
epoch's images per second, and the steady rate (epochs after the first).
This is what ``auto`` on a CPU run was chosen by (see the translate data page).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch

from nectargan_translate.data.loader import build_dataloader
from nectargan_translate.data.paired import PairedDataset
from nectargan_translate.data.synth import write_synthetic


def measure(root: Path, cache: str, args: argparse.Namespace) -> None:
    options = {"root": str(root), "load_size": args.size + args.size // 8, "crop_size": args.size,
               "batch_size": args.batch, "num_workers": args.workers, "cache": cache}
    device = torch.device(args.device)
    started = time.perf_counter()
    loader = build_dataloader(PairedDataset(options, seed=0), device=device)
    built = time.perf_counter() - started
    rates = []
    for epoch in range(args.epochs):
        loader.sampler.set_epoch(epoch)
        started, images = time.perf_counter(), 0
        for batch in loader:
            a, b = batch["A"].to(device), batch["B"].to(device)
            images += a.shape[0]
            float(a[0, 0, 0, 0] + b[0, 0, 0, 0])  # waits for the batch, as a step would
        rates.append(images / (time.perf_counter() - started))
    steady = sum(rates[1:]) / max(1, len(rates) - 1)
    print(f"cache {cache:<6} build {built:6.2f} s; img/s per epoch " + " ".join(f"{r:7.1f}" for r in rates)
          + f"; steady {steady:7.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--caches", default="off,memory", help="comma-separated data.cache values, timed in turn")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder) / "data"
        write_synthetic(root, count=args.count, size=args.size, seed=0, val=0.0, test=0.0)
        for cache in args.caches.split(","):
            measure(root, cache, args)


if __name__ == "__main__":
    main()
