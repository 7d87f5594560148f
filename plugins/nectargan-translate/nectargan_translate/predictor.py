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

from nectargan_core import ConfigError, NectarGANError, atomic_write_text, new_folder

from .data.augment import normalise
from .data.decode import read_image, to_channels
from .evaluation import to_unit
from .files import Job, plan
from .images import PNG_COMPRESSION, Fit, FitMode, save_png, to_uint8
from .inference import LoadedGenerator, load_generator
from .tiling import Tiling, run_sized, tiling_for


@dataclass
class PredictReport:
    """What :func:`predict` did: the generator used, the output folder, how images were fitted, the files written."""

    generator: LoadedGenerator
    out_dir: Path
    fit: Fit | Tiling
    written: list[Path]
    #: ``--scale``: the factor inputs were resized by before the generator (outputs keep that size), or None.
    scale: Optional[float] = None
    #: Inputs larger than the training size that ran whole (not tiled), for a note.
    larger: int = 0

    def describe_fit(self) -> str:
        """How the images were sized for the generator, in words (the summary line and ``predict.json``)."""
        scaled = f"scaled by {self.scale:g}, " if self.scale is not None else ""
        return scaled + self.fit.describe()

    def summary(self) -> str:
        """One line for the command's output: how many images were written where, by which weights and fit."""
        count = len(self.written)
        direction = f"{self.generator.direction}, " if len(self.generator.directions) > 1 else ""
        return (f"wrote {count} image{'s' if count != 1 else ''} to {self.out_dir} ({direction}{self.generator.label}; "
                f"{self.describe_fit()}) and {RECORD}")

    def notes(self) -> list[str]:
        """Advice for the user (stderr): images far larger than the training size that ran whole."""
        size = self.generator.training_size
        if not self.larger or not size:
            return []
        return [f"note: {self.larger} image(s) are larger than the training size {size}x{size} and ran whole, at "
                f"a scale the model did not train at and with memory for every pixel; --tile {size} runs them in "
                f"tiles of the training size (add --scale to shrink them first)"]


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
            direction: Optional[str] = None, tile: Optional[int | str] = None, overlap: Optional[int] = None,
            scale: Optional[float] = None) -> PredictReport:
    """Find and check ``inputs`` (:func:`~nectargan_translate.files.plan`), then :func:`predict_jobs`."""
    return predict_jobs(target, plan(inputs, Path(out_dir), recursive), out_dir, which=which,
                        batch_size=batch_size, device=device, fit=fit, size=size, png_compression=png_compression,
                        arch=arch, arch_options=arch_options, direction=direction, tile=tile, overlap=overlap,
                        scale=scale)


def predict_jobs(target: str | Path, jobs: list[Job], out_dir: Path, *, which: str = "latest",
                 batch_size: int = 1, device: str | torch.device = "cpu", fit: FitMode = "pad",
                 size: Optional[tuple[int, int]] = None, png_compression: int = PNG_COMPRESSION,
                 arch: Optional[str] = None, arch_options: Sequence[str] = (),
                 direction: Optional[str] = None, tile: Optional[int | str] = None, overlap: Optional[int] = None,
                 scale: Optional[float] = None) -> PredictReport:
    """Generate an output PNG (zlib level ``png_compression``) for every job; return what was written.

    ``direction`` picks the generator (CycleGAN: ``AtoB`` or ``BtoA``; None: the checkpoint's first).
    With ``arch``, ``target`` is a reference state dict (see :func:`~nectargan_translate.inference.load_generator`).
    ``tile`` (a side, or ``"auto"``: the training size) runs each image in overlapping tiles blended without
    seams (:class:`~nectargan_translate.tiling.Tiling`; ``overlap`` default: a quarter of the tile), ``batch_size``
    tiles at a time. ``scale`` resizes each input by that factor first; outputs keep the scaled size.
    """
    if (tile is not None or scale is not None) and (fit != "pad" or size is not None):
        what = "--tile" if tile is not None else "--scale"
        raise ConfigError(f"{what} runs images at their own size: it does not go with --crop, --resize or --size")
    if overlap is not None and tile is None:
        raise ConfigError("--overlap goes with --tile")
    generator = load_generator(target, which, device=device, arch=arch, arch_options=arch_options,
                               direction=direction)
    if tile is not None or scale is not None:
        return _predict_each(generator, jobs, Path(out_dir), tile=tile, overlap=overlap, scale=scale,
                             batch_size=batch_size, png_compression=png_compression)
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
        training = generator.training_size
        larger = sum(1 for job in jobs if training and max(job.height, job.width) > 2 * training) \
            if sizing.mode == "pad" else 0
        report = PredictReport(generator, Path(out_dir), sizing, written, larger=larger)
        write_record(report)
    return report


def _predict_each(generator: LoadedGenerator, jobs: list[Job], out_dir: Path, *, tile: Optional[int | str],
                  overlap: Optional[int], scale: Optional[float], batch_size: int,
                  png_compression: int) -> PredictReport:
    """One image at a time: scaled by ``scale``, then in blended tiles (``tile``) or whole (reflect-padded)."""
    from torchvision.transforms.v2 import functional as F

    from .data.augment import INTERPOLATION

    sizing: Fit | Tiling = (tiling_for(tile, overlap, generator.training_size, generator.size_multiple)
                            if tile is not None else Fit("pad", generator.size_multiple))
    if scale is not None and not 0 < scale <= 8:
        raise ConfigError(f"--scale {scale:g}: must be above 0 and at most 8")
    in_channels = generator.channels[0]
    model = generator.model
    model_device = next(model.parameters()).device
    interpolation = INTERPOLATION[generator.config.data.options.get("interpolation", "bicubic")]
    written: list[Path] = []
    with new_folder(out_dir), torch.inference_mode():
        for job in jobs:
            image = normalise(to_channels(read_image(job.source), in_channels)[None])
            if scale is not None:
                size = [max(1, round(job.height * scale)), max(1, round(job.width * scale))]
                image = F.resize(image, size, interpolation=interpolation, antialias=True)
            output = run_sized(model, image, sizing, device=model_device, tiles_per_pass=batch_size)
            written.append(save_png(out_dir / job.output, to_uint8(to_unit(output[0])).cpu(), png_compression))
        report = PredictReport(generator, out_dir, sizing, written, scale=scale)
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
        "fit": report.describe_fit(),
        "written": time.strftime("%Y-%m-%d %H:%M:%S"),
        "outputs": sorted(str(path.relative_to(report.out_dir)) for path in report.written),
    }
    path = report.out_dir / RECORD
    report.out_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(record, indent=2) + "\n")
    return path
