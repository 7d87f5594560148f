"""``nectargan test``: a checkpoint's generator over one split of its dataset, scored image by image.

The split is read the way validation reads it: in order, never augmented,
with the split's own deterministic preprocessing (``data.<split>.preprocess``).
Results go to ``RUN_DIR/test/<checkpoint tag>-<split>/`` (the tag holds the
epoch and step, ``best-epoch0003-step00000012`` for ``best.pt``, so results
of different weights never share a folder)::

    index.html       the results page: input | output | target and the scores of every image, worst first
    metrics.json     mean and per-image L1, PSNR, SSIM; checkpoint, epoch, mode; the output = input baseline
    metrics.csv      one row per image, then a ``mean`` row
    images/          the generator's outputs, one PNG per input, named after it
    inputs/          the inputs as the generator saw them (after preprocessing)
    targets/         the targets, preprocessed the same way
    grids/           input | output | target per image (with ``grid=True``)

A paired dataset scores each output against its target. An unpaired one
(a dataset with domains, such as CycleGAN's) has no targets: the generator
of ``direction`` translates each image of its input domain (``<split>A/``
for ``AtoB``) and the checkpoint's generator of the other direction
translates it back; the scores compare that cycle reconstruction with the
input, ``reconstructions/`` holds it in place of ``targets/``, and the page
and the grids show input | output | reconstruction. Those results go to
``RUN_DIR/test/<checkpoint tag>-<split>-<direction>/``.

The folder is written under a temporary name and then put in place whole, so
it never mixes files of two tests: testing the same weights again replaces it.

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
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Optional, Sequence

import torch
from torch.utils.data import DataLoader

from nectargan_core import (ConfigError, NectarGANError, atomic_write_text, leave_stopping_to_main, pid_alive,
                            read_json, sweep_stale_temps, temp_path)

from .contracts import batch_size_of, check_dataset_item
from .data.errors import DatasetError
from .data.loader import build_dataloader
from .data.paired import PairedDataset
from .evaluation import METRICS, per_image, to_unit
from .examples import save_grid
from .files import output_names
from .images import Fit, save_png
from .inference import LoadedGenerator, load_generators, run_dir_of
from .evaluation import evaluation_mode
from .report_section import RESULTS_MAX_BYTES
from .results_page import FOLDERS, write_page
from .tiling import Tiling, run_sized, tiling_for

#: What a results folder's images show, left to right: paired, and unpaired (scored by the cycle).
PAIRED_COLUMNS = ("input", "output", "target")
CYCLE_COLUMNS = ("input", "output", "reconstruction")

Mode = Literal["eval", "train"]
BASELINE = "output = input (no generator)"
PAIRED = "output with target"


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
    #: Per image, as ``values`` (None without a baseline).
    baseline_values: Optional[dict[str, list[float]]] = None
    #: ``(height, width)`` of each image as written.
    sizes: Optional[list[tuple[int, int]]] = None
    #: Whether earlier results in ``out_dir`` were replaced.
    replaced: bool = False
    #: What the scores compare: the targets, or (unpaired) the inputs with their cycle reconstructions.
    compared: str = PAIRED
    #: Each image's source file, in ``names`` order.
    sources: Optional[list[str]] = None
    data_root: Optional[Path] = None
    #: The preprocessing of the split as read (``data.<split>.preprocess``).
    preprocess: str = "?"
    #: What each image was scored with: L1, PSNR, SSIM, then the run's other validation metrics.
    metrics: tuple[str, ...] = METRICS
    #: How the generator met the images: ``--tile``'s tiling in words, or None (whole, padded to its multiple).
    tiling: Optional[str] = None
    #: What the user should know about how the results were made (printed after the summary line).
    notes: list[str] = field(default_factory=list)

    @property
    def cycle(self) -> bool:
        """Whether the scores compare inputs with their cycle reconstructions (unpaired data), not targets."""
        return self.compared != PAIRED

    @property
    def columns(self) -> tuple[str, ...]:
        """What the page and the image folders show per image (keys of ``FOLDERS``)."""
        return CYCLE_COLUMNS if self.cycle else PAIRED_COLUMNS

    @property
    def page(self) -> Path:
        """The results page, ``index.html`` in ``out_dir``."""
        return self.out_dir / "index.html"

    def summary(self) -> str:
        """One line: what was tested and how it scored, next to the trivial baseline."""
        what = f"{self.generator.direction}, {self.compared}: " if self.cycle else ""
        tiles = f", in {self.tiling}" if self.tiling else ""
        line = (f"{self.split}: {len(self.names)} images, {self.generator.label}, "
                f"{self.mode} mode{tiles}: {what}{format_metrics(self.mean)}")
        if self.baseline is not None:
            line += f" | output=input: {format_metrics(self.baseline)}"
        return line


def format_metrics(values: dict[str, float]) -> str:
    text = f"L1 {values['l1']:.4f}  PSNR {values['psnr']:.2f} dB  SSIM {values['ssim']:.4f}"
    return "  ".join([text, *(f"{name} {value:.4g}" for name, value in values.items() if name not in METRICS)])


def scored_with(generator: LoadedGenerator, registry: Any) -> tuple[str, ...]:
    """L1, PSNR and SSIM, then the other metrics the run validated with (``validation.metrics``)."""
    section = getattr(generator.config, "validation", None)
    extra = [name for name in getattr(section, "metrics", ()) if name not in METRICS]
    for name in extra:
        registry.get("metric", name)  # a metric whose plugin is gone: one line naming it and what to install
    return (*METRICS, *extra)


def split_dataset(generator: LoadedGenerator, split: str, *, data_root: Optional[Path],
                  batch_size: Optional[int]) -> tuple[Any, dict[str, Any], str]:
    """``split`` of the run's dataset, preprocessed like validation (the train split too, unaugmented).

    Returns the dataset, the options it was built with, and the split it was
    built as (``val`` for the train split of a dataset with per-split options).

    The paired dataset; an unpaired one (a registered dataset that offers
    ``domain(name)``); or any registered dataset that meets the paired
    contract (docs/plugins/contracts.md: items ``{"A": tensor, "B": tensor}``),
    built as training builds it, ``factory(split=..., seed=..., **options)``.
    """
    data = generator.config.data
    options = dict(data.options)
    own = data.name in ("paired", "unpaired")  # this plugin's datasets: a folder of splits under root
    if data_root is not None:
        if not own and "root" not in options:
            raise DatasetError(f"--data-root: dataset '{data.name}' has no root option; its own options say where "
                               "its images are (see: nectargan config show)")
        options["root"] = str(data_root)
    if own:
        if not options.get("root"):
            raise DatasetError(f"{generator.checkpoint}: its config names no dataset folder (data.root), as for "
                               "imported weights; pass --data-root DIR")
        if not Path(options["root"]).is_dir():
            if data_root is not None:
                raise DatasetError(f"--data-root {data_root}: no such folder")
            raise DatasetError(f"{options['root']}: the run's dataset folder (data.root) was not found from here; "
                               "pass --data-root DIR")
    view = "val" if split == "train" and own else split
    if isinstance(options.get(view), dict):  # the split's own options: folder, preprocess, batch_size
        view_options = dict(options[view])
        if split == "train" and own:  # the train folder, read with the val preprocessing (no augmentation)
            view_options["folder"] = "train"
        if batch_size is not None:
            view_options["batch_size"] = batch_size
        if view_options.get("preprocess") == "none":
            view_options["batch_size"] = 1  # images keep their own sizes, which a batch cannot mix
        options[view] = view_options
    elif batch_size is not None and "batch_size" in options:  # batched by data.batch_size
        options["batch_size"] = batch_size
    if data.name == "paired":
        return PairedDataset(options, view, seed=generator.config.run.seed), options, view
    from nectargan_core import get_plugins

    component = get_plugins().registry.get("dataset", data.name)
    factory = component.load()
    try:
        dataset = factory(split=view, seed=generator.config.run.seed, **options)
    except OSError as exc:  # a file the dataset's options point at (a manifest, a folder) is not there
        what = f"{exc.filename}: {exc.strerror}" if exc.filename and exc.strerror else str(exc)
        raise DatasetError(f"dataset '{data.name}' ({component.provided_by}), {view} split: {what}"
                           + ("" if data_root is not None or "root" not in options else "; pass --data-root DIR")) \
            from None
    if not callable(getattr(dataset, "domain", None)) and len(dataset):
        channels = generator.channels if generator.direction != "BtoA" else generator.channels[::-1]
        check_dataset_item(dataset, component.name, component.provided_by, view, channels)
    return dataset, options, view


def dataset_label(dataset: Any, generator: LoadedGenerator) -> str:
    """Where the dataset's images are, for messages: its folder, else its name."""
    path = getattr(dataset, "path", None)
    return str(path) if path is not None else f"dataset '{generator.config.data.name}'"


def run_test(target: str | Path, which: str = "latest", *, split: str = "test", mode: Optional[Mode] = None,
             out_dir: Optional[Path] = None, batch_size: Optional[int] = None, device: str | torch.device = "cpu",
             data_root: Optional[Path] = None, grid: bool = False, arch: Optional[str] = None,
             arch_options: Sequence[str] = (), direction: Optional[str] = None, tile: Optional[int | str] = None,
             overlap: Optional[int] = None) -> EvaluationReport:
    """Run the generator of ``direction`` over ``split``; write metrics, images and the results page; return the scores.

    With ``arch``, ``target`` is a reference state dict (see :func:`~nectargan_translate.inference.load_generator`).
    ``tile`` (a side, or ``"auto"``: the training size) runs each image in overlapping tiles blended without
    seams, as ``nectargan predict --tile`` does (``overlap`` default: a quarter of the tile), the batch size in
    tiles per pass; images the split keeps at full size (``preprocess: none``) then run at the training scale.
    """
    if overlap is not None and tile is None:
        raise ConfigError("--overlap goes with --tile")
    generator, *inverse = load_generators(target, which, [direction], device=device, arch=arch,
                                          arch_options=arch_options, inverse=True)
    sizing: Fit | Tiling = (tiling_for(tile, overlap, generator.training_size, generator.size_multiple)
                            if tile is not None else Fit("pad", generator.size_multiple))
    if mode is None:
        # the run's own choice (the reference preset: train); a trainer without a test section: eval
        section = getattr(generator.config, "test", None)
        mode = getattr(section, "mode", "eval")
    from nectargan_core import get_plugins

    registry = get_plugins().registry
    metrics = scored_with(generator, registry)
    dataset, options, view = split_dataset(generator, split, data_root=data_root, batch_size=batch_size)
    if not len(dataset):
        raise DatasetError(f"{dataset_label(dataset, generator)}: no images in the {split} split")
    cycle = callable(getattr(dataset, "domain", None))
    # each direction its own folder where there is more than one (a paired run of two generators, CycleGAN)
    suffix = (f"-{generator.direction}" if cycle or len(generator.directions) > 1 else "") + (
        "" if mode == "eval" else "-train-mode")
    out_dir = Path(out_dir) if out_dir is not None else (
        run_dir_of(generator.checkpoint) / "test" / f"{generator.tag}-{split}{suffix}")
    sweep_stale_temps(out_dir.parent)  # the staging folder (``.NAME.tmp-PID``) of a test killed midway
    recover_moved_aside(out_dir)
    replaced = check_out_dir(out_dir)
    staging = temp_path(out_dir)
    shutil.rmtree(staging, ignore_errors=True)
    try:
        if cycle:
            report = _test_cycle(generator, inverse[0] if inverse else None, dataset, split, mode, out_dir,
                                 staging, grid, metrics=metrics, registry=registry, sizing=sizing,
                                 tiles_per_pass=batch_size or 1)
        else:
            report = _test_pairs(generator, dataset, split, mode, out_dir, staging, grid,
                                 batch_size=batch_size_of(options, view) or 1, root=options.get("root"),
                                 metrics=metrics, registry=registry, sizing=sizing,
                                 tiles_per_pass=batch_size or batch_size_of(options, view) or 1)
        report.replaced = replaced
        if isinstance(sizing, Tiling):
            report.tiling = sizing.describe()
            largest = max((max(size) for size in report.sizes or []), default=0)
            if largest <= sizing.tile:
                report.notes.append(
                    f"note: no {split} image is larger than the {sizing.tile}-pixel tile (the largest side is "
                    f"{largest} px), so each ran as one tile; --tile matters for a split the run reads at full size "
                    "(data.test.preprocess: none)")
        view = getattr(getattr(dataset, "options", None), "val" if split == "train" else split, None)
        report.preprocess = str(getattr(view, "preprocess", "?"))
        write_metrics(report, staging)
        write_page(report, staging)
        publish(staging, out_dir)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return report


def _test_pairs(generator: LoadedGenerator, dataset: Any, split: str, mode: Mode, out_dir: Path,
                staging: Path, grid: bool, *, batch_size: int, root: Optional[str], metrics: Sequence[str] = METRICS,
                registry: Any = None, sizing: Any = None, tiles_per_pass: int = 1) -> EvaluationReport:
    """Each output against its target, next to the output = input baseline; files go to ``staging``.

    The generator of ``AtoB`` translates each item's ``A`` and is scored
    against its ``B``; that of ``BtoA`` (a trainer with a generator each way)
    translates ``B`` and is scored against ``A``.
    """
    names, sources, data_root, batches = _pairs_of(dataset, generator, batch_size, root)
    source, goal = ("B", "A") if generator.direction == "BtoA" else ("A", "B")
    in_channels, out_channels = generator.channels
    sizing = sizing if sizing is not None else Fit("pad", generator.size_multiple)
    model, target_device = generator.model, next(generator.model.parameters()).device

    values: dict[str, list[float]] = {name: [] for name in metrics}
    baseline: dict[str, list[float]] = {name: [] for name in metrics}
    has_baseline = in_channels == out_channels or in_channels == 1
    sizes: list[tuple[int, int]] = [(0, 0)] * len(names)
    with evaluation_mode(model, mode == "eval"), torch.random.fork_rng():
        torch.manual_seed(generator.config.run.seed)
        position = 0
        for batch in batches:
            real_a, real_b = batch[source].to(target_device), batch[goal].to(target_device)
            height, width = real_a.shape[-2:]
            fake_b = run_sized(model, real_a, sizing, device=target_device, tiles_per_pass=tiles_per_pass)
            for name, scores in per_image(fake_b, real_b, metrics, registry).items():
                values[name] += scores.tolist()
            if has_baseline:  # a grey input is compared as the grey picture it is (its channel repeated)
                as_output = real_a if in_channels == out_channels else real_a.expand(-1, out_channels, -1, -1)
                for name, scores in per_image(as_output, real_b, metrics, registry).items():
                    baseline[name] += scores.tolist()
            # another plugin's items are read in order, whatever "index" they carry (a Subset keeps its parent's)
            own = isinstance(dataset, PairedDataset)
            indices = batch["index"].tolist() if own else range(position, position + len(real_a))
            position += len(real_a)
            paths = batch.get("path")
            for i, index in enumerate(indices):
                sizes[index] = (int(height), int(width))
                if sources is not None and isinstance(paths, (list, tuple)) and isinstance(paths[i], str):
                    sources[index] = paths[i]
                for what, images in zip(PAIRED_COLUMNS, (real_a, fake_b, real_b)):
                    save_png(staging / FOLDERS[what] / names[index], to_unit(images[i]))
                if grid:
                    save_grid(staging / "grids" / names[index], real_a[i:i + 1], fake_b[i:i + 1],
                              real_b[i:i + 1], columns=PAIRED_COLUMNS)

    return EvaluationReport(out_dir, generator, split, mode, names, values, mean_of(values),
                            mean_of(baseline) if has_baseline else None,
                            baseline if has_baseline else None, sizes, sources=sources, data_root=data_root,
                            metrics=tuple(metrics))


def _pairs_of(dataset: Any, generator: LoadedGenerator, batch_size: int,
              root: Optional[str]) -> tuple[list[str], Optional[list[str]], Optional[Path], Any]:
    """Output names, source files, dataset folder and batches of a paired split.

    The paired dataset names each output after its A file. Another plugin's
    dataset is only known by its items, so its outputs are numbered in
    order (``0000.png``, ...), and an item's ``"path"`` string, when it has
    one, is recorded as the image's source.
    """
    device = next(generator.model.parameters()).device
    if isinstance(dataset, PairedDataset):
        names = [path.name for path in output_names([Path(pair.a.name) for pair in dataset.pairs])]
        return (names, [str(pair.a) for pair in dataset.pairs], Path(dataset.options.root),
                build_dataloader(dataset, device=device))
    width = max(4, len(str(len(dataset) - 1)))
    names = [f"{i:0{width}d}.png" for i in range(len(dataset))]
    loader = leave_stopping_to_main(DataLoader(dataset, batch_size=batch_size, shuffle=False))
    return names, [""] * len(names), Path(root) if root else None, loader


def _test_cycle(generator: LoadedGenerator, back: Optional[LoadedGenerator], dataset: Any, split: str, mode: Mode,
                out_dir: Path, staging: Path, grid: bool, *, metrics: Sequence[str] = METRICS,
                registry: Any = None, sizing: Any = None, tiles_per_pass: int = 1) -> EvaluationReport:
    """Unpaired: each image of the input domain translated, and back by ``back``; the reconstruction against it."""
    if back is None:
        raise NectarGANError(f"{generator.checkpoint}: the split is unpaired, so outputs are scored by translating "
                             f"them back, and this checkpoint has no generator for the other direction")
    source = generator.direction[0]  # AtoB reads domain A
    device = next(generator.model.parameters()).device
    images = dataset.domain(source)
    if not len(images):
        raise DatasetError(f"{dataset_label(dataset, generator)}: no images in the {split} split's domain {source}")
    names = [path.name for path in output_names([Path(path.name) for path in images.paths])]
    sizing = sizing if sizing is not None else Fit("pad", generator.size_multiple)
    values: dict[str, list[float]] = {name: [] for name in metrics}
    sizes: list[tuple[int, int]] = [(0, 0)] * len(names)
    loader = leave_stopping_to_main(DataLoader(images, batch_size=images.batch_size, shuffle=False,
                                               num_workers=dataset.options.num_workers))
    with evaluation_mode(generator.model, mode == "eval"), evaluation_mode(back.model, mode == "eval"), \
            torch.random.fork_rng():
        torch.manual_seed(generator.config.run.seed)
        for batch in loader:
            real = batch["image"].to(device)
            height, width = real.shape[-2:]
            fake = run_sized(generator.model, real, sizing, device=device, tiles_per_pass=tiles_per_pass)
            reconstructed = run_sized(back.model, fake, sizing, device=device, tiles_per_pass=tiles_per_pass)
            for name, scores in per_image(reconstructed, real, metrics, registry).items():
                values[name] += scores.tolist()
            for i, index in enumerate(batch["index"].tolist()):
                sizes[index] = (int(height), int(width))
                for what, shown in zip(CYCLE_COLUMNS, (real, fake, reconstructed)):
                    save_png(staging / FOLDERS[what] / names[index], to_unit(shown[i]))
                if grid:
                    save_grid(staging / "grids" / names[index], real[i:i + 1], fake[i:i + 1],
                              reconstructed[i:i + 1], columns=CYCLE_COLUMNS)
    target_domain = "B" if source == "A" else "A"
    compared = f"cycle {source}->{target_domain}->{source} with {source}"
    return EvaluationReport(out_dir, generator, split, mode, names, values, mean_of(values), None, None, sizes,
                            compared=compared, sources=[str(path) for path in images.paths],
                            data_root=Path(dataset.options.root), metrics=tuple(metrics))


def is_results_folder(path: Path) -> bool:
    """Whether ``path`` holds what ``nectargan test`` writes (its metrics.json names a checkpoint)."""
    try:
        data = read_json(path / "metrics.json", max_bytes=RESULTS_MAX_BYTES)
    except (OSError, ValueError):  # JSONFileError: a FIFO, a device, a damaged or crafted file
        return False
    return isinstance(data, dict) and "checkpoint" in data and "per_image" in data


def check_out_dir(out_dir: Path) -> bool:
    """Whether ``out_dir`` holds earlier results (to be replaced); an error when it holds anything else."""
    if out_dir.exists() and not out_dir.is_dir():
        raise NectarGANError(f"{out_dir}: exists and is not a folder; choose another --out")
    if not out_dir.is_dir() or not any(out_dir.iterdir()):
        return False
    if not is_results_folder(out_dir):
        raise NectarGANError(f"{out_dir}: holds files that nectargan test did not write; "
                             "choose another --out (results replace a folder as a whole)")
    return True


def recover_moved_aside(out_dir: Path) -> None:
    """Undo what a test killed inside :func:`publish` left: the earlier results it moved aside (``.NAME.old-PID``)
    go back in place when nothing took it, and are deleted when the new results did."""
    prefix = f".{out_dir.name}.old-"
    try:
        entries = sorted(out_dir.parent.iterdir())
    except OSError:
        return
    for entry in entries:
        pid = entry.name[len(prefix):]
        if not (entry.name.startswith(prefix) and pid.isdigit()) or pid_alive(int(pid)):
            continue
        if not out_dir.exists():
            entry.rename(out_dir)
        else:
            shutil.rmtree(entry, ignore_errors=True)


def publish(staging: Path, out_dir: Path) -> None:
    """Put the finished ``staging`` folder in place of ``out_dir``, in two renames.

    The earlier folder is moved aside first and removed last, so a crash in
    between leaves the new results in place or the old ones, never a mix.
    """
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    old = out_dir.with_name(f".{out_dir.name}.old-{os.getpid()}")
    if out_dir.exists():
        shutil.rmtree(old, ignore_errors=True)
        out_dir.rename(old)
    staging.rename(out_dir)
    shutil.rmtree(old, ignore_errors=True)


def mean_of(values: dict[str, list[float]]) -> dict[str, float]:
    return {name: math.fsum(scores) / len(scores) for name, scores in values.items()}


def json_number(value: float) -> Optional[float]:
    """Infinite PSNR (identical images) is not a JSON number: it is written as null."""
    return value if math.isfinite(value) else None


def write_metrics(report: EvaluationReport, folder: Path) -> None:
    """``metrics.json`` and ``metrics.csv`` in ``folder`` (the results folder, or its staging copy)."""
    generator = report.generator

    def row(i: int, name: str, source: str) -> dict[str, Any]:
        entry = {"image": name, "source": source, **{m: json_number(report.values[m][i]) for m in report.metrics},
                 "files": {what: f"{FOLDERS[what]}/{name}" for what in report.columns}}
        if report.baseline_values is not None:
            entry["baseline"] = {m: json_number(report.baseline_values[m][i]) for m in report.metrics}
        return entry

    data: dict[str, Any] = {
        "checkpoint": str(generator.checkpoint.resolve()),
        "checkpoint_name": generator.checkpoint.name,
        "epoch": generator.epoch,
        "global_step": generator.global_step,
        "split": report.split,
        "mode": report.mode,
        "direction": generator.direction,
        "compared": report.compared,
        "data_root": str(Path(report.data_root).resolve()) if report.data_root is not None else None,
        "images": len(report.names),
        "tiling": report.tiling,
        "page": "index.html",
        "mean": {m: json_number(v) for m, v in report.mean.items()},
        "baseline": None if report.baseline is None else {
            "what": BASELINE, "mean": {m: json_number(v) for m, v in report.baseline.items()}},
        "per_image": [row(i, name, source) for i, (name, source) in enumerate(zip(report.names, report.sources or []))],
    }
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write_text(folder / "metrics.json", json.dumps(data, indent=2) + "\n")

    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(["image", *report.metrics])
    for i, name in enumerate(report.names):
        writer.writerow([name, *(report.values[m][i] for m in report.metrics)])
    writer.writerow(["mean", *(report.mean[m] for m in report.metrics)])
    atomic_write_text(folder / "metrics.csv", text.getvalue())
