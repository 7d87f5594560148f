"""``nectargan predict``: a trained generator over image files and folders.

Inputs are found and checked first (:mod:`.files`). Each image is then
converted to the generator's input channels (grey to RGB, alpha dropped,
16-bit scaled by its full range), fitted to the sizes the generator accepts
(:class:`~nectargan_translate.images.Fit`), and batched with others of the
same input size. Outputs are 8-bit PNGs named after their inputs; a folder's
sub-folders are mirrored under the output folder. ``predict.json`` beside them
records which weights made them (checkpoint, epoch, step) and lists them.
"""

from __future__ import annotations

import json
import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional, Sequence

import torch

from nectargan_core import atomic_write_text, new_folder

from .data.augment import normalise
from .data.decode import read_image, to_channels
from .evaluation import to_unit
from .files import Job, plan
from .images import PNG_COMPRESSION, Fit, FitMode, save_png, to_uint8
from .inference import LoadedGenerator, load_generator


@dataclass
class PredictReport:
    """What :func:`predict` did: the generator used, the output folder, how images were fitted, the files written."""

    generator: LoadedGenerator
    out_dir: Path
    fit: Fit
    written: list[Path]

    def summary(self) -> str:
        """One line for the command's output: how many images were written where, by which weights and fit."""
        count = len(self.written)
        direction = f"{self.generator.direction}, " if len(self.generator.directions) > 1 else ""
        return (f"wrote {count} image{'s' if count != 1 else ''} to {self.out_dir} ({direction}{self.generator.label}; "
                f"{self.fit.describe()}) and {RECORD}")


def batches(jobs: list[Job], fit: Fit, batch_size: int) -> Iterator[list[Job]]:
    """Jobs grouped by generator input size (in order of first appearance), ``batch_size`` at a time."""
    groups: dict[tuple[int, int], list[Job]] = {}
    for job in jobs:
        groups.setdefault(fit.input_shape(job.height, job.width), []).append(job)
    for group in groups.values():
        for start in range(0, len(group), batch_size):
            yield group[start:start + batch_size]


def predict(target: str | Path, inputs: Sequence[str | Path], out_dir: Path, *, recursive: bool = False,
            which: str = "latest", batch_size: int = 1, device: str | torch.device = "cpu", fit: FitMode = "pad",
            size: Optional[tuple[int, int]] = None, png_compression: int = PNG_COMPRESSION,
            arch: Optional[str] = None, arch_options: Sequence[str] = (),
            direction: Optional[str] = None) -> PredictReport:
    """Find and check ``inputs`` (:func:`~nectargan_translate.files.plan`), then :func:`predict_jobs`."""
    return predict_jobs(target, plan(inputs, Path(out_dir), recursive), out_dir, which=which,
                        batch_size=batch_size, device=device, fit=fit, size=size, png_compression=png_compression,
                        arch=arch, arch_options=arch_options, direction=direction)


def predict_jobs(target: str | Path, jobs: list[Job], out_dir: Path, *, which: str = "latest",
                 batch_size: int = 1, device: str | torch.device = "cpu", fit: FitMode = "pad",
                 size: Optional[tuple[int, int]] = None, png_compression: int = PNG_COMPRESSION,
                 arch: Optional[str] = None, arch_options: Sequence[str] = (),
                 direction: Optional[str] = None) -> PredictReport:
    """Generate an output PNG (zlib level ``png_compression``) for every job; return what was written.

    ``direction`` picks the generator (CycleGAN: ``AtoB`` or ``BtoA``; None: the checkpoint's first).
    With ``arch``, ``target`` is a reference state dict (see :func:`~nectargan_translate.inference.load_generator`).
    """
    generator = load_generator(target, which, device=device, arch=arch, arch_options=arch_options,
                               direction=direction)
    if fit == "resize" and size is None and generator.training_size:
        size = (generator.training_size, generator.training_size)
    sizing = Fit(fit, generator.size_multiple, size, generator.config.data.options.get("interpolation", "bicubic"))
    groups = list(batches(jobs, sizing, batch_size))  # a crop that does not fit fails before any work

    in_channels = generator.channels[0]
    model = generator.model
    model_device = next(model.parameters()).device
    # On an accelerator, PNG encoding and the atomic write (PIL and zlib release the GIL) run on one
    # background thread, overlapping the next batch's decode and forward pass (at most 2 * batch_size
    # images wait). On a CPU the forward pass already uses every core, so writes stay inline.
    pending: deque[Future[Path]] = deque()
    written: list[Path] = []
    background = model_device.type != "cpu"
    with new_folder(Path(out_dir)), ThreadPoolExecutor(max_workers=1, thread_name_prefix="nectargan-png") as writer, \
            torch.inference_mode():
        for group in groups:
            images = [to_channels(read_image(job.source), in_channels) for job in group]
            batch = torch.cat([sizing.prepare(image[None]) for image in images])
            outputs = model(normalise(batch).to(model_device))
            # one conversion to 8-bit pixels per batch (resize restores in float first, per image)
            pixels = to_uint8(to_unit(outputs)).cpu() if sizing.mode != "resize" else None
            for index, job in enumerate(group):
                if pixels is None:
                    image = to_uint8(to_unit(sizing.restore(outputs[index:index + 1], job.height, job.width)[0]))
                else:
                    image = sizing.restore(pixels[index:index + 1], job.height, job.width)[0]
                if background:
                    pending.append(writer.submit(save_png, Path(out_dir) / job.output, image, png_compression))
                else:
                    written.append(save_png(Path(out_dir) / job.output, image, png_compression))
            while len(pending) > 2 * batch_size:
                written.append(pending.popleft().result())
        written.extend(future.result() for future in pending)
        report = PredictReport(generator, Path(out_dir), sizing, written)
        write_record(report)
    return report


#: What ``predict`` writes beside its outputs: which weights made them.
RECORD = "predict.json"


def write_record(report: PredictReport) -> Path:
    """``OUT_DIR/predict.json``: the checkpoint, its epoch and step, the fit, and the files this call wrote."""
    generator = report.generator
    record = {
        "checkpoint": str(generator.checkpoint.resolve()),
        "checkpoint_name": generator.checkpoint.name,
        "epoch": generator.epoch,
        "global_step": generator.global_step,
        "direction": generator.direction,
        "fit": report.fit.describe(),
        "written": time.strftime("%Y-%m-%d %H:%M:%S"),
        "outputs": sorted(str(path.relative_to(report.out_dir)) for path in report.written),
    }
    path = report.out_dir / RECORD
    report.out_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(record, indent=2) + "\n")
    return path
