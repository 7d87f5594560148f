"""``nectargan predict``: a trained generator over image files and folders.

Inputs are found and checked first (:mod:`.files`). Each image is then
converted to the generator's input channels (grey to RGB, alpha dropped,
16-bit scaled by its full range), fitted to the sizes the generator accepts
(:class:`~nectargan_pix2pix.images.Fit`), and batched with others of the
same input size. Outputs are 8-bit PNGs named after their inputs; a folder's
sub-folders are mirrored under the output folder.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional, Sequence

import torch

from .data.augment import normalise
from .data.decode import read_image, to_channels
from .evaluation import to_unit
from .files import Job, plan
from .images import Fit, FitMode, save_png
from .inference import LoadedGenerator, load_generator


@dataclass
class PredictReport:
    generator: LoadedGenerator
    out_dir: Path
    fit: Fit
    written: list[Path]

    def summary(self) -> str:
        count = len(self.written)
        return (f"wrote {count} image{'s' if count != 1 else ''} to {self.out_dir} ({self.generator.name}, "
                f"epoch {self.generator.epoch}; {self.fit.describe()})")


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
            size: Optional[tuple[int, int]] = None) -> PredictReport:
    """Find and check ``inputs`` (:func:`~nectargan_pix2pix.files.plan`), then :func:`predict_jobs`."""
    return predict_jobs(target, plan(inputs, Path(out_dir), recursive), out_dir, which=which,
                        batch_size=batch_size, device=device, fit=fit, size=size)


def predict_jobs(target: str | Path, jobs: list[Job], out_dir: Path, *, which: str = "latest",
                 batch_size: int = 1, device: str | torch.device = "cpu", fit: FitMode = "pad",
                 size: Optional[tuple[int, int]] = None) -> PredictReport:
    """Generate an output PNG for every job; return what was written."""
    generator = load_generator(target, which, device=device)
    if fit == "resize" and size is None and generator.training_size:
        size = (generator.training_size, generator.training_size)
    sizing = Fit(fit, generator.size_multiple, size, generator.config.data.options.get("interpolation", "bicubic"))
    groups = list(batches(jobs, sizing, batch_size))  # a crop that does not fit fails before any work

    in_channels = generator.channels[0]
    model = generator.model
    model_device = next(model.parameters()).device
    written = []
    with torch.no_grad():
        for group in groups:
            images = [to_channels(read_image(job.source), in_channels) for job in group]
            batch = torch.cat([sizing.prepare(image[None]) for image in images])
            outputs = model(normalise(batch).to(model_device))
            for job, output in zip(group, outputs):
                restored = sizing.restore(output[None], job.height, job.width)[0]
                written.append(save_png(Path(out_dir) / job.output, to_unit(restored)))
    return PredictReport(generator, Path(out_dir), sizing, written)
