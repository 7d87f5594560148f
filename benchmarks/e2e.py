"""End-to-end training benchmark (issue 21, section 1): whole epochs of ``nectargan train`` as a user runs it.

Usage::

    python benchmarks/e2e.py [--device cuda|cpu] [--scenarios pix2pix-256x1,pix2pix-256x16,cyclegan-256x1]
                             [--epochs 3] [--reference PATH_TO_REFERENCE_CHECKOUT]
                             [--variant NAME='--preset pix2pix-reference --set precision.amp=off' ...]
                             [--no-defaults | --recipe-only] [--workers N] [--work-dir DIR] [--run-timeout S]
                             [--json OUT] [--small]

Each run is a fresh ``nectargan train`` process (data loading, the step, logging, examples and
checkpoints as the variant configures them) and, with ``--reference``, a fresh run of the
reference's ``train.py`` (junyanz/pytorch-CycleGAN-and-pix2pix) on the same synthetic data,
one after the other in this one invocation. A scenario is ``<model>-<size>x<batch>``; per scenario:

* ``reference-recipe``: ``--preset pix2pix-reference`` (``cyclegan-reference`` for CycleGAN),
  the reference's recipe (fp32, batch norm, Adam as the reference picks it, no validation,
  checkpoints every 5 epochs);
* ``defaults`` (pix2pix only): ``--trainer pix2pix`` with the trainer's defaults (autocast on CUDA,
  fused Adam, validation, examples and a checkpoint every epoch);
* each ``--variant NAME=ARGS`` whose ``--preset``/``--trainer`` names the scenario's model (or
  that names none: then ``--trainer <model>`` is added); ARGS come after the benchmark's own
  ``--set`` options, so they override them;
* ``reference`` (with ``--reference``): its ``train.py`` with ``--n_epochs E --n_epochs_decay 0``.

Every run is given the scenario's data root, batch size, image size (load ``size*286/256``, crop
``size``), epochs, device, loader workers (4 on CUDA, 0 on CPU; the reference's
``--num_threads`` the same) and ``loop.log_every_steps`` (10; the reference's ``--print_freq``
is 10 * batch so both report losses at the same steps). Data: ``nectargan data synth``, paired
A|B files for pix2pix (the reference's ``aligned`` mode reads the same train/), unpaired
trainA/trainB for CycleGAN (its ``unaligned`` mode reads the same folders).

Figures per run (all host wall clock, ``time.time()``):

* epoch ``i``'s time: ours, the gap between consecutive ``"epoch"`` records of metrics.jsonl (the
  first epoch: from the trainer's start, after ``prepare()``, to its record); the reference, the gap
  between its "End of epoch" lines (the first: from its last line printed before training). Our
  epoch record is written before ``on_epoch_end`` (examples) and the epoch's checkpoint, so those
  count in the next epoch, and the last epoch's end work in neither; the reference prints its line
  after its checkpoint;
* warm epoch: the median of the epochs after the first; it/s and img/s of warm epochs;
* start to first epoch: from launching the process to the end of the first epoch; start to
  training: to the trainer's start (our ``elapsed`` field) or the reference's last line before
  training. Time to the first step is not measured: no record marks it (see the report);
* GPU busy %: the mean of ``utilization.gpu`` samples (NVML or ``nvidia-smi -lms 200``, host time
  stamps) inside the warm epochs' window; peak MiB: the highest ``memory.used`` sampled during the
  run minus the idle level measured just before it;
* the loss curves: our ``"train"`` records' losses (interval means) and the reference's printed
  losses (the values at that iteration), by step.

``--small`` runs tiny sizes (32 px, ResNet-6 generators 8 channels wide, a few images, 2 epochs;
on a CPU with ``OMP_NUM_THREADS=1``) so that CI keeps this script working; its figures compare nothing.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REFERENCE_WRAPPER = HERE / "e2e_reference.py"
LOG_EVERY_STEPS = 10
SMALL_LOG_EVERY_STEPS = 2

#: The reference's loss names by model, as its print_current_losses writes them.
REFERENCE_MODELS = {"pix2pix": "pix2pix", "cyclegan": "cycle_gan"}
REFERENCE_PRESETS = {"pix2pix": "pix2pix-reference", "cyclegan": "cyclegan-reference"}
#: Our loss keys (metrics.jsonl) and the reference's printed names for the same terms, to set the curves side by side.
LOSS_NAMES = {
    "pix2pix": {"G/gan": "G_GAN", "G/l1": "G_L1", "D/gan_d.real": "D_real", "D/gan_d.fake": "D_fake"},
    "cyclegan": {f"{net}/{term}_{side}": f"{term}_{side}" for side in "AB"
                 for net, term in (("D", "D"), ("G", "G"), ("G", "cycle"), ("G", "idt"))},
}


# -- scenarios and data ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Scenario:
    name: str
    model: str  # pix2pix | cyclegan
    size: int
    batch: int
    images: int  # training images (pairs for pix2pix, per domain for CycleGAN)
    val: int

    @property
    def load_size(self) -> int:
        """The reference's load size scaled to this crop (286 for 256)."""
        return round(self.size * 286 / 256)


def parse_scenario(name: str, small: bool) -> Scenario:
    """``pix2pix-256x1`` -> the model, size, batch and how many training images.

    pix2pix at batch 1: 400 pairs; at batch B > 1: 60 steps per epoch (960 pairs at 16); CycleGAN:
    200 images per domain per batch. ``--small``: 8 pairs at batch 1, 4 steps otherwise, CycleGAN 6.
    """
    match = re.fullmatch(r"(pix2pix|cyclegan)-(\d+)x(\d+)", name)
    if not match:
        raise SystemExit(f"scenario {name!r}: expected <pix2pix|cyclegan>-<size>x<batch>, e.g. pix2pix-256x16")
    model, size, batch = match.group(1), int(match.group(2)), int(match.group(3))
    if size < 16 or size % 4 or batch < 1:
        raise SystemExit(f"scenario {name!r}: the size must be a multiple of 4 from 16 up and the batch at least 1")
    if model == "pix2pix":
        images = (8 if batch == 1 else 4 * batch) if small else (400 if batch == 1 else 60 * batch)
    else:
        images = (6 if small else 200) * batch
    return Scenario(name, model, size, batch, images, val=2 if small else 20)


def nectargan_command(python: str) -> list[str]:
    """``nectargan`` as a user calls it: the console script beside this Python, else ``python -m nectargan_core``."""
    script = Path(python).parent / "nectargan"
    return [str(script)] if script.is_file() else [python, "-m", "nectargan_core"]


def synth(root: Path, scenario: Scenario, python: str) -> Path:
    """The scenario's dataset, written once by ``nectargan data synth`` (shared by ours and the reference)."""
    unpaired = scenario.model == "cyclegan"
    out = root / f"{'unpaired' if unpaired else 'paired'}-{scenario.size}-{scenario.images}"
    if not out.exists():
        count = scenario.images + scenario.val
        cmd = [*nectargan_command(python), "data", "synth", str(out), "--size", str(scenario.size),
               "--count", str(count), "--val", repr(scenario.val / count), "--test", "0", "--seed", "0"]
        if unpaired:
            cmd.append("--unpaired")
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    return out


# -- variants ---------------------------------------------------------------------------------------
def default_variants(model: str) -> dict[str, list[str]]:
    variants = {"reference-recipe": ["--preset", REFERENCE_PRESETS[model]]}
    if model == "pix2pix":
        variants["defaults"] = ["--trainer", "pix2pix"]
    return variants


def variant_for(args: list[str], model: str) -> list[str] | None:
    """The variant's arguments for a scenario of ``model``, or None when it names another model's preset/trainer."""
    named = [args[i + 1] for i, a in enumerate(args[:-1]) if a in ("--preset", "--trainer")]
    named += [a.split("=", 1)[1] for a in args if a.startswith(("--preset=", "--trainer="))]
    if "-c" in args or "--config" in args or any(a.startswith("--config=") for a in args):
        return list(args)  # a config file: the user says which scenarios it is for
    if not named:
        return ["--trainer", model, *args]
    return list(args) if all(n.startswith(model) for n in named) else None


def scenario_variants(model: str, extra: dict[str, list[str]], *, defaults: bool = True,
                      recipe_only: bool = False) -> dict[str, list[str]]:
    """The runs of ours for a scenario of ``model``: the default ones (all, only reference-recipe, or none),
    then each ``--variant`` that is for this model."""
    variants = default_variants(model) if defaults else {}
    if recipe_only:
        variants = {name: args for name, args in variants.items() if name == "reference-recipe"}
    for name, args in extra.items():
        chosen = variant_for(args, model)
        if chosen is not None:
            variants[name] = chosen
    return variants


#: Keys the benchmark sets itself to find a run's figures: a variant must not move the run elsewhere.
OWN_KEYS = ("run.name", "run.output_dir")
VARIANT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


def moves_the_run(arg: str) -> bool:
    """Whether a variant's argument sets what the benchmark owns (run.name, run.output_dir) or resumes."""
    if arg in ("--resume", "-o", "--output-dir") or arg.startswith(("--resume=", "--output-dir=")):
        return True
    key, _, value = arg.removeprefix("--set=").partition("=")
    return key in OWN_KEYS or (key == "run" and re.search(r"\b(name|output_dir)\b", value) is not None)


def parse_variants(specs: list[str]) -> dict[str, list[str]]:
    """``--variant NAME=ARGS`` options -> {NAME: argument list}; a name is a file-name-safe word, used once."""
    extra: dict[str, list[str]] = {}
    for spec in specs:
        name, sep, text = spec.partition("=")
        if not sep or not VARIANT_NAME.fullmatch(name) or name == "reference":
            raise SystemExit(f"--variant {spec!r}: expected NAME=ARGS, NAME made of letters, digits, '_', '.' "
                             "and '-' (not 'reference')")
        if name in extra:
            raise SystemExit(f"--variant {name}: given more than once")
        try:
            args = shlex.split(text)
        except ValueError as exc:
            raise SystemExit(f"--variant {name}: {text!r}: {exc}") from None
        moved = [a for a in args if moves_the_run(a)]
        if moved:
            raise SystemExit(f"--variant {name}: {moved[0]} moves the run where the benchmark does not look; "
                             f"leave {', '.join(OWN_KEYS)} to it")
        extra[name] = args
    return extra


def small_overrides(model: str) -> list[str]:
    """--small: ResNet-6 generator and PatchGAN 8 channels wide (the reference gets the same)."""
    if model == "pix2pix":  # the pix2pix generator is a UNet with keys a ResNet lacks: replace it whole
        generator = "models.generator={name: resnet_6blocks, ngf: 8, norm: batch, init: normal, init_gain: 0.02}"
        return ["--set", generator, "--set", "models.discriminator.ndf=8"]
    return ["--set", "models.generator.name=resnet_6blocks", "--set", "models.generator.ngf=8",
            "--set", "models.discriminator.ndf=8"]


def our_command(scenario: Scenario, variant: list[str], data: Path, out: Path, name: str, opts: argparse.Namespace,
                python: str) -> list[str]:
    sets = {
        "data.root": str(data), "data.batch_size": scenario.batch, "data.load_size": scenario.load_size,
        "data.crop_size": scenario.size, "data.num_workers": opts.workers, "loop.epochs": opts.epochs,
        "loop.log_every_steps": opts.log_every, "run.device": opts.device, "run.output_dir": str(out),
        "run.name": name,
    }
    cmd = [*nectargan_command(python), "train"]
    for key, value in sets.items():
        cmd += ["--set", f"{key}={value}"]
    if opts.small:
        cmd += small_overrides(scenario.model)
    return cmd + variant


def reference_command(scenario: Scenario, checkout: Path, data: Path, out: Path, opts: argparse.Namespace,
                      python: str) -> list[str]:
    """The reference's train.py with its own option names (options/base_options.py, train_options.py)."""
    args = [
        "--dataroot", str(data), "--name", f"e2e-{scenario.name}", "--model", REFERENCE_MODELS[scenario.model],
        "--direction", "AtoB", "--n_epochs", str(opts.epochs), "--n_epochs_decay", "0",
        "--batch_size", str(scenario.batch), "--load_size", str(scenario.load_size), "--crop_size", str(scenario.size),
        "--num_threads", str(opts.workers), "--print_freq", str(opts.log_every * scenario.batch),
        "--no_html", "--checkpoints_dir", str(out),
    ]
    options = checkout / "options" / "base_options.py"
    known = options.read_text(encoding="utf-8", errors="replace") if options.is_file() else ""
    if "--display_id" in known:  # before the 2025 rewrite (which dropped visdom and --gpu_ids for torchrun)
        args += ["--display_id", "0"]
    if "--gpu_ids" in known:
        args += ["--gpu_ids", "0" if opts.device == "cuda" else "-1"]
    if scenario.model == "pix2pix":
        args += ["--dataset_mode", "aligned"]
    if opts.small:
        args += ["--netG", "resnet_6blocks", "--ngf", "8", "--ndf", "8"]
    return [python, str(REFERENCE_WRAPPER), str(checkout), *args]


# -- GPU sampling -----------------------------------------------------------------------------------
class GpuSampler:
    """Samples (host time, utilization %, memory used MiB) of one GPU in a thread, every 0.2 s.

    NVML (pynvml) when importable, else ``nvidia-smi -lms 200``; on a CPU run, nothing.
    """

    def __init__(self, enabled: bool, index: int = 0, period: float = 0.2) -> None:
        self.index, self.period = index, period
        self.samples: list[tuple[float, float, float]] = []
        self.source = "none"
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._proc: subprocess.Popen | None = None
        self._nvml = None
        if not enabled:
            return
        try:
            import pynvml  # type: ignore[import-not-found]
            pynvml.nvmlInit()
            self._nvml, self._handle = pynvml, pynvml.nvmlDeviceGetHandleByIndex(index)
            self.source = "nvml"
        except Exception:  # noqa: BLE001 - no pynvml or no driver: fall back
            if shutil.which("nvidia-smi"):
                self.source = "nvidia-smi"

    def start(self) -> "GpuSampler":
        self.samples, self._stop = [], threading.Event()
        if self.source == "nvml":
            self._thread = threading.Thread(target=self._poll_nvml, daemon=True)
        elif self.source == "nvidia-smi":
            self._proc = subprocess.Popen(
                ["nvidia-smi", "-i", str(self.index), "--query-gpu=utilization.gpu,memory.used",
                 "--format=csv,noheader,nounits", "-lms", str(int(self.period * 1000))],
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            self._thread = threading.Thread(target=self._read_smi, daemon=True)
        if self._thread:
            self._thread.start()
        return self

    def stop(self) -> list[tuple[float, float, float]]:
        self._stop.set()
        if self._proc:
            self._proc.terminate()
            self._proc.wait()
            self._proc = None
        if self._thread:
            self._thread.join(timeout=5)
            self._thread = None
        return list(self.samples)

    def _poll_nvml(self) -> None:
        nvml = self._nvml
        while not self._stop.is_set():
            util = nvml.nvmlDeviceGetUtilizationRates(self._handle).gpu
            used = nvml.nvmlDeviceGetMemoryInfo(self._handle).used / 2**20
            self.samples.append((time.time(), float(util), float(used)))
            self._stop.wait(self.period)

    def _read_smi(self) -> None:
        assert self._proc and self._proc.stdout
        for line in self._proc.stdout:
            parts = [p.strip() for p in line.split(",")]
            try:
                self.samples.append((time.time(), float(parts[0]), float(parts[1])))
            except (ValueError, IndexError):
                continue

    def idle_level(self, seconds: float = 1.0) -> float | None:
        """Memory used (MiB) with nothing of ours running: the median over ``seconds``."""
        if self.source == "none":
            return None
        self.start()
        time.sleep(seconds)
        samples = self.stop()
        return statistics.median(s[2] for s in samples) if samples else None


def samples_in_window(samples: list[tuple[float, float, float]], start: float | None,
                      end: float | None) -> list[tuple[float, float, float]]:
    """The samples taken inside [start, end] (the warm epochs); none when the window is unknown or empty."""
    if start is None or end is None or end <= start:
        return []
    return [s for s in samples if start <= s[0] <= end]


def gpu_figures(samples: list[tuple[float, float, float]], warm: tuple[float | None, float | None],
                idle_mib: float | None) -> dict[str, Any]:
    """GPU busy fraction over the warm window and peak memory over the whole run above the idle level."""
    inside = samples_in_window(samples, *warm)
    return {
        "gpu_busy": statistics.fmean(s[1] for s in inside) / 100 if inside else None,
        "gpu_samples_warm": len(inside),
        "gpu_samples": len(samples),
        "peak_mib": max(s[2] for s in samples) - (idle_mib or 0.0) if samples else None,
        "idle_mib": idle_mib,
    }


# -- reading a run ----------------------------------------------------------------------------------
def epoch_figures(ends: list[float], start: float | None, steps: int, batch: int) -> dict[str, Any]:
    """Per-epoch seconds from the epochs' end times and the training start; warm = median after the first."""
    bounds = ([start] if start is not None else [None]) + ends
    epochs = [b - a if a is not None else None for a, b in zip(bounds, bounds[1:])]
    warm = [e for e in epochs[1:] if e is not None]
    warm_s = statistics.median(warm) if warm else None
    return {
        "epoch_s": epochs,
        "first_epoch_s": epochs[0] if epochs else None,
        "warm_epoch_s": warm_s,
        "steps_per_epoch": steps,
        "it_per_s": steps / warm_s if warm_s else None,
        "img_per_s": steps * batch / warm_s if warm_s else None,
        "warm_window": [ends[0], ends[-1]] if len(ends) > 1 else [None, None],
    }


def read_ours(run_dir: Path) -> dict[str, Any]:
    """Epoch end times, the training start and the loss curves from the run's metrics.jsonl."""
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    epochs = [r for r in records if r.get("kind") == "epoch"]
    train = [r for r in records if r.get("kind") == "train"]
    start = epochs[0]["time"] - epochs[0]["elapsed"] if epochs else None
    steps = epochs[0]["step"] if epochs else 0
    curves: dict[str, Any] = {"step": [r["step"] for r in train], "losses": {}}
    for r in train:
        for key, value in r["losses"].items():
            if not key.endswith((".weight", ".raw")):
                curves["losses"].setdefault(key, []).append(value)
    try:  # the engine records when the process's first step ended
        first_step = json.loads((run_dir / "status.json").read_text()).get("first_step_at")
    except (OSError, ValueError):
        first_step = None
    return {"ends": [r["time"] for r in epochs], "train_start": start, "steps": steps, "curves": curves,
            "first_log": train[0]["time"] if train else None, "first_step": first_step}


STAMP = re.compile(r"^@@(\d+\.\d+) (.*)$")
#: ``(epoch: ...) G_GAN: 0.4 ...`` (2024), ``[Rank 0] (epoch: ...) , G_GAN: 0.4, ...`` (since the 2025 DDP rewrite).
LOSS_LINE = re.compile(r"^(?:\[Rank \d+\] )?\(epoch: (\d+), iters: (\d+), time: [-\d.]+, data: [-\d.]+\) (.*)$")
LOSS_ITEM = re.compile(r"(\w+): (-?[\d.]+(?:e[-+]?\d+)?|nan|inf)")
END_LINE = re.compile(r"^End of epoch (\d+) / (\d+) \t Time Taken: (\d+) sec$")


def parse_reference_output(lines: list[str], batch: int, images: int) -> dict[str, Any]:
    """The reference's time-stamped output (``@@<time> <line>``) -> epoch end times, training start, losses.

    Losses come from print_current_losses' lines ``(epoch: E, iters: I, time: T, data: D) name: v ...``,
    where ``iters`` counts images within the epoch; their global step is
    ``(E - 1) * steps_per_epoch + I / batch``. The training start is the time of the last line
    printed before the first loss or end-of-epoch line (the network summary, or the learning-rate
    line where a version updates it at the start of each epoch).
    """
    steps = math.ceil(images / batch)
    ends: dict[int, float] = {}
    curves: dict[str, Any] = {"step": [], "losses": {}}
    start = previous = first_log = None
    for raw in lines:
        stamp = STAMP.match(raw.rstrip("\n"))
        if not stamp:
            continue
        t, text = float(stamp.group(1)), stamp.group(2)
        loss, end = LOSS_LINE.match(text), END_LINE.match(text)
        if (loss or end) and start is None:
            start = previous
        if loss:
            first_log = t if first_log is None else first_log
            epoch, iters = int(loss.group(1)), int(loss.group(2))
            curves["step"].append((epoch - 1) * steps + math.ceil(iters / batch))
            for name, value in LOSS_ITEM.findall(loss.group(3)):
                curves["losses"].setdefault(name, []).append(float(value))
        elif end:
            ends[int(end.group(1))] = t
        previous = t
    return {"ends": [ends[k] for k in sorted(ends)], "train_start": start, "steps": steps, "curves": curves,
            "first_log": first_log}


# -- running ----------------------------------------------------------------------------------------
#: Set by main: --small on a CPU runs every child with one torch thread (see child_env).
SMALL_CPU = False


def child_env() -> dict[str, str]:
    """The runs' environment: this one, unbuffered; --small on a CPU adds OMP_NUM_THREADS=1.

    Tiny steps on a shared CPU stall for seconds when torch's threads wait for cores that other
    processes hold; one thread keeps the CI check quick. Full runs keep torch's own choice.
    """
    env = dict(os.environ)
    env.setdefault("PYTHONUNBUFFERED", "1")
    if SMALL_CPU:
        env["OMP_NUM_THREADS"] = "1"
    return env


#: Set by main from --run-timeout: seconds one run may take before it is killed (None: no limit).
RUN_TIMEOUT: float | None = None


def run_process(cmd: list[str], log: Path, sampler: GpuSampler, cwd: Path | None = None) -> dict[str, Any]:
    """Run ``cmd`` to the end with its output in ``log``, sampling the GPU meanwhile; launch time and status.

    A run killed at ``--run-timeout`` counts as failed (exit -9), so that one hung run leaves the
    others of a time-limited session their time.
    """
    sampler.start()
    launched = time.time()
    with log.open("w") as out:
        try:
            returncode = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=cwd, env=child_env(),
                                        timeout=RUN_TIMEOUT).returncode
        except subprocess.TimeoutExpired:
            returncode = -9
    finished = time.time()
    samples = sampler.stop()
    timed_out = returncode == -9 and RUN_TIMEOUT is not None and finished - launched >= RUN_TIMEOUT
    if returncode != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-25:])
        why = f"timed out after {RUN_TIMEOUT:g} s (--run-timeout)" if timed_out else f"exit {returncode}"
        print(f"    FAILED ({why}): {shlex.join(cmd)}\n{tail}", flush=True)
    return {"returncode": returncode, "launched": launched, "wall_s": finished - launched, "samples": samples,
            **({"timed_out": True} if timed_out else {})}


def summarise(parsed: dict[str, Any], proc: dict[str, Any], batch: int, idle_mib: float | None) -> dict[str, Any]:
    figures = epoch_figures(parsed["ends"], parsed["train_start"], parsed["steps"], batch)
    launched = proc["launched"]
    figures.update(gpu_figures(proc["samples"], tuple(figures["warm_window"]), idle_mib))
    figures.update({
        "returncode": proc["returncode"], "process_wall_s": proc["wall_s"],
        "start_to_training_s": parsed["train_start"] - launched if parsed["train_start"] else None,
        "start_to_first_epoch_s": parsed["ends"][0] - launched if parsed["ends"] else None,
        "curves": parsed["curves"],
    })
    if parsed.get("first_log") is not None:
        figures["start_to_first_log_s"] = parsed["first_log"] - launched
    if isinstance(parsed.get("first_step"), (int, float)):
        figures["start_to_first_step_s"] = parsed["first_step"] - launched
    return figures


def run_ours(scenario: Scenario, name: str, variant: list[str], data: Path, work: Path, opts: argparse.Namespace,
             sampler: GpuSampler) -> dict[str, Any]:
    out = work / "runs" / scenario.name
    cmd = our_command(scenario, variant, data, out, name, opts, sys.executable)
    idle = sampler.idle_level() if sampler.source != "none" else None
    proc = run_process(cmd, work / f"{scenario.name}-{name}.log", sampler)
    result: dict[str, Any] = {"command": shlex.join(cmd)}
    runs = sorted((out / name).glob("version_*"), key=lambda p: int(p.name.split("_")[1]))
    if proc["returncode"] != 0 or not runs:
        return {**result, "returncode": proc["returncode"] or 1, **failure_of(proc, runs)}
    return {**result, **summarise(read_ours(runs[-1]), proc, scenario.batch, idle)}


def failure_of(proc: dict[str, Any], runs: list[Path]) -> dict[str, Any]:
    """Why a run of ours has no figures: it timed out, failed, or left no run directory where it was told to."""
    if proc.get("timed_out"):
        return {"timed_out": True}
    if proc["returncode"] == 0 and not runs:
        print("    FAILED: the run left no run directory where the benchmark looks for it", flush=True)
        return {"error": "no run directory"}
    return {}


def run_reference(scenario: Scenario, data: Path, work: Path, opts: argparse.Namespace,
                  sampler: GpuSampler) -> dict[str, Any]:
    out = work / "reference" / scenario.name
    cmd = reference_command(scenario, opts.reference, data, out, opts, sys.executable)
    idle = sampler.idle_level() if sampler.source != "none" else None
    log = work / f"{scenario.name}-reference.log"
    proc = run_process(cmd, log, sampler, cwd=opts.reference)
    result: dict[str, Any] = {"command": shlex.join(cmd)}
    if proc["returncode"] != 0:
        return {**result, "returncode": proc["returncode"], **({"timed_out": True} if proc.get("timed_out") else {})}
    parsed = parse_reference_output(log.read_text(errors="replace").splitlines(), scenario.batch, scenario.images)
    return {**result, **summarise(parsed, proc, scenario.batch, idle)}


def add_ratios(rows: dict[str, dict[str, Any]]) -> None:
    """Each variant's warm epoch time and img/s against the reference's (time < 1 and img/s > 1: ours is faster)."""
    ref = rows.get("reference") or {}
    for name, row in rows.items():
        if name == "reference":
            continue
        ok = ref.get("warm_epoch_s") and row.get("warm_epoch_s")
        row["warm_epoch_vs_reference"] = row["warm_epoch_s"] / ref["warm_epoch_s"] if ok else None
        ok = ref.get("img_per_s") and row.get("img_per_s")
        row["img_per_s_vs_reference"] = row["img_per_s"] / ref["img_per_s"] if ok else None


# -- environment and report -------------------------------------------------------------------------
CPU_FLAGS = ("avx2", "avx512f", "avx512_bf16", "avx512_vnni", "amx_tile", "amx_bf16", "amx_int8")


def machine(device: str) -> dict[str, Any]:
    """CPU model and the flags torch's kernels depend on; torch; the GPU (name, driver, CUDA, cuDNN) on CUDA."""
    import torch

    sys.path.insert(0, str(HERE))
    import run as bench  # benchmarks/run.py: CPU model, torch's CPU capability, oneDNN bf16

    info = bench.machine()
    try:
        os.rmdir(bench.TMP)  # run.py makes a scratch folder when imported; this script does not use it
    except OSError:
        pass
    flags: set[str] = set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                break
    except OSError:
        pass
    info["cpu_flags"] = [f for f in CPU_FLAGS if f in flags]
    info["torch_cuda"] = torch.version.cuda
    if device == "cuda":
        import gpu  # benchmarks/gpu.py: device name, capability, memory, CUDA and cuDNN versions (printed)

        info["gpu"] = gpu.environment()
        try:
            smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                                  "--format=csv,noheader"], capture_output=True, text=True, timeout=30)
            info["nvidia_smi"] = smi.stdout.strip().splitlines()[0] if smi.stdout.strip() else None
        except (OSError, subprocess.SubprocessError):
            info["nvidia_smi"] = None
    return info


def cpu_dependence(device: str) -> str:
    if device == "cpu":
        return ("CPU run: every figure depends on the CPU and its flags (convolutions: AVX2/AVX-512 kernels; "
                "bf16 autocast: AVX512_BF16/AMX; data loading and PNG decoding: cores).")
    return ("GPU run: first epoch and start-up times depend on the CPU (imports, worker start, decoding); warm "
            "figures depend on it where GPU busy % is well below 100 (the loader or the host side of the step "
            "limits them); peak MiB and the loss curves do not.")


def fmt(value: Any, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def table(scenario: Scenario, rows: dict[str, dict[str, Any]]) -> str:
    lines = [f"\n{scenario.name}: {scenario.images} training {'pairs' if scenario.model == 'pix2pix' else 'images per domain'}, "
             f"batch {scenario.batch}, {math.ceil(scenario.images / scenario.batch)} steps per epoch",
             "| variant | launch to 1st step s | launch to 1st epoch end s | first epoch s | warm epoch s | it/s | img/s "
             "| GPU busy % | peak MiB | warm epoch / ref | img/s / ref |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, r in rows.items():
        if r.get("returncode"):
            why = (f"timed out ({RUN_TIMEOUT:g} s)" if r.get("timed_out") else r.get("error")
                   or f"failed (exit {r['returncode']})")
            lines.append(f"| {name} | {why} | | | | | | | | | |")
            continue
        busy = r.get("gpu_busy")
        lines.append(
            f"| {name} | {fmt(r.get('start_to_first_step_s'), '.2f')} | {fmt(r.get('start_to_first_epoch_s'), '.2f')} | "
            f"{fmt(r.get('first_epoch_s'), '.2f')} | {fmt(r.get('warm_epoch_s'), '.2f')} | "
            f"{fmt(r.get('it_per_s'), '.2f')} | {fmt(r.get('img_per_s'), '.2f')} | "
            f"{fmt(busy * 100 if busy is not None else None, '.0f')} | {fmt(r.get('peak_mib'), '.0f')} | "
            f"{fmt(r.get('warm_epoch_vs_reference'), '.3f')} | {fmt(r.get('img_per_s_vs_reference'), '.3f')} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=["cuda", "cpu"], default=None, help="default: cuda when available")
    parser.add_argument("--scenarios", default=None,
                        help="comma-separated <pix2pix|cyclegan>-<size>x<batch> (default: pix2pix-256x1,pix2pix-256x16,"
                             "cyclegan-256x1; --small: pix2pix-32x1,pix2pix-32x4,cyclegan-32x1)")
    parser.add_argument("--epochs", type=int, default=None, help="epochs per run (default 3; --small: 2)")
    parser.add_argument("--reference", type=Path, default=None, help="a checkout of junyanz/pytorch-CycleGAN-and-pix2pix")
    parser.add_argument("--variant", action="append", default=[], metavar="NAME=ARGS",
                        help="another run of ours: nectargan train ARGS (repeatable)")
    defaults = parser.add_mutually_exclusive_group()
    defaults.add_argument("--no-defaults", action="store_true", help="run only the --variant runs (and the reference)")
    defaults.add_argument("--recipe-only", action="store_true",
                          help="of the default runs, only reference-recipe (leave out the plain defaults)")
    parser.add_argument("--workers", type=int, default=None, help="loader workers (default: 4 on CUDA, 0 on CPU)")
    parser.add_argument("--run-timeout", type=float, default=None, metavar="S",
                        help="kill a run (ours or the reference's) after S seconds and count it as failed")
    parser.add_argument("--json", type=Path, default=None, help="write every figure and the loss curves here")
    parser.add_argument("--work-dir", type=Path, default=None, help="data, runs and logs (default: a temporary folder)")
    parser.add_argument("--small", action="store_true", help="tiny sizes for a CPU/CI check (figures compare nothing)")
    opts = parser.parse_args()

    if opts.device is None:
        import torch
        opts.device = "cuda" if torch.cuda.is_available() else "cpu"
    opts.epochs = opts.epochs if opts.epochs is not None else (2 if opts.small else 3)
    opts.workers = opts.workers if opts.workers is not None else (4 if opts.device == "cuda" else 0)
    opts.log_every = SMALL_LOG_EVERY_STEPS if opts.small else LOG_EVERY_STEPS
    global SMALL_CPU, RUN_TIMEOUT
    SMALL_CPU = opts.small and opts.device == "cpu"
    RUN_TIMEOUT = opts.run_timeout
    names = opts.scenarios if opts.scenarios is not None else (
        "pix2pix-32x1,pix2pix-32x4,cyclegan-32x1" if opts.small else "pix2pix-256x1,pix2pix-256x16,cyclegan-256x1")
    scenarios = [parse_scenario(n.strip(), opts.small) for n in names.split(",") if n.strip()]
    if not scenarios:
        raise SystemExit(f"--scenarios {names!r}: no scenario given")
    twice = sorted({s.name for s in scenarios if [t.name for t in scenarios].count(s.name) > 1})
    if twice:
        raise SystemExit(f"--scenarios: {', '.join(twice)} given more than once")
    if opts.epochs < 1:
        raise SystemExit(f"--epochs {opts.epochs}: must be at least 1")
    if opts.run_timeout is not None and not (math.isfinite(opts.run_timeout) and opts.run_timeout > 0):
        raise SystemExit(f"--run-timeout {opts.run_timeout}: must be a number of seconds above 0")
    if opts.workers < 0:
        raise SystemExit(f"--workers {opts.workers}: must be 0 or more")
    extra = parse_variants(opts.variant)
    for scenario in scenarios:
        if not scenario_variants(scenario.model, extra, defaults=not opts.no_defaults, recipe_only=opts.recipe_only) \
                and opts.reference is None:
            raise SystemExit(f"scenario {scenario.name}: nothing to run (no run of ours is for {scenario.model} "
                             "and no --reference)")
    if opts.json is not None and not opts.json.parent.is_dir():
        raise SystemExit(f"--json {opts.json}: its folder does not exist")
    if opts.work_dir is not None and opts.work_dir.exists() and not opts.work_dir.is_dir():
        raise SystemExit(f"--work-dir {opts.work_dir}: not a folder")
    if opts.reference is not None:
        opts.reference = opts.reference.resolve()
        if not (opts.reference / "train.py").is_file():
            raise SystemExit(f"--reference {opts.reference}: no train.py there")
    work = opts.work_dir or Path(tempfile.mkdtemp(prefix="nectargan-e2e-"))
    work.mkdir(parents=True, exist_ok=True)

    env = machine(opts.device)
    sampler = GpuSampler(enabled=opts.device == "cuda")
    print(f"machine: {json.dumps(env)}", flush=True)
    gpu_name = env["gpu"]["device"] if isinstance(env.get("gpu"), dict) else "none"
    print(f"CPU {env['cpu']} ({env['cores']} cores; flags: {' '.join(env['cpu_flags']) or 'none of ' + ', '.join(CPU_FLAGS)}; "
          f"torch CPU capability {env['cpu_capability']}, oneDNN bf16 {env['mkldnn_bf16_supported']}), "
          f"torch {env['torch']}, GPU {gpu_name}", flush=True)
    print(cpu_dependence(opts.device), flush=True)
    print(f"device {opts.device}, {opts.epochs} epochs per run, loader workers {opts.workers}, "
          f"loop.log_every_steps {opts.log_every}, GPU samples: {sampler.source}"
          f"{', OMP_NUM_THREADS=1 (--small on a CPU)' if SMALL_CPU else ''}; work dir {work}", flush=True)

    results: dict[str, Any] = {
        "machine": env, "device": opts.device, "epochs": opts.epochs, "workers": opts.workers,
        "log_every_steps": opts.log_every, "small": opts.small, "gpu_sampler": sampler.source,
        "cpu_dependence": cpu_dependence(opts.device), "scenarios": {},
    }
    started = time.time()
    failed = False
    datasets = {}
    for scenario in scenarios:  # every dataset first: a scenario whose data cannot be made fails in seconds
        try:
            datasets[scenario.name] = synth(work / "data", scenario, sys.executable)
        except subprocess.CalledProcessError as exc:
            said = (exc.stderr or "").strip().splitlines()
            raise SystemExit(f"scenario {scenario.name}: nectargan data synth failed: "
                             f"{said[-1] if said else f'exit {exc.returncode}'}") from None
    for scenario in scenarios:
        data = datasets[scenario.name]
        variants = scenario_variants(scenario.model, extra, defaults=not opts.no_defaults,
                                     recipe_only=opts.recipe_only)
        rows: dict[str, dict[str, Any]] = {}
        for name, args in variants.items():
            print(f"  {scenario.name} {name} ...", flush=True)
            rows[name] = run_ours(scenario, name, args, data, work, opts, sampler)
        if opts.reference is not None:
            print(f"  {scenario.name} reference ...", flush=True)
            rows["reference"] = run_reference(scenario, data, work, opts, sampler)
        add_ratios(rows)
        failed |= any(r.get("returncode") for r in rows.values())
        results["scenarios"][scenario.name] = {
            "model": scenario.model, "size": scenario.size, "batch": scenario.batch, "images": scenario.images,
            "data": str(data), "loss_names_ours_to_reference": LOSS_NAMES[scenario.model], "runs": rows,
        }
        print(table(scenario, rows), flush=True)
        if opts.json:  # after every scenario: a run stopped by a time limit keeps the scenarios done
            opts.json.write_text(json.dumps(results, indent=2))
    results["total_wall_s"] = time.time() - started
    print(f"\ntotal {results['total_wall_s']:.0f} s", flush=True)
    if opts.json:
        opts.json.write_text(json.dumps(results, indent=2))
        print(f"wrote {opts.json}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
