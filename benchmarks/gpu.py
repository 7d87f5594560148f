"""GPU figures and CUDA-path checks, in one prepared run on a CUDA machine.

Usage::

    python benchmarks/gpu.py [--json OUT] [--quick]

Sections (each variant runs alternately, step by step, after warm-up; every timed step ends with
``sync()``; figures are medians):

1. the pix2pix step against the reference's ``optimize_parameters`` (fp32, the reference's default
   Adam, which is ``foreach`` on CUDA) at 256x1 and 256x16: ours in fp32, bf16 and fp16 autocast,
   bf16 + channels_last; peak GPU memory of each;
2. torch.compile (``precision.compile: default``, inductor) + bf16 vs eager bf16 at 256x16, with the
   cold compile time;
3. the losses of the reference step and ours (fp32) after 20 steps from the same weights and data;
4. inference: the generator alone at 256, batch 1 and 16, fp32 / bf16 / fp16, ms per image;
5. the CLI on CUDA: ``nectargan train --nproc 1`` with the NCCL backend (process group, DDP wrapper,
   NCCL all-reduce), then ``--resume`` for one more epoch, ``test`` and ``export --format onnx``;
6. CycleGAN (when nectargan-cyclegan is installed): our step vs the reference's at 256x1;
7. CUDA graphs (``graphs``, ``graph-parity``): eager vs replayed steps, and 200 steps of each side by side;
8. the first steps in fresh processes (``first-steps``): import, set-up, each warm-up step and the
   capture, then the replayed step, with cuDNN autotuning (torch's default limit of 10 algorithms, or 1)
   and with its heuristics: what the first epoch pays, and what each choice costs per step after it.

Nothing here runs without CUDA: it says so and exits 0 (CI never runs it).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))

RESULTS: dict[str, Any] = {}
#: "cuda" on a GPU machine; "cpu" for --smoke-cpu (checks this script itself on small sizes, no figures).
DEV = "cuda"
SIZE = 256
BACKEND = "nccl"
WARMUP = 5


def sync() -> None:
    if DEV == "cuda":
        torch.cuda.synchronize()


def say(section: str, what: str, value: str) -> None:
    print(f"  [{section}] {what}: {value}", flush=True)


def environment() -> dict[str, Any]:
    props = torch.cuda.get_device_properties(0)
    env = {
        "device": torch.cuda.get_device_name(0),
        "capability": f"{props.major}.{props.minor}",
        "memory_gib": round(props.total_memory / 2**30, 1),
        "multiprocessors": props.multi_processor_count,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
    }
    print("environment:", json.dumps(env), flush=True)
    return env


def timed(variants: dict[str, Callable[[int], Any]], repeats: int, warmup: int | None = None) -> dict[str, float]:
    """Median seconds per call of each variant; one call each in turn (order rotated), synchronised."""
    warmup = WARMUP if warmup is None else warmup
    names = list(variants)
    times: dict[str, list[float]] = {n: [] for n in names}
    for r in range(warmup + repeats):
        order = names[r % len(names):] + names[:r % len(names)]
        for n in order:
            sync()
            t0 = time.perf_counter()
            variants[n](r)
            sync()
            if r >= warmup:
                times[n].append(time.perf_counter() - t0)
    return {n: statistics.median(v) for n, v in times.items()}


def peak_memory(fn: Callable[[int], Any], steps: int = 3) -> float:
    if DEV != "cuda":
        return float("nan")
    sync()
    torch.cuda.reset_peak_memory_stats()
    for i in range(steps):
        fn(i)
    sync()
    return torch.cuda.max_memory_allocated() / 2**30


def cuda_batches(size: int, batch: int, n: int = 4, seed: int = 1) -> list[dict]:
    g = torch.Generator().manual_seed(seed)
    return [{"A": (torch.rand(batch, 3, size, size, generator=g) * 2 - 1).to(DEV),
             "B": (torch.rand(batch, 3, size, size, generator=g) * 2 - 1).to(DEV)} for _ in range(n)]


def reference_step(G: torch.nn.Module, D: torch.nn.Module, opt_g: Any, opt_d: Any) -> Callable[[dict], Any]:
    """The reference's pix2pix optimize_parameters (GANLoss labels are buffers on the device)."""
    real_label = torch.tensor(1.0, device=DEV)
    fake_label = torch.tensor(0.0, device=DEV)

    def step(batch: dict) -> Any:
        real_a, real_b = batch["A"], batch["B"]
        fake_b = G(real_a)
        for p in D.parameters():
            p.requires_grad = True
        opt_d.zero_grad()
        pred_fake = D(torch.cat((real_a, fake_b), 1).detach())
        loss_d_fake = F.binary_cross_entropy_with_logits(pred_fake, fake_label.expand_as(pred_fake))
        pred_real = D(torch.cat((real_a, real_b), 1))
        loss_d_real = F.binary_cross_entropy_with_logits(pred_real, real_label.expand_as(pred_real))
        loss_d = (loss_d_fake + loss_d_real) * 0.5
        loss_d.backward()
        opt_d.step()
        for p in D.parameters():
            p.requires_grad = False
        opt_g.zero_grad()
        pred_fake = D(torch.cat((real_a, fake_b), 1))
        loss_g_gan = F.binary_cross_entropy_with_logits(pred_fake, real_label.expand_as(pred_fake))
        loss_g_l1 = F.l1_loss(fake_b, real_b) * 100.0
        (loss_g_gan + loss_g_l1).backward()
        opt_g.step()
        return {"D": loss_d.detach(), "G/gan": loss_g_gan.detach(), "G/l1": loss_g_l1.detach()}
    return step


def reference_adam(params: Any) -> torch.optim.Adam:
    return torch.optim.Adam(params, lr=2e-4, betas=(0.5, 0.999))  # the reference's call; foreach on CUDA


def cuda_trainer(size: int, batch: int, **sections: Any) -> Any:
    import run as bench  # benchmarks/run.py: the same trainer set-up as the CPU figures

    precision = {"amp": "off", **sections.pop("precision", {})}
    return bench.make_trainer(size, batch, run={"device": DEV}, precision=precision, **sections)


def against_reference(trainers: dict[str, Any], base: Any, size: int, batch: int) -> dict[str, Callable[[int], Any]]:
    """One step of each trainer through the engine, and the reference's step on copies of ``base``'s networks."""
    import run as bench

    G, D = copy.deepcopy(base.generator), copy.deepcopy(base.discriminator)
    ref = reference_step(G, D, reference_adam(G.parameters()), reference_adam(D.parameters()))
    data = cuda_batches(size, batch)
    variants: dict[str, Callable[[int], Any]] = {"reference_fp32": lambda i: ref(data[i % len(data)])}
    for name, trainer in trainers.items():
        step = bench.engine_step(trainer)
        variants[name] = (lambda s: (lambda i: s(data[i % len(data)], i)))(step)
    return variants


def bench_steps(sizes: list[tuple[int, int]], repeats: int) -> None:
    print("\n== 1. pix2pix step: reference (fp32) vs ours (fp32, bf16, fp16, bf16+channels_last) ==", flush=True)
    out: dict[str, Any] = {}
    for size, batch in sizes:
        trainers = {
            "ours_fp32": cuda_trainer(size, batch),
            "ours_bf16": cuda_trainer(size, batch, precision={"amp": "bf16"}),
            "ours_bf16_cl": cuda_trainer(size, batch, precision={"amp": "bf16", "channels_last": True}),
        }
        if DEV == "cuda":  # fp16 training needs a GPU (the trainer refuses it on the CPU)
            trainers["ours_fp16"] = cuda_trainer(size, batch, precision={"amp": "fp16"})
        variants = against_reference(trainers, trainers["ours_fp32"], size, batch)
        med = timed(variants, repeats)
        memory = {name: peak_memory(fn) for name, fn in variants.items()}
        key = f"{size}x{batch}"
        out[key] = {name: {"s_per_step": s, "img_per_s": batch / s, "peak_gib": memory[name],
                           "vs_reference": s / med["reference_fp32"]} for name, s in med.items()}
        for name, s in med.items():
            say("1", f"{key} {name}", f"{s * 1000:.1f} ms/step, {batch / s:.1f} img/s, "
                f"{s / med['reference_fp32']:.3f} x reference, peak {memory[name]:.2f} GiB")
        del trainers, variants
        torch.cuda.empty_cache()
    RESULTS["1_steps"] = out


def bench_compile(size: int, batch: int, repeats: int) -> None:
    import run as bench

    print("\n== 2. torch.compile (inductor, mode default) + bf16 vs eager bf16 ==", flush=True)
    eager = cuda_trainer(size, batch, precision={"amp": "bf16"})
    compiled = cuda_trainer(size, batch, precision={"amp": "bf16", "compile": "default"})
    data = cuda_batches(size, batch)
    step_e, step_c = bench.engine_step(eager), bench.engine_step(compiled)
    sync()
    t0 = time.perf_counter()
    for i in range(3):  # the first calls compile (G and D, forward and backward)
        step_c(data[i % len(data)], i)
    sync()
    cold = time.perf_counter() - t0
    med = timed({"eager": lambda i: step_e(data[i % len(data)], i),
                 "compiled": lambda i: step_c(data[i % len(data)], i)}, repeats)
    ratio = med["compiled"] / med["eager"]
    RESULTS["2_compile"] = {"size": f"{size}x{batch}", "eager_s": med["eager"], "compiled_s": med["compiled"],
                            "ratio": ratio, "cold_compile_s": cold}
    say("2", f"{size}x{batch} compiled / eager (bf16)",
        f"{med['compiled'] * 1000:.1f} / {med['eager'] * 1000:.1f} ms = {ratio:.3f}; first 3 steps {cold:.1f} s")


def bench_parity(size: int, steps: int = 20) -> None:
    import run as bench

    print("\n== 3. losses after 20 steps, reference vs ours (fp32, same weights and data) ==", flush=True)
    trainer = cuda_trainer(size, 1)
    G, D = copy.deepcopy(trainer.generator), copy.deepcopy(trainer.discriminator)
    ref = reference_step(G, D, reference_adam(G.parameters()), reference_adam(D.parameters()))
    ours = bench.engine_step(trainer)
    data = cuda_batches(size, 1, n=steps, seed=7)
    last: dict[str, dict[str, float]] = {}
    for name in ("reference", "ours"):
        for i in range(steps):
            torch.manual_seed(1000 + i)
            logs = ref(data[i]) if name == "reference" else ours(data[i], i)
        last[name] = {k: float(v) for k, v in logs.items()}
    ours_l = {"D": last["ours"]["D/gan_d"], "G/gan": last["ours"]["G/gan"], "G/l1": last["ours"]["G/l1"]}
    rel = {k: abs(ours_l[k] - last["reference"][k]) / max(abs(last["reference"][k]), 1e-12) for k in ours_l}
    RESULTS["3_parity"] = {"reference": last["reference"], "ours": ours_l, "rel_diff": rel}
    say("3", f"{size}x1 after {steps} steps", ", ".join(
        f"{k} {last['reference'][k]:.5f} vs {ours_l[k]:.5f} (rel {rel[k]:.1e})" for k in ours_l))


def bench_inference(repeats: int) -> None:
    print("\n== 4. inference: unet_256 generator alone, eval mode, ms per image ==", flush=True)
    trainer = cuda_trainer(SIZE, 1)
    G = copy.deepcopy(trainer.generator).eval()
    out: dict[str, Any] = {}
    for batch in (1, 16):
        x = torch.rand(batch, 3, SIZE, SIZE, device=DEV) * 2 - 1
        variants = {}
        for name, dtype in (("fp32", None), ("bf16", torch.bfloat16), ("fp16", torch.float16)):
            def run_one(i: int, dtype: Any = dtype) -> Any:
                with torch.inference_mode(), torch.autocast(DEV, dtype=dtype or torch.float32,
                                                            enabled=dtype is not None):
                    return G(x)
            variants[name] = run_one
        med = timed(variants, repeats)
        out[f"batch{batch}"] = {n: {"ms_per_image": s * 1000 / batch} for n, s in med.items()}
        say("4", f"batch {batch}", ", ".join(f"{n} {s * 1000 / batch:.2f} ms/img" for n, s in med.items()))
    RESULTS["4_inference"] = out


def cli(*args: str, check: bool = True, timeout: int = 300) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "nectargan_core", *args]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    took = time.perf_counter() - t0
    tail = (proc.stdout + proc.stderr).strip().splitlines()[-3:]
    print(f"  $ nectargan {' '.join(args)}  -> exit {proc.returncode} in {took:.1f} s; " + " | ".join(tail), flush=True)
    if check and proc.returncode != 0:
        print(proc.stdout[-3000:], proc.stderr[-3000:], sep="\n")
    return proc


def bench_cli(tmp: Path) -> None:
    print("\n== 5. the CLI on CUDA: --nproc 1 with NCCL, resume, test, export ==", flush=True)
    import tempfile

    tmp = Path(tempfile.mkdtemp(prefix="cli-", dir=tmp))
    data = tmp / "synth"
    results: dict[str, Any] = {}
    count = "48" if DEV == "cuda" else "12"
    results["synth"] = cli("data", "synth", str(data), "--count", count, "--size", str(SIZE)).returncode
    small = ["--set", "models.generator.name=unet_128", "--set", "data.load_size=128", "--set", "data.crop_size=128",
             "--set", "data.num_workers=0"] if DEV == "cpu" else []
    common = [*small, "--set", f"data.root={data}", "--set", f"run.output_dir={tmp / 'runs'}", "--set", "run.name=gpu",
              "--set", f"run.device={DEV}", "--set", f"distributed.backend={BACKEND}", "--set", "data.num_workers=4"][: None if DEV == "cuda" else -2]
    t0 = time.perf_counter()
    first = cli("train", "--trainer", "pix2pix", "--nproc", "1", "--set", "loop.epochs=1", *common)
    results["train_nccl_exit"] = first.returncode
    results["train_nccl_s"] = time.perf_counter() - t0
    run_dir = next((tmp / "runs" / "gpu").glob("version_*"))
    resumed = cli("train", "--resume", str(run_dir), "--set", "loop.epochs=2")
    results["resume_exit"] = resumed.returncode
    status = json.loads((run_dir / "status.json").read_text()) if (run_dir / "status.json").exists() else {}
    results["status_after_resume"] = status.get("status"), status.get("epoch")
    results["test_exit"] = cli("test", str(run_dir), "--checkpoint", "latest", "--device", DEV).returncode
    results["export_onnx_exit"] = cli("export", str(run_dir), "--format", "onnx").returncode
    RESULTS["5_cli"] = results
    say("5", "results", json.dumps(results))


def bench_graphs(sizes: list[tuple[int, int]], repeats: int, parity_steps: int = 200) -> None:
    """CUDA graphs (precision.cuda_graphs) vs eager steps, fp32 and bf16, and 200-step parity at 256x1."""
    print("\n== 7. CUDA graphs: the pix2pix step eager vs replayed (fp32, bf16), vs the reference ==", flush=True)
    out: dict[str, Any] = {}
    for size, batch in sizes:
        trainers = {f"{mode}_{amp}": cuda_trainer(size, batch, precision={"amp": amp if amp != "fp32" else "off",
                                                                          "cuda_graphs": "auto" if mode == "on" else mode})
                    for amp in ("fp32", "bf16") for mode in ("off", "on")}
        variants = against_reference(trainers, trainers["off_fp32"], size, batch)
        med = timed(variants, repeats, warmup=8)  # warm-up includes the graph's 3 eager steps and its capture
        key = f"{size}x{batch}"
        out[key] = {name: {"ms_per_step": s * 1000, "img_per_s": batch / s, "vs_reference": s / med["reference_fp32"],
                           "replays": getattr(trainers.get(name), "step_graphs", None) and
                           trainers[name].step_graphs.replays} for name, s in med.items()}
        for name, s in med.items():
            say("7", f"{key} {name}", f"{s * 1000:.2f} ms/step, {batch / s:.0f} img/s, "
                f"{s / med['reference_fp32']:.3f} x reference")
        say("7", f"{key} graph / eager", f"fp32 {med['on_fp32'] / med['off_fp32']:.3f}, "
            f"bf16 {med['on_bf16'] / med['off_bf16']:.3f}; bf16 / fp32: eager {med['off_bf16'] / med['off_fp32']:.3f}, "
            f"graph {med['on_bf16'] / med['on_fp32']:.3f}")
        del trainers, variants
        torch.cuda.empty_cache()
    RESULTS["7_graphs"] = out
    bench_graph_parity(parity_steps)


def bench_graph_parity(parity_steps: int = 200) -> None:
    """The same weights and data for ``parity_steps`` steps, replayed vs eager, and two eager runs (the band)."""
    import run as bench

    print(f"\n== 7b. CUDA graphs: {parity_steps} steps replayed vs eager, and eager vs eager ==", flush=True)
    out = RESULTS.setdefault("7_graphs", {})
    runs: dict[str, Any] = {}
    data = cuda_batches(SIZE, 1, n=16, seed=7)
    for name, mode in (("eager_a", "off"), ("eager_b", "off"), ("graph", "on")):
        trainer = cuda_trainer(SIZE, 1, precision={"cuda_graphs": "auto" if mode == "on" else mode})
        step = bench.engine_step(trainer)
        torch.manual_seed(1234)
        curve = []
        for i in range(parity_steps):
            logs = step(data[i % len(data)], i)
            curve.append(torch.stack([logs["G/l1"], logs["G/gan"], logs["D/gan_d"]]))
        runs[name] = (trainer, torch.stack(curve).float().cpu())

    def weights_diff(a: Any, b: Any) -> float:
        """The relative L2 distance of G's and D's parameters (BatchNorm statistics left out)."""
        pa = torch.cat([p.detach().flatten() for n in (a.generator, a.discriminator) for p in n.parameters()])
        pb = torch.cat([p.detach().flatten() for n in (b.generator, b.discriminator) for p in n.parameters()])
        return ((pa - pb).norm() / pb.norm()).item()

    def curve_diff(a: torch.Tensor, b: torch.Tensor) -> float:
        """The largest relative difference of 20-step means of each loss (single steps are noise)."""
        ma, mb = a.view(-1, 20, a.shape[-1]).mean(1), b.view(-1, 20, b.shape[-1]).mean(1)
        return ((ma - mb).abs() / mb.abs().clamp_min(1e-6)).max().item()

    parity = {
        "steps": parity_steps,
        "replays": runs["graph"][0].step_graphs.replays,
        "weights_rel_l2_diff": {"graph_vs_eager": weights_diff(runs["graph"][0], runs["eager_a"][0]),
                                 "eager_vs_eager": weights_diff(runs["eager_b"][0], runs["eager_a"][0])},
        "loss_20step_mean_max_rel_diff": {"graph_vs_eager": curve_diff(runs["graph"][1], runs["eager_a"][1]),
                              "eager_vs_eager": curve_diff(runs["eager_b"][1], runs["eager_a"][1])},
        "final_losses": {name: [round(float(v), 6) for v in r[1][-1]] for name, r in runs.items()},
    }
    out["parity"] = parity
    say("7b", f"parity over {parity_steps} steps at {SIZE}x1 (G/l1, G/gan, D)", json.dumps(parity))


#: cuDNN's algorithm choice in a fresh process: (cudnn.benchmark, cudnn.benchmark_limit or None for torch's 10).
FIRST_STEP_MODES = {"autotune": (True, None), "autotune-limit-1": (True, 1), "heuristics": (False, None)}


def first_steps_child(mode: str, launched: float) -> None:
    """In a fresh process (cold CUDA context and cuDNN): where the time before the first replayed step goes.

    Prints one ``@@first-steps {json}`` line: seconds from launch to torch imported, to the trainer built
    (CUDA context, networks on the device), each of the runner's warm-up steps and its capture step (with
    cuDNN's algorithm search in the first), then the median replayed step of 60.
    """
    import run as bench
    from nectargan_core.graphmode import WARMUP_STEPS

    imported = time.time()
    benchmark, limit = FIRST_STEP_MODES[mode]
    if limit is not None:
        torch.backends.cudnn.benchmark_limit = limit
    # the reference recipe's precision (fp32); the search on or off as a user sets it
    trainer = cuda_trainer(SIZE, 1, precision={"cudnn_benchmark": "on" if benchmark else "off"})
    data = cuda_batches(SIZE, 1, n=4, seed=3)
    sync()
    built = time.time()
    step = bench.engine_step(trainer)
    marks = []
    for i in range(WARMUP_STEPS + 1):  # the eager warm-up steps, then the capture (and its replay)
        step(data[i % len(data)], i)
        sync()
        marks.append(time.time())
    times = []
    for i in range(60):
        t0 = time.perf_counter()
        step(data[i % len(data)], WARMUP_STEPS + 1 + i)
        sync()
        times.append(time.perf_counter() - t0)
    runner = trainer.step_graphs
    print("@@first-steps " + json.dumps({
        "mode": mode, "import_s": imported - launched, "build_s": built - imported,
        "steps_s": [b - a for a, b in zip([built] + marks, marks)], "to_capture_s": marks[-1] - launched,
        "step_ms": statistics.median(times) * 1000, "replays": runner.replays, "captures": runner.captures,
        "cudnn_benchmark": torch.backends.cudnn.benchmark if torch.backends.cudnn.is_available() else None,
        "cudnn_benchmark_limit": torch.backends.cudnn.benchmark_limit if benchmark else None}), flush=True)


def bench_first_steps(modes: list[str]) -> None:
    """The start of a run in fresh processes, per cuDNN algorithm-choice mode: what the first epoch pays."""
    print(f"\n== 8. The first steps in a fresh process: cuDNN autotuning vs heuristics, pix2pix {SIZE}x1 fp32 ==",
          flush=True)
    out: dict[str, Any] = {}
    for mode in modes:
        argv = [sys.executable, str(Path(__file__).resolve()), "--first-steps-child", mode]
        if DEV == "cpu":
            argv.append("--smoke-cpu")
        try:
            proc = subprocess.run(argv + ["--launched", repr(time.time())], capture_output=True, text=True,
                                  timeout=45, check=False)
        except subprocess.TimeoutExpired:
            out[mode] = {"error": "timed out after 45 s"}
            say("8", mode, "timed out after 45 s")
            continue
        line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("@@first-steps ")), None)
        if line is None:
            out[mode] = {"error": (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]}
            say("8", mode, f"failed: {out[mode]['error']}")
            continue
        figures = out[mode] = json.loads(line.split(" ", 1)[1])
        say("8", mode, f"import {figures['import_s']:.1f} s, build {figures['build_s']:.1f} s, steps "
            + ", ".join(f"{t:.2f}" for t in figures["steps_s"]) + f" s (launch to capture "
            f"{figures['to_capture_s']:.1f} s); then {figures['step_ms']:.2f} ms/step "
            f"({figures['replays']} replays, {figures['captures']} capture)")
    RESULTS["8_first_steps"] = out


def bench_cyclegan(repeats: int) -> None:
    try:
        import nectargan_cyclegan  # noqa: F401
    except ImportError:
        print("\n== 6. CycleGAN: nectargan-cyclegan is not installed; skipped ==", flush=True)
        return
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    try:
        import cyclegan_bench
    except ImportError:
        print("\n== 6. CycleGAN: benchmarks/cyclegan_bench.py not found; skipped ==", flush=True)
        return
    print("\n== 6. CycleGAN step: ours vs the reference (256x1) ==", flush=True)
    RESULTS["6_cyclegan"] = cyclegan_bench.compare(DEV, repeats, say)


#: The sections main() runs, in their default order.
SECTION_NAMES = ("steps", "compile", "parity", "inference", "cyclegan", "graphs", "graph-parity", "first-steps", "cli")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--quick", action="store_true", help="fewer repeats (a smoke run)")
    parser.add_argument("--tmp", type=Path, default=Path("/tmp/nectargan-gpu"))
    parser.add_argument("--only", default=None, help="comma-separated sections to run, in that order (default: all)")
    parser.add_argument("--smoke-cpu", action="store_true", help="check this script on the CPU at 64 px (no figures)")
    parser.add_argument("--first-steps-child", choices=sorted(FIRST_STEP_MODES), help=argparse.SUPPRESS)
    parser.add_argument("--launched", type=float, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    wanted = [name.strip() for name in (args.only or "").split(",") if name.strip()]
    unknown = [name for name in wanted if name not in SECTION_NAMES]
    if unknown or (args.only is not None and not wanted):
        parser.error(f"--only: unknown section(s) {', '.join(unknown) or repr(args.only)}; choose from "
                     f"{', '.join(SECTION_NAMES)}")
    global DEV, SIZE, BACKEND, WARMUP
    if args.smoke_cpu:
        DEV, SIZE, BACKEND, WARMUP = "cpu", 128, "gloo", 1
    elif not torch.cuda.is_available():
        print("no CUDA device: nothing to measure (this script is for a GPU machine)")
        return 0
    if args.first_steps_child:
        first_steps_child(args.first_steps_child, args.launched or time.time())
        return 0
    torch.backends.cudnn.benchmark = True
    args.tmp.mkdir(parents=True, exist_ok=True)
    repeats = 2 if args.smoke_cpu else 10 if args.quick else 30
    RESULTS["environment"] = environment() if DEV == "cuda" else {"device": "cpu (smoke run)"}
    sections = [
        ("steps", lambda: bench_steps([(SIZE, 1), (SIZE, 2 if args.smoke_cpu else 16)], repeats)),
        ("compile", lambda: bench_compile(SIZE, 16, repeats) if DEV == "cuda" else None),
        ("parity", lambda: bench_parity(SIZE)),
        ("inference", lambda: bench_inference(repeats)),
        ("cyclegan", lambda: bench_cyclegan(repeats)),
        ("graphs", lambda: bench_graphs([(SIZE, 1), (SIZE, 2 if args.smoke_cpu else 16)], repeats,
                                        20 if args.smoke_cpu else 200)),
        ("graph-parity", lambda: bench_graph_parity(20 if args.smoke_cpu else 200)),
        ("first-steps", lambda: bench_first_steps(list(FIRST_STEP_MODES))),
        ("cli", lambda: bench_cli(args.tmp)),
    ]
    failed = []
    assert [name for name, _ in sections] == list(SECTION_NAMES)
    # --only also sets the order (the slowest sections last, so a time limit costs the fewest figures)
    for name, fn in [(name, dict(sections)[name]) for name in wanted] if wanted else sections:
        t0 = time.perf_counter()
        try:
            fn()
        except Exception as exc:  # noqa: BLE001 - one section failing must not lose the others' figures
            import traceback

            traceback.print_exc()
            failed.append(name)
            RESULTS.setdefault("errors", {})[name] = f"{type(exc).__name__}: {exc}"
        print(f"  ({name}: {time.perf_counter() - t0:.1f} s)", flush=True)
        if args.json:
            args.json.write_text(json.dumps(RESULTS, indent=2, default=str))
    print("\nfailed sections:", ", ".join(failed) or "none")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
