"""How many torch threads train fastest on this machine, now: for the quickstart scripts.

A training step shaped like the quickstarts' (convolutions down and up at
64x64, batch 4, forward, backward and Adam) is timed at one thread and at
every usable core, a few times each; the faster count is printed on stdout,
the timings on stderr. On a machine whose other cores are busy a second
thread mostly waits (steps 35-45x slower were seen with two under load), so
this is measured rather than assumed.

    threads=$(python examples/fastest_threads.py)
"""

from __future__ import annotations

import os
import statistics
import sys
import time

import torch
from torch import nn


def step_seconds(threads: int, repeats: int = 5) -> float:
    """The median seconds of a quickstart-like step with ``threads`` torch threads."""
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    net = nn.Sequential(
        nn.Conv2d(3, 32, 4, 2, 1), nn.LeakyReLU(0.2),
        nn.Conv2d(32, 64, 4, 2, 1), nn.BatchNorm2d(64), nn.LeakyReLU(0.2),
        nn.Conv2d(64, 128, 4, 2, 1), nn.BatchNorm2d(128), nn.ReLU(),
        nn.ConvTranspose2d(128, 64, 4, 2, 1), nn.BatchNorm2d(64), nn.ReLU(),
        nn.ConvTranspose2d(64, 32, 4, 2, 1), nn.BatchNorm2d(32), nn.ReLU(),
        nn.ConvTranspose2d(32, 3, 4, 2, 1), nn.Tanh())
    optimizer = torch.optim.Adam(net.parameters(), lr=2e-4)
    images = torch.randn(4, 3, 64, 64)
    times = []
    for round_ in range(repeats + 2):  # two warm-up steps
        start = time.perf_counter()
        loss = (net(images) - images).abs().mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if round_ >= 2:
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    timings = {threads: step_seconds(threads) for threads in sorted({1, cores})}
    best = min(timings, key=lambda threads: timings[threads])
    shown = ", ".join(f"{n} thread{'s' if n > 1 else ''} {seconds * 1000:.0f} ms" for n, seconds in timings.items())
    print(f"==> training with {best} torch thread{'s' if best > 1 else ''}, the fastest here now "
          f"(a quickstart-sized step: {shown})", file=sys.stderr)
    print(best)
    return 0


if __name__ == "__main__":
    sys.exit(main())
