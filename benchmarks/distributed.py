"""Data-parallel throughput: 1 process vs N processes of ``nectargan train`` on this machine.

    python benchmarks/distributed.py [--size 128] [--steps 12] [--nproc 2] [--json OUT]

Trains the default pix2pix (unet_128 or unet_256 by ``--size``, patchgan_70,
fp32, CPU) on synthetic pairs, three ways, one after the other in one run:

* ``1 proc, batch 1``: the single-process baseline (all cores for one process);
* ``1 proc, batch N``: the same global batch as N processes, in one process;
* ``N procs, batch 1``: ``--nproc N`` (gloo), each process with cores/N threads.

Per-step times come from the metrics log (``elapsed`` of every step, logged
every step); the first ``--warmup`` steps are dropped and the median is used.
Images/s = global batch / median step time. Ratios are printed against the
single-process runs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def nectargan() -> list[str]:
    exe = Path(sys.executable).with_name("nectargan")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "nectargan_core"]


def step_times(metrics: Path, warmup: int) -> list[float]:
    records = [json.loads(line) for line in metrics.read_text().splitlines()]
    elapsed = [r["elapsed"] for r in records if r["kind"] == "train"]
    deltas = [b - a for a, b in zip(elapsed, elapsed[1:])]
    return deltas[warmup:]


def train(root: Path, data: Path, label: str, size: int, steps: int, batch: int, nproc: int) -> Path:
    out = root / label.replace(" ", "_").replace(",", "")
    settings = [f"data.root={data}", f"data.load_size={size}", f"data.crop_size={size}", "data.num_workers=0",
                f"data.batch_size={batch}", f"models.generator.name=unet_{size}", "run.device=cpu",
                f"run.output_dir={out}", "visualizers=[]", "loop.log_every_steps=1", f"loop.max_steps={steps}",
                "loop.val_every_epochs=null", "examples.every_epochs=null", "checkpoint.every_epochs=null",
                "checkpoint.save_last=false"]
    command = [*nectargan(), "train", "--trainer", "pix2pix", *(a for s in settings for a in ("--set", s))]
    if nproc > 1:
        command += ["--nproc", str(nproc)]
    env = dict(os.environ)
    if nproc > 1:
        env["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // nproc))
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"{label}: training failed:\n{done.stderr}")
    return out / "run" / "version_0" / "metrics.jsonl"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=128, choices=(128, 256))
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        data = root / "data"
        count = str(max(16, 2 * args.nproc * args.steps))
        made = subprocess.run([*nectargan(), "data", "synth", str(data), "--count", count, "--size",
                               str(args.size), "--val", "0.1", "--test", "0"], capture_output=True, text=True)
        if made.returncode:
            sys.exit(made.stderr)
        runs = [("1 proc, batch 1", 1, 1), (f"1 proc, batch {args.nproc}", args.nproc, 1),
                (f"{args.nproc} procs, batch 1", 1, args.nproc)]
        results = {}
        for label, batch, nproc in runs:
            started = time.perf_counter()
            times = step_times(train(root, data, label, args.size, args.steps, batch, nproc), args.warmup)
            median = statistics.median(times)
            results[label] = {"global_batch": batch * nproc, "median_step_s": median,
                              "images_per_s": batch * nproc / median, "steps_timed": len(times),
                              "wall_s": time.perf_counter() - started}
    base = results["1 proc, batch 1"]["images_per_s"]
    same = results[f"1 proc, batch {args.nproc}"]["images_per_s"]
    print(f"pix2pix unet_{args.size} + patchgan_70, {args.size}x{args.size}, fp32, CPU, {os.cpu_count()} cores; "
          f"medians of {args.steps - args.warmup - 1} steps after {args.warmup} warm-up steps")
    print(f"{'run':<20} {'global batch':>12} {'step s':>8} {'images/s':>9} {'vs 1x1':>7} {'vs same batch':>13}")
    for label, row in results.items():
        print(f"{label:<20} {row['global_batch']:>12} {row['median_step_s']:>8.3f} {row['images_per_s']:>9.2f} "
              f"{row['images_per_s'] / base:>7.2f} {row['images_per_s'] / same:>13.2f}")
    if args.json:
        args.json.write_text(json.dumps({"size": args.size, "nproc": args.nproc, "results": results}, indent=2))


if __name__ == "__main__":
    main()
