"""Sections 4 (torch.compile), 7 (inference) and 8 (memory) of ``benchmarks/run.py``.

Each function takes the ``run`` module (``B``) for its helpers (``make_trainer``,
``engine_step``, ``alternate``, ``batches``, ``row``, ``RESULTS``, ``TMP``), so
this file never imports ``run`` itself (``run`` is ``__main__`` when executed).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import torch

HERE = Path(__file__).resolve().parent


# -- 4. torch.compile ----------------------------------------------------------------------
def bench_compile(B: Any, sizes: list[tuple[int, int]], repeats: int) -> None:
    """Our trainer with ``precision.compile: default`` (inductor) vs eager, alternated.

    Compile time: the first compiled step (which compiles G forward/backward and D twice, with
    and without parameter gradients) minus the steady compiled step. The inductor cache goes to a
    fresh folder, so the figure is a cold compile, as on a fresh machine.
    """
    print("\n== 4. torch.compile (precision.compile: default, inductor) vs eager ==", flush=True)
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(B.TMP / "inductor-cache")
    out: dict[str, Any] = {}
    for size, batch in sizes:
        torch._dynamo.reset()
        eager = B.make_trainer(size, batch)
        compiled = B.make_trainer(size, batch, precision={"compile": "default"})
        compiled.generator.load_state_dict(eager.generator.state_dict())
        compiled.discriminator.load_state_dict(eager.discriminator.state_dict())
        data = B.batches(size, batch)
        step_c = B.engine_step(compiled)
        t0 = time.perf_counter()
        step_c(data[0], 0)
        first = time.perf_counter() - t0
        med = B.alternate({"eager": B.engine_step(eager), "compiled": step_c}, data, repeats, warmup=2)
        key = f"{size}x{batch}"
        ratio = med["compiled"] / med["eager"]
        out[key] = {"eager_s": med["eager"], "compiled_s": med["compiled"], "ratio": ratio, "repeats": repeats,
                    "first_compiled_step_s": first, "compile_s": first - med["compiled"]}
        B.row("4", f"{key} compiled / eager (steady state)",
              f"{med['compiled']:.3f} / {med['eager']:.3f} s = {ratio:.3f}")
        B.row("4", f"{key} compile time (first step - steady step, cold cache)", f"{first - med['compiled']:.1f} s")
        B.release(eager, compiled, step_c)
    out["torch"] = torch.__version__
    B.RESULTS["4_compile"] = out


# -- 7. inference --------------------------------------------------------------------------
def _write_images(folder: Path, count: int, size: int) -> None:
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    g = torch.Generator().manual_seed(3)
    for i in range(count):
        low = torch.rand(3, size // 16, size // 16, generator=g)  # smooth, like photos (PNG size realistic)
        img = torch.nn.functional.interpolate(low[None], size=(size, size), mode="bilinear")[0]
        Image.fromarray((img.permute(1, 2, 0) * 255).round().byte().numpy()).save(folder / f"img{i:03d}.png")


def bench_inference(B: Any, size: int, images: int, batch_sizes: tuple[int, ...], repeats: int,
                    onnx: bool = True, cli_batches: tuple[int, ...] = (8,)) -> None:
    """``predict`` on a folder vs a bare ``model(x)`` loop on the same tensors; ONNX Runtime vs eager."""
    from nectargan_translate.data.augment import normalise
    from nectargan_translate.data.decode import read_image, to_channels
    from nectargan_translate.files import plan
    from nectargan_translate.inference import load_generator
    from nectargan_translate import predictor

    print(f"\n== 7. inference at {size}px: predict vs bare model(x) loop; ONNX Runtime vs eager ==", flush=True)
    trainer = B.make_trainer(size, 1)
    ckpt = trainer.save_checkpoint(B.TMP / f"infer{size}.pt")
    B.release(trainer)
    folder = B.TMP / f"predict-in{size}"
    _write_images(folder, images, size)
    jobs = plan([folder], B.TMP / "predict-out", False)
    loaded = load_generator(ckpt)
    model = loaded.model
    tensors = [normalise(to_channels(read_image(job.source), 3)[None]) for job in jobs]
    out: dict[str, Any] = {"size": size, "images": images, "model": f"unet_{size} (batch norm), eval mode"}
    t0 = time.perf_counter()
    load_generator(ckpt)
    out["load_generator_s"] = time.perf_counter() - t0
    for bs in batch_sizes:
        stacked = [torch.cat(tensors[i:i + bs]) for i in range(0, len(tensors), bs)]

        def bare() -> None:
            with torch.no_grad():
                for x in stacked:
                    model(x)

        def predict() -> None:  # the whole call: checkpoint load, decode, fit, run, restore, PNG encode
            predictor.predict_jobs(ckpt, jobs, B.TMP / f"predict-out{bs}", batch_size=bs)

        def predict_loaded() -> None:  # the same with the generator already loaded (the per-image work)
            real = predictor.load_generator
            predictor.load_generator = lambda *a, **k: loaded
            try:
                predictor.predict_jobs(ckpt, jobs, B.TMP / f"predict-out{bs}", batch_size=bs)
            finally:
                predictor.load_generator = real

        variants = {"bare": bare, "predict": predict, "predict_loaded": predict_loaded}
        times: dict[str, list[float]] = {k: [] for k in variants}
        bare()  # warm-up (oneDNN primitives for this batch size)
        for r in range(repeats):
            order = list(variants)[r % 3:] + list(variants)[:r % 3]
            for name in order:
                t0 = time.perf_counter()
                variants[name]()
                times[name].append(time.perf_counter() - t0)
        med = {k: statistics.median(v) for k, v in times.items()}
        ratio = med["bare"] / med["predict"]  # throughput of predict / throughput of the bare loop
        steady = med["bare"] / med["predict_loaded"]
        out[f"batch_{bs}"] = {"bare_s": med["bare"], "predict_s": med["predict"],
                              "predict_loaded_s": med["predict_loaded"], "repeats": repeats,
                              "bare_img_s": images / med["bare"], "predict_img_s": images / med["predict"],
                              "predict_loaded_img_s": images / med["predict_loaded"],
                              "throughput_ratio": ratio, "throughput_ratio_loaded": steady}
        B.row("7", f"{images} images {size}px batch {bs}: predict (generator loaded) / bare model(x) throughput",
              f"{images / med['predict_loaded']:.2f} / {images / med['bare']:.2f} img/s = {steady:.3f} (target >= 0.9)")
        B.row("7", f"{images} images {size}px batch {bs}: predict incl. checkpoint load / bare",
              f"{images / med['predict']:.2f} / {images / med['bare']:.2f} img/s = {ratio:.3f} "
              f"(load_generator alone {out['load_generator_s']:.2f} s)")
    # the command end to end (interpreter start, imports, load, decode, run, encode), once per batch size
    exe = str(Path(sys.executable).parent / "nectargan")
    for bs in cli_batches:
        t0 = time.perf_counter()
        subprocess.run([exe, "predict", str(ckpt), str(folder), "-o", str(B.TMP / f"cli-out{bs}"),
                        "--batch-size", str(bs)], check=True, capture_output=True)
        wall = time.perf_counter() - t0
        out[f"cli_batch_{bs}_wall_s"] = wall
        B.row("7", f"`nectargan predict` CLI wall, batch {bs}", f"{wall:.2f} s for {images} images "
              f"(bare loop {out[f'batch_{bs}']['bare_s']:.2f} s)")
    if onnx:
        _bench_onnx(B, ckpt, model, tensors, size, repeats, out)
    B.RESULTS[f"7_inference_{size}"] = out
    B.release(model, loaded, tensors)


def _bench_onnx(B: Any, ckpt: Path, model: torch.nn.Module, tensors: list[torch.Tensor], size: int,
                repeats: int, out: dict[str, Any]) -> None:
    try:
        import onnxruntime
        from nectargan_translate.export import export_generator
    except ImportError as exc:
        out["onnx"] = f"skipped: {exc}"
        B.row("7", "ONNX Runtime vs eager", f"skipped ({exc})")
        return
    t0 = time.perf_counter()
    report = export_generator(ckpt, fmt="onnx", output=B.TMP / f"g{size}.onnx", size=(size, size))
    export_s = time.perf_counter() - t0
    options = onnxruntime.SessionOptions()
    # ORT's worker threads spin after each run by default, which steals the 2 cores from torch in the
    # alternated comparison (eager read 611 ms instead of ~90 ms at 128x1); no spinning for a fair one.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = onnxruntime.InferenceSession(str(report.path), options, providers=["CPUExecutionProvider"])
    res: dict[str, Any] = {"export_s": export_s, "onnxruntime": onnxruntime.__version__,
                           "parity_max_abs_diff": report.parity.max_abs_diff}
    for bs in (1, 8):
        x = torch.cat((tensors * 8)[:bs])
        xn = x.numpy()

        def ort(_b: Any = None, _i: int = 0) -> None:
            session.run(["output"], {"input": xn})

        def eager(_b: Any = None, _i: int = 0) -> None:
            with torch.no_grad():
                model(x)

        med = B.alternate({"onnxruntime": ort, "eager": eager}, [None], repeats, warmup=2)
        ratio = med["onnxruntime"] / med["eager"]
        res[f"batch_{bs}"] = {"onnxruntime_s": med["onnxruntime"], "eager_s": med["eager"], "ratio": ratio,
                              "repeats": repeats}
        B.row("7", f"ONNX Runtime / PyTorch eager, {size}px batch {bs}",
              f"{med['onnxruntime'] * 1000:.0f} / {med['eager'] * 1000:.0f} ms = {ratio:.3f}")
    B.row("7", "ONNX export (dynamo, with parity check)",
          f"{export_s:.1f} s, max |diff| {report.parity.max_abs_diff:.1e}")
    out["onnx"] = res


# -- 8. memory ------------------------------------------------------------------------------
MEMORY_PROBE = r"""
import json, resource, sys, torch
sys.path.insert(0, {here!r})
import run as B
mode, size, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def peak():  # bytes. VmHWM is this process's own high-water mark; ru_maxrss is not: Linux carries the
    # parent's peak over fork + exec into it (it read the benchmark's 5.09 GiB for both probes)
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
report = {{"after_import": peak()}}
if mode == "ours":
    # our trainer, default settings (fused Adam, fp32), unet_<size> + patchgan_70, batch 1, through the
    # engine's real loop (data loading, validation and example grids at each epoch end)
    from nectargan_core import Run
    from nectargan_translate.data.synth import write_synthetic
    root = B.TMP / "mem"
    write_synthetic(root, count=int(sys.argv[4]), size=size, seed=0, val=0.2, test=0.1)
    run = Run.create({{"trainer": "pix2pix", "run": {{"output_dir": str(B.TMP / "memruns"), "device": "cpu"}},
        "loop": {{"epochs": int(sys.argv[5])}},
        "data": {{"root": str(root), "load_size": size, "crop_size": size, "batch_size": 1}},
        "models": {{"generator": json.loads(sys.argv[6]) if len(sys.argv) > 6
                                 else {{"name": f"unet_{{size}}", "norm": "batch"}},
                   "discriminator": {{"name": "patchgan_70", "norm": "batch"}}}},
        "checkpoint": {{"save_last": False, "every_epochs": None}}, "visualizers": []}})
    epochs = []
    while not run.trainer.finished:
        run.fit_epoch()
        epochs.append(peak())
    report["after_each_epoch"] = epochs
    report["steps"] = run.trainer.global_step
else:
    # the reference step (single-tensor Adam) on the same networks and random inputs
    trainer = B.make_trainer(size, 1)
    G, D = trainer.generator, trainer.discriminator
    step = B.reference_step_fn(G, D, B.reference_adam(G.parameters()), B.reference_adam(D.parameters()))
    data = B.batches(size, 1)
    for i in range(steps):
        step(data[i % len(data)], i)
    report["steps"] = steps
report["peak"] = peak()
print("MEMORY " + json.dumps(report))
"""


def _probe(*args: Any) -> dict[str, Any]:
    code = MEMORY_PROBE.format(here=str(HERE))
    done = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"memory probe {args} failed:\n{done.stderr[-2000:]}")
    line = next(line for line in done.stdout.splitlines() if line.startswith("MEMORY "))
    return json.loads(line[len("MEMORY "):])


def bench_memory(B: Any, size: int = 256, count: int = 6, epochs: int = 2, small: tuple[int, int, int] = (64, 8, 6),
                 large_count: int = 32) -> None:
    """Peak RSS (VmHWM) of fresh processes: ours at 256x1 vs the reference step; growth with epochs and data."""
    print("\n== 8. memory: peak RSS of fresh processes ==", flush=True)
    gib = 2**30
    ours = _probe("ours", size, 0, count, epochs)
    ref = _probe("reference", size, ours["steps"])
    out: dict[str, Any] = {
        f"ours_{size}x1": ours, f"reference_{size}x1": ref, "reference_anchor_gib": 1.8,
        "ratio_ours_vs_reference_here": ours["peak"] / ref["peak"], "ratio_ours_vs_anchor": ours["peak"] / (1.8 * gib)}
    B.row("8", f"peak RSS {size}x1: ours ({ours['steps']} steps, {epochs} epochs, val + examples) / reference step",
          f"{ours['peak'] / gib:.2f} / {ref['peak'] / gib:.2f} GiB = {out['ratio_ours_vs_reference_here']:.3f} "
          f"(vs the anchor's 1.8 GiB: {out['ratio_ours_vs_anchor']:.3f})")
    # growth: a small model over many short epochs, then the same with 4x the images
    px, images, n_epochs = small
    gen = json.dumps({"name": "unet", "depth": 6, "ngf": 16, "norm": "batch"})
    few = _probe("ours", px, 0, images, n_epochs, gen)
    many = _probe("ours", px, 0, large_count, n_epochs, gen)
    per_epoch = few["after_each_epoch"]
    out["growth"] = {"size": px, "epochs": n_epochs, "images": images, "after_each_epoch": per_epoch,
                     "epoch2_to_last_mib": (per_epoch[-1] - per_epoch[1]) / 2**20,
                     "more_images": large_count, "peak_few_images": few["peak"], "peak_more_images": many["peak"]}
    B.row("8", f"peak RSS growth, {px}px tiny-data run, epoch 2 -> epoch {n_epochs}",
          f"{(per_epoch[-1] - per_epoch[1]) / 2**20:+.1f} MiB (epoch 1 {per_epoch[0] / 2**20:.0f} MiB, "
          f"last {per_epoch[-1] / 2**20:.0f} MiB)")
    B.row("8", f"peak RSS, {px}px, {images} vs {large_count} images ({n_epochs} epochs)",
          f"{few['peak'] / 2**20:.0f} vs {many['peak'] / 2**20:.0f} MiB = {many['peak'] / few['peak']:.3f}")
    B.RESULTS["8_memory"] = out
