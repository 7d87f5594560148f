"""``nectargan test``: a checkpoint's generator over one split of its dataset, scored image by image.

The split is read the way validation reads it: in order, never augmented,
with the split's own deterministic preprocessing (``data.<split>.preprocess``).
Results go to ``RUN_DIR/test/<checkpoint>-<split>/``::

    metrics.json   mean and per-image L1, PSNR, SSIM; checkpoint, epoch, mode; the output = input baseline
    metrics.csv    one row per image, then a ``mean`` row
    images/        the generator's outputs, one PNG per input, named after it
    grids/         input | output | target per image (with ``grid=True``)

``mode="eval"`` runs G in eval mode (dropout off, BN running statistics);
without ``mode`` the run's config decides (``test.mode``, eval by default).
``mode="train"`` reproduces the reference's test behaviour, which never calls
``eval()``: dropout on and BN on the statistics of each batch (so results
depend on the batch size; the reference uses 1). The saved weights are never
changed, and dropout draws from ``run.seed``, so either mode is repeatable.
"""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Optional, Sequence

import torch

from nectargan_core.atomic import atomic_write_text
from nectargan_core.errors import NectarGANError

from .data.dataset import PairedDataset
from .data.errors import DatasetError
from .data.loader import build_dataloader
from .evaluation import METRICS, per_image, to_unit
from .examples import save_grid
from .files import output_names
from .images import Fit, save_png
from .inference import LoadedGenerator, load_generator, run_dir_of
from .evaluation import evaluation_mode

Mode = Literal["eval", "train"]
BASELINE = "output = input (no generator)"


@dataclass
class EvaluationReport:
    """What :func:`run_test` measured: per-image values by metric (in ``names`` order) and their means."""

    out_dir: Path
    generator: LoadedGenerator
    split: str
    mode: Mode
    names: list[str]
    values: dict[str, list[float]]
    mean: dict[str, float]
    baseline: Optional[dict[str, float]]

    def summary(self) -> str:
        """One line: what was tested and how it scored, next to the trivial baseline."""
        line = (f"{self.split}: {len(self.names)} images, {self.generator.name} (epoch {self.generator.epoch}), "
                f"{self.mode} mode: {format_metrics(self.mean)}")
        if self.baseline is not None:
            line += f" | output=input: {format_metrics(self.baseline)}"
        return line


def format_metrics(values: dict[str, float]) -> str:
    return f"L1 {values['l1']:.4f}  PSNR {values['psnr']:.2f} dB  SSIM {values['ssim']:.4f}"


def split_dataset(generator: LoadedGenerator, split: str, *, data_root: Optional[Path],
                  batch_size: Optional[int]) -> PairedDataset:
    """``split`` of the run's dataset, preprocessed like validation (the train split too, unaugmented)."""
    data = generator.config.data
    if data.name != "paired":
        raise NectarGANError(f"nectargan test reads paired datasets; this run's dataset is '{data.name}'")
    options = dict(data.options)
    if data_root is None and not options.get("root"):
        raise DatasetError(f"{generator.checkpoint}: its config names no dataset folder (data.root), as for "
                           "imported weights; pass --data-root DIR")
    root = Path(data_root) if data_root is not None else Path(options["root"])
    if not root.is_dir():
        raise DatasetError(f"{root}: the run's dataset folder (data.root) was not found from here; "
                           "pass --data-root DIR")
    options["root"] = str(root)
    view = "val" if split == "train" else split
    view_options = dict(options[view])
    if split == "train":
        view_options["folder"] = "train"
    if batch_size is not None:
        view_options["batch_size"] = batch_size
    if view_options["preprocess"] == "none":
        view_options["batch_size"] = 1  # images keep their own sizes, which a batch cannot mix
    options[view] = view_options
    return PairedDataset(options, view, seed=generator.config.run.seed)


def run_test(target: str | Path, which: str = "latest", *, split: str = "test", mode: Optional[Mode] = None,
             out_dir: Optional[Path] = None, batch_size: Optional[int] = None, device: str | torch.device = "cpu",
             data_root: Optional[Path] = None, grid: bool = False, arch: Optional[str] = None,
             arch_options: Sequence[str] = ()) -> EvaluationReport:
    """Run the generator over ``split``, write metrics and images, and return the scores.

    With ``arch``, ``target`` is a reference state dict (see :func:`~nectargan_pix2pix.inference.load_generator`).
    """
    generator = load_generator(target, which, device=device, arch=arch, arch_options=arch_options)
    if mode is None:
        mode = generator.config.test.mode  # the run's own choice (the reference preset: train)
    dataset = split_dataset(generator, split, data_root=data_root, batch_size=batch_size)
    if not len(dataset):
        raise DatasetError(f"{dataset.path}: no images in the {split} split")
    suffix = "" if mode == "eval" else "-train-mode"
    out_dir = Path(out_dir) if out_dir is not None else (
        run_dir_of(generator.checkpoint) / "test" / f"{generator.name}-{split}{suffix}")
    if out_dir.exists() and not out_dir.is_dir():
        raise NectarGANError(f"{out_dir}: exists and is not a folder; choose another --out")
    names = [path.name for path in output_names([Path(pair.a.name) for pair in dataset.pairs])]
    in_channels, out_channels = generator.channels
    fit = Fit("pad", generator.size_multiple)
    model, target_device = generator.model, next(generator.model.parameters()).device

    values: dict[str, list[float]] = {name: [] for name in METRICS}
    baseline: dict[str, list[float]] = {name: [] for name in METRICS}
    with evaluation_mode(model, mode == "eval"), torch.random.fork_rng():
        torch.manual_seed(generator.config.run.seed)
        for batch in build_dataloader(dataset, device=target_device):
            real_a, real_b = batch["A"].to(target_device), batch["B"].to(target_device)
            height, width = real_a.shape[-2:]
            fake_b = fit.restore(model(fit.prepare(real_a)), height, width)
            for name, scores in per_image(fake_b, real_b).items():
                values[name] += scores.tolist()
            if in_channels == out_channels:
                for name, scores in per_image(real_a, real_b).items():
                    baseline[name] += scores.tolist()
            for i, index in enumerate(batch["index"].tolist()):
                save_png(out_dir / "images" / names[index], to_unit(fake_b[i]))
                if grid:
                    save_grid(out_dir / "grids" / names[index], real_a[i:i + 1], fake_b[i:i + 1], real_b[i:i + 1])

    report = EvaluationReport(out_dir, generator, split, mode, names, values, mean_of(values),
                              mean_of(baseline) if in_channels == out_channels else None)
    write_metrics(report, dataset)
    return report


def mean_of(values: dict[str, list[float]]) -> dict[str, float]:
    return {name: math.fsum(scores) / len(scores) for name, scores in values.items()}


def json_number(value: float) -> Optional[float]:
    """Infinite PSNR (identical images) is not a JSON number: it is written as null."""
    return value if math.isfinite(value) else None


def write_metrics(report: EvaluationReport, dataset: PairedDataset) -> None:
    generator = report.generator
    per_image_rows = [
        {"image": name, "source": str(pair.a), **{m: json_number(report.values[m][i]) for m in METRICS}}
        for i, (name, pair) in enumerate(zip(report.names, dataset.pairs))
    ]
    data: dict[str, Any] = {
        "checkpoint": str(generator.checkpoint.resolve()),
        "epoch": generator.epoch,
        "global_step": generator.global_step,
        "split": report.split,
        "mode": report.mode,
        "data_root": str(Path(dataset.options.root).resolve()),
        "images": len(report.names),
        "mean": {m: json_number(v) for m, v in report.mean.items()},
        "baseline": None if report.baseline is None else {
            "what": BASELINE, "mean": {m: json_number(v) for m, v in report.baseline.items()}},
        "per_image": per_image_rows,
    }
    report.out_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_text(report.out_dir / "metrics.json", json.dumps(data, indent=2) + "\n")

    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(["image", *METRICS])
    for i, name in enumerate(report.names):
        writer.writerow([name, *(report.values[m][i] for m in METRICS)])
    writer.writerow(["mean", *(report.mean[m] for m in METRICS)])
    atomic_write_text(report.out_dir / "metrics.csv", text.getvalue())
