"""CycleGAN step time: our trainer through the engine against the reference's ``optimize_parameters``.

Usage::

    python benchmarks/cyclegan_bench.py                        # CPU, 64x1, 5 timed steps per variant
    python benchmarks/cyclegan_bench.py --device cuda --size 256 --repeats 30

``benchmarks/gpu.py`` calls :func:`compare` for its section 6 (256x1 on the GPU).

The variants, alternated step by step after warm-up (medians; every timed step
ends with a device synchronisation):

- ``reference``: ``CycleGANModel.optimize_parameters`` written out (forward, G update
  with D_A and D_B frozen, then D_A and D_B on image-pool fakes; lsgan; the
  reference's default Adam, which is ``foreach`` on CUDA and single-tensor on the CPU);
- ``ours``: the CycleGAN trainer's ``train_step`` through the engine's per-step
  bookkeeping (:func:`run.engine_step`), default settings (``optim.implementation:
  auto``: fused Adam where the device has it);
- ``ours_reference_adam``: the same with the reference's Adam kernel, so the
  difference to ``reference`` is the framework's own cost.

All start from the same weights (the reference networks are copies of ours:
resnet_9blocks and the 70x70 PatchGAN with instance norm, the reference's
defaults), with pools of 50 and random inputs in [-1, 1] prepared before timing.
"""

from __future__ import annotations

import argparse
import copy
import itertools
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))

WARMUP = 3


class ReferencePool:
    """The reference's ImagePool: Python's ``random`` decides, stored images are swapped out."""

    def __init__(self, size: int) -> None:
        self.size, self.images = size, []

    def query(self, images: torch.Tensor) -> torch.Tensor:
        returned = []
        for image in images:
            image = torch.unsqueeze(image.data, 0)
            if len(self.images) < self.size:
                self.images.append(image)
                returned.append(image)
            elif random.uniform(0, 1) > 0.5:
                slot = random.randint(0, self.size - 1)
                returned.append(self.images[slot].clone())
                self.images[slot] = image
            else:
                returned.append(image)
        return torch.cat(returned, 0)


def reference_step(G_A: Any, G_B: Any, D_A: Any, D_B: Any) -> Callable[[dict], Any]:
    """``optimize_parameters`` of the reference's CycleGANModel (lambda_A = lambda_B = 10, identity 0.5)."""
    opt_g = torch.optim.Adam(itertools.chain(G_A.parameters(), G_B.parameters()), lr=2e-4, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(itertools.chain(D_A.parameters(), D_B.parameters()), lr=2e-4, betas=(0.5, 0.999))
    pool_a, pool_b = ReferencePool(50), ReferencePool(50)
    # GANLoss('lsgan'): its labels are buffers on the device, expanded to the prediction's shape
    device = next(G_A.parameters()).device
    labels = {True: torch.tensor(1.0, device=device), False: torch.tensor(0.0, device=device)}

    def gan(prediction: torch.Tensor, real: bool) -> torch.Tensor:
        return F.mse_loss(prediction, labels[real].expand_as(prediction))

    def requires_grad(nets: list, flag: bool) -> None:
        for net in nets:
            for param in net.parameters():
                param.requires_grad = flag

    def backward_d(net: Any, real: torch.Tensor, fake: torch.Tensor) -> torch.Tensor:
        loss = (gan(net(real), True) + gan(net(fake.detach()), False)) * 0.5
        loss.backward()
        return loss

    def step(batch: dict) -> Any:
        real_a, real_b = batch["A"], batch["B"]
        fake_b = G_A(real_a)
        rec_a = G_B(fake_b)
        fake_a = G_B(real_b)
        rec_b = G_A(fake_a)
        requires_grad([D_A, D_B], False)
        opt_g.zero_grad()
        loss_idt_a = F.l1_loss(G_A(real_b), real_b) * 10.0 * 0.5
        loss_idt_b = F.l1_loss(G_B(real_a), real_a) * 10.0 * 0.5
        loss_g = (gan(D_A(fake_b), True) + gan(D_B(fake_a), True) + F.l1_loss(rec_a, real_a) * 10.0
                  + F.l1_loss(rec_b, real_b) * 10.0 + loss_idt_a + loss_idt_b)
        loss_g.backward()
        opt_g.step()
        requires_grad([D_A, D_B], True)
        opt_d.zero_grad()
        loss_d_a = backward_d(D_A, real_b, pool_b.query(fake_b))
        loss_d_b = backward_d(D_B, real_a, pool_a.query(fake_a))
        opt_d.step()
        return loss_g.detach(), loss_d_a.detach(), loss_d_b.detach()

    return step


def make_trainer(device: str, size: int, batch: int, data: Path, out: Path, implementation: str) -> Any:
    """A prepared CycleGAN trainer with the reference's networks, started as the engine starts it."""
    from nectargan_core import Run

    config = {
        "trainer": "cyclegan",
        "run": {"output_dir": str(out), "device": device, "seed": 0},
        "loop": {"epochs": 1000},
        "data": {"root": str(data), "load_size": size, "crop_size": size, "batch_size": batch, "num_workers": 0},
        "optim": {"implementation": implementation},
        "precision": {"amp": "off"},
        "checkpoint": {"save_last": False, "every_epochs": None},
        "examples": {"every_epochs": None},
        "visualizers": [],
    }
    trainer = Run.create(config).trainer
    trainer._begin()
    return trainer


def compare(device: str, repeats: int, say: Callable[[str, str, str], None], *, size: int | None = None,
            batch: int = 1, warmup: int | None = None) -> dict[str, Any]:
    """Time the three variants at ``size`` x ``batch`` on ``device``; print with ``say(section, what, value)``.

    ``size`` and ``warmup`` default to 256 (the reference's crop) and 3 steps on CUDA, and to
    32 and 1 elsewhere, so that ``benchmarks/gpu.py --smoke-cpu`` checks this code quickly
    rather than timing a CPU; that check also runs on one thread (on a busy 2-core machine a
    second thread only waits: 14 s instead of 2 s a step at 32x1, measured under a load of 8).
    """
    cuda = torch.device(device).type == "cuda"
    smoke = not cuda and size is None
    size = size if size is not None else 256 if cuda else 32
    warmup = warmup if warmup is not None else WARMUP if cuda else 1
    threads = torch.get_num_threads()
    if smoke:
        torch.set_num_threads(1)
    try:
        with tempfile.TemporaryDirectory(prefix="nectargan-cyclegan-bench-") as tmp:
            return _compare(device, repeats, say, size, batch, warmup, Path(tmp))
    finally:
        torch.set_num_threads(threads)


def _compare(device: str, repeats: int, say: Callable[[str, str, str], None], size: int, batch: int,
             warmup: int, tmp: Path) -> dict[str, Any]:
    import run as bench  # benchmarks/run.py: the engine's per-step bookkeeping
    from nectargan_translate.data.synth import write_unpaired_synthetic

    data = tmp / "data"
    write_unpaired_synthetic(data, count=4, size=size, seed=0, val=0.25, test=0.0)  # the trainer needs one
    # the reference's default Adam: foreach on CUDA, the single-tensor loop on the CPU
    reference_adam = "foreach" if torch.device(device).type == "cuda" else "single"
    trainers = {"ours": make_trainer(device, size, batch, data, tmp / "ours", "auto"),
                "ours_reference_adam": make_trainer(device, size, batch, data, tmp / "ref_adam", reference_adam)}
    base = trainers["ours"]
    nets = [copy.deepcopy(base.stateful[name]) for name in ("G_A", "G_B", "D_A", "D_B")]
    for trainer in trainers.values():  # the same start for every variant
        for name, net in zip(("G_A", "G_B", "D_A", "D_B"), nets):
            trainer.stateful[name].load_state_dict(net.state_dict())
    generator = torch.Generator().manual_seed(1)
    batches = [{key: (torch.rand(batch, 3, size, size, generator=generator) * 2 - 1).to(device) for key in "AB"}
               for _ in range(4)]
    random.seed(0)
    reference = reference_step(*nets)
    steps = {name: bench.engine_step(trainer) for name, trainer in trainers.items()}
    variants: dict[str, Callable[[int], Any]] = {"reference": lambda i: reference(batches[i % len(batches)])}
    for name, step in steps.items():
        variants[name] = (lambda s: (lambda i: s(batches[i % len(batches)], i)))(step)

    def sync() -> None:
        if torch.device(device).type == "cuda":
            torch.cuda.synchronize()

    times: dict[str, list[float]] = {name: [] for name in variants}
    names = list(variants)
    for r in range(warmup + repeats):
        for name in names[r % len(names):] + names[:r % len(names)]:  # order rotated every round
            sync()
            start = time.perf_counter()
            variants[name](r)
            sync()
            if r >= warmup:
                times[name].append(time.perf_counter() - start)
    medians = {name: statistics.median(values) for name, values in times.items()}
    key = f"{size}x{batch}"
    result: dict[str, Any] = {"device": device, "size": size, "batch": batch, "repeats": repeats}
    for name, seconds in medians.items():
        ratio = seconds / medians["reference"]
        result[name] = {"s_per_step": seconds, "img_per_s": batch / seconds, "vs_reference": ratio}
        say("6", f"{key} {name}", f"{seconds * 1000:.1f} ms/step, {batch / seconds:.2f} img/s, "
            f"{ratio:.3f} x reference")
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    def say(section: str, what: str, value: str) -> None:
        print(f"  [{section}] {what}: {value}", flush=True)

    print(f"CycleGAN step, ours vs the reference, {args.size}x{args.batch} on {args.device} "
          f"({torch.get_num_threads()} threads)", flush=True)
    compare(args.device, args.repeats, say, size=args.size, batch=args.batch, warmup=WARMUP)
    return 0


if __name__ == "__main__":
    sys.exit(main())
