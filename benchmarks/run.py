"""NectarGAN performance benchmarks (issue 6), side by side and alternated in one process.

Usage::

    python benchmarks/run.py            # reduced default: every section and ratio (< 10 min on the 2-core VM)
    python benchmarks/run.py --full     # + 256x4, more repeats, compile and inference at 256 as well
    python benchmarks/run.py --json results.json

Sections (numbered as in the issue):

1. framework overhead: our hooked train_step through the engine vs a plain PyTorch loop
   with the same networks (copied initial state), losses, Adam settings and inputs;
2. against the reference: a faithful reference step (default single-tensor Adam, fp32,
   contiguous) vs our trainer with its default settings; the losses of both after 20 steps
   from the same init and data; single levers (Adam kernel, channels_last) at 256x1;
3. bf16 autocast (+ channels_last) vs fp32 on CPU: time ratio at 128x1 (few samples: bf16 is
   far slower than fp32 on a CPU without oneDNN bf16) and G/l1 curves over 20 synthetic steps;
4. torch.compile (``precision.compile: default``, inductor) vs eager: steady-state ratio and the
   (cold) compile time (:mod:`more`);
5. input pipeline: images/s the loader delivers (workers 0, 1, 2) vs what training consumes;
6. start-up: ``nectargan --help`` and ``nectargan plugins list`` vs importing click, pluggy,
   pydantic, and whether torch is imported;
7. inference: ``predict`` on a folder vs a bare ``model(x)`` loop on the same tensors (batch 1 and
   8), the ``nectargan predict`` command's wall time, ONNX Runtime vs PyTorch eager (:mod:`more`);
8. memory: peak RSS of fresh processes, ours at 256x1 vs the reference step, and its growth with
   epochs and with the dataset (:mod:`more`).

Every compared variant runs alternately, step by step, after warm-up; figures are medians.
Timings use random inputs in [-1, 1] prepared before timing (no data loading in the step).
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import torch
import torch.nn.functional as F

from nectargan_core import Run
from nectargan_translate.data.synth import write_synthetic

sys.path.insert(0, str(Path(__file__).resolve().parent))
import more  # noqa: E402  (sections 4, 7 and 8)

WARMUP = 3
TMP = Path(tempfile.mkdtemp(prefix="nectargan-bench-"))
RESULTS: dict[str, Any] = {}
ROWS: list[tuple[str, str, str]] = []


def row(section: str, what: str, value: str) -> None:
    ROWS.append((section, what, value))
    print(f"  [{section}] {what}: {value}", flush=True)


# -- set-up --------------------------------------------------------------------------------
_SYNTH: dict[int, Path] = {}


def synth(size: int, count: int = 32) -> Path:
    if size not in _SYNTH:
        root = TMP / f"synth{size}"
        write_synthetic(root, count=count, size=size, seed=0, val=0.2, test=0.1)
        _SYNTH[size] = root
    return _SYNTH[size]


_RUNS = 0


def make_trainer(size: int, batch: int, *, generator: dict | None = None, data: dict | None = None,
                 **sections: Any) -> Any:
    """A prepared pix2pix trainer (unet_<size> + patchgan_70, batch norm) with the given overrides."""
    global _RUNS
    _RUNS += 1
    cfg: dict[str, Any] = {
        "trainer": "pix2pix",
        "run": {"output_dir": str(TMP / f"runs{_RUNS}"), "device": "cpu", "seed": 0},
        "loop": {"epochs": 1000},
        "data": {"root": str(synth(64)), "load_size": size, "crop_size": size, "batch_size": batch,
                 "num_workers": 0, **(data or {})},
        "models": {"generator": generator or {"name": f"unet_{size}", "norm": "batch"},
                   "discriminator": {"name": "patchgan_70", "norm": "batch"}},
        "checkpoint": {"save_last": False, "every_epochs": None},
        "examples": {"every_epochs": None},
        "visualizers": [],
    }
    for key, value in sections.items():
        cfg[key] = {**cfg.get(key, {}), **value}
    trainer = Run.create(cfg).trainer
    trainer._begin()  # prepare() + the engine's start (status file, on_train_start)
    return trainer


def engine_step(trainer: Any) -> Callable[[dict, int], Any]:
    """One step exactly as the engine's epoch loop does it (hooked train_step and bookkeeping)."""
    log_every = trainer.config.loop.log_every_steps
    total = trainer.num_batches() or 1

    def step(batch: dict, batch_idx: int) -> Any:
        batch_idx %= total  # the index within the (synthetic) epoch, as the engine passes it
        trainer.prepare_step(batch, batch_idx)
        outputs = trainer.step_graphs(batch, batch_idx)  # eager, or a replayed CUDA graph
        trainer.global_step += 1
        trainer.batch_in_epoch += 1
        trainer._accumulate(outputs)
        trainer.hook.on_train_batch_end(trainer=trainer, outputs=outputs, batch=batch, batch_idx=batch_idx)
        if trainer.global_step % log_every == 0:
            trainer._log_interval()
        return outputs
    return step


def batches(size: int, batch: int, n: int = 4, seed: int = 1) -> list[dict]:
    g = torch.Generator().manual_seed(seed)
    return [{"A": torch.rand(batch, 3, size, size, generator=g) * 2 - 1,
             "B": torch.rand(batch, 3, size, size, generator=g) * 2 - 1} for _ in range(n)]


def requires_grad(module: torch.nn.Module, flag: bool) -> None:
    for p in module.parameters():
        p.requires_grad_(flag)


def plain_step_fn(G: torch.nn.Module, D: torch.nn.Module, opt_g: Any, opt_d: Any,
                  channels_last: bool = False) -> Callable[[dict, int], Any]:
    """A plain hand-written pix2pix step: BCEWithLogits GAN + 100 * L1, D frozen for G's update."""
    fmt = torch.channels_last if channels_last else torch.contiguous_format

    def step(batch: dict, batch_idx: int) -> Any:
        a = batch["A"].contiguous(memory_format=fmt)
        b = batch["B"].contiguous(memory_format=fmt)
        fake = G(a)
        requires_grad(D, True)
        pf = D(torch.cat([a, fake.detach()], 1))
        pr = D(torch.cat([a, b], 1))
        loss_d = 0.5 * (F.binary_cross_entropy_with_logits(pf, torch.zeros_like(pf))
                        + F.binary_cross_entropy_with_logits(pr, torch.ones_like(pr)))
        loss_d.backward()
        opt_d.step()
        opt_d.zero_grad(set_to_none=True)
        requires_grad(D, False)
        pf = D(torch.cat([a, fake], 1))
        loss_gan = F.binary_cross_entropy_with_logits(pf, torch.ones_like(pf))
        loss_l1 = F.l1_loss(fake, b) * 100.0
        (loss_gan + loss_l1).backward()
        opt_g.step()
        opt_g.zero_grad(set_to_none=True)
        requires_grad(D, True)
        return {"D": loss_d.detach(), "G/gan": loss_gan.detach(), "G/l1": loss_l1.detach()}
    return step


def reference_step_fn(G: torch.nn.Module, D: torch.nn.Module, opt_g: Any, opt_d: Any) -> Callable[[dict, int], Any]:
    """The reference's optimize_parameters (junyanz pix2pix_model.py), written out."""
    def step(batch: dict, batch_idx: int) -> Any:
        real_a, real_b = batch["A"], batch["B"]
        fake_b = G(real_a)                                   # forward()
        for p in D.parameters():                             # set_requires_grad(netD, True)
            p.requires_grad = True
        opt_d.zero_grad()
        pred_fake = D(torch.cat((real_a, fake_b), 1).detach())
        loss_d_fake = F.binary_cross_entropy_with_logits(pred_fake, torch.tensor(0.0).expand_as(pred_fake))
        pred_real = D(torch.cat((real_a, real_b), 1))
        loss_d_real = F.binary_cross_entropy_with_logits(pred_real, torch.tensor(1.0).expand_as(pred_real))
        loss_d = (loss_d_fake + loss_d_real) * 0.5
        loss_d.backward()
        opt_d.step()
        for p in D.parameters():                             # set_requires_grad(netD, False)
            p.requires_grad = False
        opt_g.zero_grad()
        pred_fake = D(torch.cat((real_a, fake_b), 1))
        loss_g_gan = F.binary_cross_entropy_with_logits(pred_fake, torch.tensor(1.0).expand_as(pred_fake))
        loss_g_l1 = F.l1_loss(fake_b, real_b) * 100.0
        (loss_g_gan + loss_g_l1).backward()
        opt_g.step()
        return {"D": loss_d.detach(), "G/gan": loss_g_gan.detach(), "G/l1": loss_g_l1.detach()}
    return step


def copy_nets(trainer: Any, channels_last: bool = False) -> tuple[torch.nn.Module, torch.nn.Module]:
    G, D = copy.deepcopy(trainer.generator), copy.deepcopy(trainer.discriminator)
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    return G.to(memory_format=fmt), D.to(memory_format=fmt)


def adam_like(params: Any, opt: torch.optim.Optimizer) -> torch.optim.Adam:
    d = opt.defaults
    return torch.optim.Adam(params, lr=d["lr"], betas=d["betas"], weight_decay=d["weight_decay"],
                            fused=d.get("fused"), foreach=d.get("foreach"))


def reference_adam(params: Any) -> torch.optim.Adam:
    # the reference: torch.optim.Adam(params, lr=2e-4, betas=(0.5, 0.999)); on CPU in torch 2.x the
    # default picks foreach only for CUDA tensors, so this is the single-tensor loop (foreach=False).
    return torch.optim.Adam(params, lr=2e-4, betas=(0.5, 0.999), foreach=False)


def alternate(variants: dict[str, Callable[[dict, int], Any]], data: list[dict], repeats: int,
              warmup: int = WARMUP) -> dict[str, float]:
    """Median seconds per step of each variant; variants run one step each in turn (order rotated)."""
    names = list(variants)
    times: dict[str, list[float]] = {n: [] for n in names}
    counters = {n: 0 for n in names}
    for r in range(warmup + repeats):
        order = names[r % len(names):] + names[:r % len(names)]
        for n in order:
            i = counters[n]
            counters[n] += 1
            t0 = time.perf_counter()
            variants[n](data[i % len(data)], i)
            dt = time.perf_counter() - t0
            if r >= warmup:
                times[n].append(dt)
    return {n: statistics.median(v) for n, v in times.items()}


def release(*objs: Any) -> None:
    del objs
    gc.collect()


# -- 1. framework overhead ------------------------------------------------------------------
def bench_overhead(sizes: list[tuple[int, int]], repeats: int) -> None:
    print("\n== 1. framework overhead: engine + hooks vs plain loop (same nets, Adam, inputs) ==", flush=True)
    out = {}
    for size, batch in sizes:
        trainer = make_trainer(size, batch)
        G, D = copy_nets(trainer)
        plain = plain_step_fn(G, D, adam_like(G.parameters(), trainer.opt_g), adam_like(D.parameters(), trainer.opt_d))
        med = alternate({"ours": engine_step(trainer), "plain": plain}, batches(size, batch), repeats)
        ratio = med["ours"] / med["plain"]
        key = f"{size}x{batch}"
        out[key] = {"ours_s": med["ours"], "plain_s": med["plain"], "ratio": ratio, "repeats": repeats}
        row("1", f"{key} ours / plain", f"{med['ours']:.3f} / {med['plain']:.3f} s = {ratio:.3f} (target <= 1.02)")
        release(trainer, G, D, plain)
    RESULTS["1_overhead"] = out


# -- 2. against the reference ---------------------------------------------------------------
def bench_reference(sizes: list[tuple[int, int]], repeats: dict[int, int]) -> None:
    print("\n== 2. reference step (single Adam, fp32, contiguous) vs our defaults ==", flush=True)
    out = {}
    for size, batch in sizes:
        trainer = make_trainer(size, batch)
        G, D = copy_nets(trainer)
        ref = reference_step_fn(G, D, reference_adam(G.parameters()), reference_adam(D.parameters()))
        n = repeats.get(batch, repeats[1])
        med = alternate({"ours": engine_step(trainer), "reference": ref}, batches(size, batch), n)
        ratio = med["ours"] / med["reference"]
        key = f"{size}x{batch}"
        out[key] = {"ours_s": med["ours"], "reference_s": med["reference"], "ratio": ratio, "repeats": n,
                    "ours_img_s": batch / med["ours"], "reference_img_s": batch / med["reference"]}
        row("2", f"{key} ours(default) / reference", f"{med['ours']:.3f} / {med['reference']:.3f} s = {ratio:.3f}"
            + (" (target <= 0.75)" if key == "256x1" else ""))
        release(trainer, G, D, ref)
    RESULTS["2_reference"] = out


def bench_reference_losses(size: int, steps: int = 20) -> None:
    """Same init, same data, same dropout seeds: losses of both after `steps` steps."""
    trainer = make_trainer(size, 1)
    G, D = copy_nets(trainer)
    ref = reference_step_fn(G, D, reference_adam(G.parameters()), reference_adam(D.parameters()))
    ours = engine_step(trainer)
    data = batches(size, 1, n=steps, seed=7)
    last: dict[str, dict[str, float]] = {}
    for name, fn in (("reference", ref), ("ours", ours)):
        for i in range(steps):
            torch.manual_seed(1000 + i)
            logs = fn(data[i], i)
        last[name] = {k: float(v) for k, v in logs.items()}
    ours_l = {"D": last["ours"]["D/gan_d"], "G/gan": last["ours"]["G/gan"], "G/l1": last["ours"]["G/l1"]}
    rel = {k: abs(ours_l[k] - last["reference"][k]) / max(abs(last["reference"][k]), 1e-12) for k in ours_l}
    pdiff = max((a - b).abs().max().item() for a, b in zip(trainer.generator.parameters(), G.parameters()))
    RESULTS["2_losses_after_steps"] = {"size": f"{size}x1", "steps": steps, "reference": last["reference"],
                                       "ours": ours_l, "rel_diff": rel, "max_abs_G_param_diff": pdiff}
    row("2", f"losses after {steps} steps at {size}x1 (ref vs ours)",
        ", ".join(f"{k} {last['reference'][k]:.5f} vs {ours_l[k]:.5f} (rel {rel[k]:.1e})" for k in ours_l)
        + f"; max |dG param| {pdiff:.1e}")
    release(trainer, G, D)


def bench_levers(repeats: int) -> None:
    print("\n== 2. single levers at 256x1 (our trainer, fp32) ==", flush=True)
    variants = {
        "fused": make_trainer(256, 1, optim={"implementation": "fused"}),
        "foreach": make_trainer(256, 1, optim={"implementation": "foreach"}),
        "single": make_trainer(256, 1, optim={"implementation": "single"}),
        "fused+channels_last": make_trainer(256, 1, optim={"implementation": "fused"},
                                            precision={"channels_last": True}),
    }
    med = alternate({k: engine_step(t) for k, t in variants.items()}, batches(256, 1), repeats)
    base = med["single"]
    out = {k: {"s": v, "vs_single": v / base} for k, v in med.items()}
    out["channels_last_vs_contiguous"] = med["fused+channels_last"] / med["fused"]
    for k, v in med.items():
        row("2", f"lever 256x1 {k}", f"{v:.3f} s ({v / base:.3f} x single-tensor Adam)")
    row("2", "lever 256x1 channels_last on/off (fused)", f"{out['channels_last_vs_contiguous']:.3f}")
    RESULTS["2_levers_256x1"] = out
    release(variants)


# -- 3. bf16 ---------------------------------------------------------------------------------
def bench_bf16(sizes: list[tuple[int, int]], repeats: int, curve_steps: int = 30) -> None:
    print("\n== 3. bf16 autocast vs fp32 (our trainer) ==", flush=True)
    out: dict[str, Any] = {}
    # This VM exposes only AVX2 (torch.backends.cpu.get_cpu_capability()) and torch reports
    # torch.ops.mkldnn._is_mkldnn_bf16_supported() False: bf16 convs fall back to aten::_slow_conv2d.
    bf16_opts = {"amp": "bf16", "channels_last": True}
    out["mkldnn_bf16_supported"] = bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    # On this machine bf16 is far slower than fp32 (see docs/performance.md), so it gets
    # 1 warm-up and `repeats` alternated samples, at 128x1 only.
    for size, batch in sizes:
        fp32 = make_trainer(size, batch)
        bf16 = make_trainer(size, batch, precision=bf16_opts)
        med = alternate({"fp32": engine_step(fp32), "bf16": engine_step(bf16)}, batches(size, batch), repeats,
                        warmup=1)
        key = f"{size}x{batch}"
        out[key] = {"fp32_s": med["fp32"], "bf16_channels_last_s": med["bf16"], "ratio": med["bf16"] / med["fp32"],
                    "repeats": repeats, "warmup": 1}
        row("3", f"{key} bf16+channels_last / fp32", f"{med['bf16']:.3f} / {med['fp32']:.3f} s = "
            f"{med['bf16'] / med['fp32']:.3f} (target <= 0.6)")
        release(fp32, bf16)
    # loss curves: 64 px synthetic shapes, unet depth 6 ngf 16, same init and data, dropout seeds
    gen = {"name": "unet", "depth": 6, "ngf": 16, "norm": "batch"}
    data_opts = {"root": str(synth(64)), "load_size": 64, "crop_size": 64, "shuffle": False,
                 "augment": []}
    curves: dict[str, list[float]] = {}
    fp32 = make_trainer(64, 1, generator=gen, data=data_opts)
    bf16 = make_trainer(64, 1, generator=gen, data=data_opts, precision=bf16_opts)
    bf16.generator.load_state_dict(fp32.generator.state_dict())
    bf16.discriminator.load_state_dict(fp32.discriminator.state_dict())
    data: list[dict] = []
    while len(data) < curve_steps:  # the train split is small: several passes
        data += [b for _, b in zip(range(curve_steps - len(data)), iter(fp32.train_loader))]
    for name, t in (("fp32", fp32), ("bf16", bf16)):
        step, curve = engine_step(t), []
        for i, b in enumerate(data):
            torch.manual_seed(2000 + i)
            curve.append(float(step(b, i)["G/l1"]))
        curves[name] = curve

    def smooth(xs: list[float], w: int = 5) -> list[float]:
        return [statistics.fmean(xs[max(0, i - w + 1):i + 1]) for i in range(len(xs))]

    s32, s16 = smooth(curves["fp32"]), smooth(curves["bf16"])
    maxrel = max(abs(a - b) / abs(a) for a, b in zip(s32, s16))
    out["curves_64px"] = {"steps": len(data), "G/l1_fp32": curves["fp32"], "G/l1_bf16": curves["bf16"],
                          "smoothing": "trailing mean over 5 steps", "max_rel_diff_smoothed": maxrel}
    row("3", f"G/l1 curves over {len(data)} steps at 64px (smoothed, 5-step mean)",
        f"start {s32[0]:.2f}/{s16[0]:.2f}, end {s32[-1]:.2f}/{s16[-1]:.2f} (fp32/bf16); max rel diff {maxrel:.3f}")
    RESULTS["3_bf16"] = out
    release(fp32, bf16)


# -- 5. input pipeline -----------------------------------------------------------------------
def bench_pipeline(images: int) -> None:
    print("\n== 5. input pipeline at 256 (load 286, random crop 256, default augmentations) ==", flush=True)
    root = TMP / "synth256"
    write_synthetic(root, count=images, size=256, seed=0, val=0.2, test=0.1)
    small = {"name": "unet", "depth": 5, "ngf": 8}
    out = {}
    for workers in (0, 1, 2):
        trainer = make_trainer(256, 1, generator=small, data={"root": str(root), "load_size": 286,
                                                              "num_workers": workers})
        loader = trainer.train_loader
        it = iter(loader)
        next(it)  # start-up of workers excluded
        t0 = time.perf_counter()
        n = sum(b["A"].shape[0] for b in it)
        rate = n / (time.perf_counter() - t0)
        out[f"workers_{workers}"] = rate
        row("5", f"loader images/s, workers={workers}", f"{rate:.1f}")
        release(trainer, loader, it)
    consume = RESULTS.get("2_reference", {}).get("256x1", {}).get("ours_img_s")
    if consume:
        out["training_consumes_img_s_256x1"] = consume
        out["loader_default_workers_over_training"] = out["workers_2"] / consume
        row("5", "default loader (2 workers) / training consumption at 256x1",
            f"{out['workers_2']:.1f} / {consume:.2f} img/s = {out['workers_2'] / consume:.1f}x")
    RESULTS["5_pipeline"] = out


# -- 6. start-up -------------------------------------------------------------------------------
PROBE = """
import atexit, sys
atexit.register(lambda: sys.stderr.write("TORCH-IMPORTED\\n" if "torch" in sys.modules else "TORCH-FREE\\n"))
from nectargan_core.cli.main import main
sys.argv = ["nectargan", *sys.argv[1:]]
main()
"""


def bench_startup(repeats: int = 5) -> None:
    print("\n== 6. start-up ==", flush=True)
    exe = str(Path(sys.executable).parent / "nectargan")
    commands = {
        "baseline: python -c 'import click, pluggy, pydantic'": [sys.executable, "-c", "import click, pluggy, pydantic"],
        "nectargan --help": [exe, "--help"],
        "nectargan plugins list": [exe, "plugins", "list"],
    }
    times: dict[str, list[float]] = {k: [] for k in commands}
    for _ in range(repeats + 1):  # first round is warm-up (file cache)
        for name, cmd in commands.items():
            t0 = time.perf_counter()
            subprocess.run(cmd, capture_output=True, check=True)
            times[name].append(time.perf_counter() - t0)
    med = {k: statistics.median(v[1:]) for k, v in times.items()}
    base = med[next(iter(commands))]
    out: dict[str, Any] = {}
    for name, value in med.items():
        out[name] = {"s": value, "ratio_vs_baseline": value / base}
        row("6", name, f"{value * 1000:.0f} ms ({value / base:.2f}x baseline)")
    for args in (["--help"], ["plugins", "list"]):
        r = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True)
        verdict = r.stderr.strip().splitlines()[-1]
        out["torch_" + "_".join(args).strip("-")] = verdict
        row("6", f"torch imported by nectargan {' '.join(args)}?", verdict)
    RESULTS["6_startup"] = out


def machine() -> dict[str, Any]:
    model = platform.processor()
    try:
        for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
            if line.startswith("Model name:"):
                model = line.split(":", 1)[1].strip()
    except OSError:
        pass
    return {"cpu": model, "cores": os.cpu_count(), "torch_threads": torch.get_num_threads(),
            "torch": torch.__version__, "cpu_capability": torch.backends.cpu.get_cpu_capability(), "python": platform.python_version(),
            "mkldnn_available": torch.backends.mkldnn.is_available(),
            "mkldnn_bf16_supported": bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--full", action="store_true", help="also 256x4, more repeats, compile and inference at "
                                                         "256 (about twice the default's time)")
    parser.add_argument("--quick", action="store_true", help="the default (kept for old command lines)")
    parser.add_argument("--json", type=Path, default=None, help="write the results here (default: print only)")
    args = parser.parse_args()
    start = time.perf_counter()
    RESULTS["machine"] = machine()
    full = args.full
    RESULTS["mode"] = "full" if full else "default"
    print(f"machine: {RESULTS['machine']}", flush=True)
    r = 9 if full else 5
    me = sys.modules[__name__]
    walls = RESULTS["section_wall_s"] = {}

    def timed(name: str, fn: Callable[..., Any], *a: Any, **k: Any) -> None:
        t0 = time.perf_counter()
        fn(*a, **k)
        walls[name] = walls.get(name, 0.0) + time.perf_counter() - t0

    timed("1", bench_overhead, [(128, 1), (256, 1)], r)
    sizes = [(128, 1), (128, 4), (256, 1), (256, 4)] if full else [(128, 1), (256, 1)]
    timed("2", bench_reference, sizes, {1: r, 4: 5 if full else 3})
    timed("2", bench_reference_losses, 256 if full else 128)
    timed("2", bench_levers, r if full else 3)
    timed("3", bench_bf16, [(128, 1)], 3 if full else 1, curve_steps=20 if full else 12)
    timed("4", more.bench_compile, me, [(128, 1), (256, 1)] if full else [(128, 1)], 5 if full else 3)
    timed("5", bench_pipeline, 24)
    timed("6", bench_startup)
    timed("7", more.bench_inference, me, 128, 16, (1, 8), 3, cli_batches=(1, 8) if full else (8,))
    if full:
        timed("7", more.bench_inference, me, 256, 16, (1, 8), 3)
    timed("8", more.bench_memory, me, epochs=2 if full else 1)
    RESULTS["total_wall_s"] = time.perf_counter() - start

    print("\n| section | measurement | value |\n|---|---|---|")
    for section, what, value in ROWS:
        print(f"| {section} | {what} | {value} |")
    print("\nwall time per section: " + ", ".join(f"{k}: {v:.0f} s" for k, v in walls.items()))
    print(f"total {RESULTS['total_wall_s']:.0f} s")
    if args.json:
        args.json.write_text(json.dumps(RESULTS, indent=2))
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
