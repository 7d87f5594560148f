"""The run report: one self-contained HTML file that can be mailed, archived or opened offline.

It leads with what defines the run (the trainer's ``summary.json``: networks
and their parameter counts, data, schedule, precision), keeps the full
config collapsed, then shows status, curves, the example grids side by side,
test results (with their best and worst images, and a link to each results
page) and timing. Images are embedded as base64 ``data:`` URIs and the
stylesheet is inline; the page loads nothing from anywhere and runs no
script. The only links are relative ones to the results pages of
``nectargan test`` in the run directory.
"""

from __future__ import annotations

import base64
import html
import json
import math
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence, TypeVar
from urllib.parse import quote

import yaml

from ..atomic import atomic_write_text
from ..builtin.console import format_seconds
from ..checkpoint import sidecar_path
from ..errors import RunDirError
from ..rundir import RunDir
from .history import History, as_int, section, to_float
from .plots import Plot, render_plots
from .runs import RunSummary, read_config, summarize
from .timing import Timing, timing_of

EXAMPLE_NAME = re.compile(r"^epoch(\d+)\.png$")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
CORE_SECTIONS = ("run", "loop", "checkpoint", "distributed")
PART_LISTS = ("visualizers", "callbacks")
T = TypeVar("T")

STYLE = """
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1d1d1f; margin: 0 auto;
       max-width: 1500px; padding: 0 24px 48px; }
h1 { margin: 24px 0 4px; font-size: 1.6em; } h2 { margin-top: 36px; border-bottom: 1px solid #ddd; }
nav a { margin-right: 14px; } .meta { color: #555; }
table { border-collapse: collapse; margin: 8px 0; } td, th { padding: 3px 12px 3px 0; text-align: left;
        vertical-align: top; } th { color: #555; font-weight: 600; } td.num { text-align: right;
        font-variant-numeric: tabular-nums; }
code, pre { font: 13px/1.4 ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; }
pre { background: #f6f6f6; padding: 12px; overflow-x: auto; }
.status { padding: 1px 8px; border-radius: 9px; color: #fff; background: #777; }
.status.finished { background: #2e7d32; } .status.running { background: #1565c0; }
.status.failed { background: #c62828; } .status.interrupted { background: #ef6c00; }
.gallery { display: flex; flex-wrap: wrap; gap: 18px; }
.strip { display: flex; gap: 14px; overflow-x: auto; padding-bottom: 8px; align-items: flex-start; }
.strip figure { flex: none; }
figure { margin: 0; } figcaption { color: #555; font-size: 0.9em; }
.columns { display: grid; color: #555; font-size: 0.85em; text-align: center; }
img { max-width: 100%; height: auto; border: 1px solid #eee; }
.strip img { max-width: none; image-rendering: pixelated; }
.note { color: #555; } .stale { color: #b35c00; }
"""


# -- what goes into the report ------------------------------------------------
@dataclass(frozen=True)
class Image:
    """A PNG to embed, with the text shown under it (and read by screen readers)."""

    caption: str
    png: bytes


@dataclass(frozen=True)
class Evaluation:
    """One ``test/<name>/`` folder: mean scores, the baseline's, and what the weights were."""

    name: str
    mean: dict[str, float]
    baseline: dict[str, float] | None
    folder: Path | None = None
    epoch: int | None = None
    step: int | None = None
    checkpoint: str | None = None
    split: str | None = None
    mode: str | None = None
    #: Per-image rows (scores, and ``files``: column -> path relative to ``folder``).
    per_image: tuple[Mapping[str, Any], ...] = ()
    #: The folder's results page, when it has one.
    page: Path | None = None

    @property
    def weights(self) -> str:
        """``best.pt (epoch 3, step 12)``, as far as recorded."""
        position = ", ".join(part for part in (f"epoch {self.epoch}" if self.epoch is not None else "",
                                               f"step {self.step}" if self.step is not None else "") if part)
        name = self.checkpoint or "checkpoint not recorded"
        return f"{name} ({position})" if position else name


def sample_evenly(items: Sequence[T], limit: int) -> list[T]:
    """At most ``limit`` items (0: all), evenly spread and always keeping the first and the last."""
    if limit <= 0 or len(items) <= limit:
        return list(items)
    if limit == 1:
        return [items[-1]]
    step = (len(items) - 1) / (limit - 1)
    return [items[round(i * step)] for i in range(limit)]


def example_images(run: RunDir, limit: int) -> tuple[list[Image], int]:
    """The example grids in epoch order (sampled down to ``limit``), and how many there are."""
    def epoch(path: Path) -> int:
        match = EXAMPLE_NAME.match(path.name)
        return int(match.group(1)) if match else -1

    paths = sorted(run.examples.glob("*.png"), key=lambda p: (epoch(p), p.name)) if run.examples.is_dir() else []
    complete = [path for path in paths if is_png(path)]  # not one a writer has left half-done
    images = [Image(f"epoch {epoch(path)}" if epoch(path) >= 0 else path.stem, path.read_bytes())
              for path in sample_evenly(complete, limit)]
    return images, len(complete)


def is_png(path: Path) -> bool:
    with open(path, "rb") as handle:
        return handle.read(len(PNG_SIGNATURE)) == PNG_SIGNATURE


def numbers(mapping: Any) -> dict[str, float]:
    """The numeric entries of a mapping (null counts as a number we do not know)."""
    if not isinstance(mapping, Mapping):
        return {}
    return {str(k): to_float(v) for k, v in mapping.items()
            if v is None or (isinstance(v, (int, float)) and not isinstance(v, bool))}


def integer(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def read_evaluations(run: RunDir) -> list[Evaluation]:
    """``RUN_DIR/test/*/metrics.json``: a ``mean`` mapping, or else the file's top-level numbers.

    Newest weights first (by recorded step, then name); a folder whose file records no step comes last.
    """
    results = []
    for path in sorted((run.path / "test").glob("*/metrics.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(data, Mapping):
            continue
        mean = numbers(data["mean"]) if isinstance(data.get("mean"), Mapping) else numbers(data)
        baseline = data.get("baseline")
        base_mean = numbers(baseline.get("mean")) if isinstance(baseline, Mapping) else {}
        if not mean:
            continue
        checkpoint = data.get("checkpoint_name") or data.get("checkpoint")
        rows = data.get("per_image")
        page = path.parent / str(data.get("page") or "index.html")
        results.append(Evaluation(
            path.parent.name, mean, base_mean or None, path.parent, integer(data.get("epoch")),
            integer(data.get("global_step")), Path(str(checkpoint)).name if checkpoint else None,
            str(data["split"]) if "split" in data else None, str(data["mode"]) if "mode" in data else None,
            tuple(row for row in rows if isinstance(row, Mapping)) if isinstance(rows, list) else (),
            page if page.is_file() else None))
    return sorted(results, key=lambda r: (r.step is None, -(r.step or 0), r.name))


def batch_size_of(config: Mapping[str, Any]) -> int | None:
    """The training batch size: the first ``<section>.batch_size`` outside the core sections."""
    for name, section in config.items():
        if name not in CORE_SECTIONS and isinstance(section, Mapping):
            value = section.get("batch_size")
            if isinstance(value, int) and value > 0:
                return value
    return None


def flatten(data: Mapping[str, Any], prefix: str = "") -> Iterable[tuple[str, Any]]:
    for key, value in data.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            yield from flatten(value, f"{path}.")
        else:
            yield path, value


def key_settings(config: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """The settings runs are told apart by (the full config is shown beside them).

    The trainer, the core sections, each other section's own values, the name
    of every part chosen inside one (``models.generator.name``), and the
    enabled visualizers and callbacks.
    """
    rows: list[tuple[str, Any]] = [("trainer", config.get("trainer"))]
    for key, value in flatten({k: v for k, v in config.items() if k not in ("trainer", *PART_LISTS)}):
        parts = key.split(".")
        if parts[0] in CORE_SECTIONS or len(parts) == 2 or parts[-1] == "name":
            rows.append((key, value))
    rows += [(name, ", ".join(config.get(name) or {}) or "none") for name in PART_LISTS]
    return rows


# -- rendering -----------------------------------------------------------------
def esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def fmt(value: Any) -> str:
    """Numbers to 4 significant digits; the rest as YAML writes them (null, true, [a, b])."""
    if isinstance(value, float):
        return f"{value:.4g}" if math.isfinite(value) else "n/a" if math.isnan(value) else str(value)
    if isinstance(value, str):
        return value
    return yaml.safe_dump(value, default_flow_style=True).strip().removesuffix("...").strip()


def png_size(png: bytes) -> tuple[int, int]:
    """``(width, height)`` from a PNG's header."""
    return int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")


def img(image: Image, captioned: bool = True, columns: Sequence[str] = (), scale: float = 1.0) -> str:
    """An embedded PNG with its pixel size, so the page lays out before it decodes.

    The caption goes above the image; ``columns`` labels the image's equal-width
    columns (``input | output | target``) between the caption and the image.
    """
    width, height = png_size(image.png)
    width, height = round(width * scale), round(height * scale)
    data = base64.b64encode(image.png).decode("ascii")
    caption = f"<figcaption>{esc(image.caption)}</figcaption>" if captioned else ""
    labels = (f'<div class="columns" style="grid-template-columns: repeat({len(columns)}, 1fr); width: {width}px">'
              + "".join(f"<span>{esc(label)}</span>" for label in columns) + "</div>") if columns else ""
    return (f'<figure>{caption}{labels}<img src="data:image/png;base64,{data}" width="{width}" height="{height}" '
            f'alt="{esc(image.caption)}"></figure>')


def table(rows: Iterable[Sequence[Any]], header: Sequence[str] = ()) -> str:
    """A data table when ``header`` is given (numbers right-aligned), else a label | value list."""
    if header:
        head = "<tr>" + "".join(f"<th>{esc(h)}</th>" for h in header) + "</tr>"
        body = "".join("<tr>" + "".join(data_cell(cell) for cell in row) + "</tr>" for row in rows)
        return f"<table>{head}{body}</table>"
    body = "".join(f"<tr><th>{esc(label)}</th><td>{esc(fmt(value))}</td></tr>" for label, value in rows)
    return f"<table>{body}</table>"


def data_cell(cell: Any) -> str:
    numeric = isinstance(cell, (int, float)) and not isinstance(cell, bool)
    return f'<td class="num">{esc(fmt(cell))}</td>' if numeric else f"<td>{esc(fmt(cell))}</td>"


def sidecar_position(path: Path) -> list[str]:
    """Epoch and step of a checkpoint, from its JSON sidecar (no torch needed)."""
    try:
        meta = json.loads(sidecar_path(path).read_text())
        return [f"epoch {int(meta['epoch'])}", f"step {int(meta['global_step'])}"]
    except (OSError, ValueError, KeyError, TypeError):
        return []


def checkpoint_text(run: RunDir, path: Path | None, note: str | None = None) -> str:
    if path is None:
        return "none"
    details = sidecar_position(path) + ([note] if note else [])
    return str(path.relative_to(run.path)) + (f" ({', '.join(details)})" if details else "")


def run_body(run: RunDir, summary: RunSummary, history: History) -> str:
    best = (f"{summary.best_metric} {fmt(summary.best_value)}"
            if summary.best_metric and summary.best_value is not None else None)
    rows: list[tuple[str, Any]] = [
        ("directory", str(run.path.resolve())),
        ("status", summary.status_text),
        ("epochs", f"{summary.epochs} of {summary.epochs_total}" if summary.epochs_total else summary.epochs),
        ("steps", summary.steps),
        ("latest checkpoint", checkpoint_text(run, summary.latest_checkpoint)),
        ("best checkpoint", checkpoint_text(run, summary.best_checkpoint, best)),
    ]
    if summary.reason:
        rows.append(("stop reason", summary.reason))
    if summary.error:
        rows.append(("error", summary.error))
    if summary.updated is not None:
        rows.append(("status updated", time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(summary.updated))))
    validations = history.of("val")
    if validations:
        last = validations[-1]
        values = ", ".join(f"{k} {fmt(to_float(v))}" for k, v in section(last, "metrics").items())
        rows.append((f"last validation (epoch {as_int(last.get('epoch')) + 1})", values or "no metrics"))
    return table(rows)


def setup_body(run: RunDir, config: Mapping[str, Any]) -> str:
    """What defines the run (``summary.json``), then the full config, collapsed.

    A run made before ``summary.json`` existed shows its key settings instead.
    """
    rows = [row for row in run.read_summary().get("rows") or []
            if isinstance(row, list) and len(row) == 2]
    full = esc(yaml.safe_dump(dict(config), sort_keys=False, default_flow_style=False))
    details = f"<details><summary>Full resolved config (config.yaml)</summary><pre>{full}</pre></details>"
    if rows:
        return table([(str(label), str(text)) for label, text in rows]) + details
    note = "<p class=\"note\">This run has no summary.json (it predates it); its key settings:</p>"
    return f"{note}{table(key_settings(config))}{details}"


def curves_body(plots: list[Plot], smooth: int) -> str:
    if not plots:
        return "<p>No metrics recorded yet.</p>"
    note = (f"<p>Loss terms: the mean of each logging interval (faint) and its moving average over "
            f"{smooth} intervals, by fractional epoch.</p>" if smooth > 1 else "")
    figures = "".join(img(Image(plot.title, plot.png), captioned=False) for plot in plots)
    return f'{note}<div class="gallery">{figures}</div>'


#: Example grids narrower than this, and test images narrower than SMALLEST_IMAGE, are shown enlarged
#: by a whole factor (pixels kept sharp), so small images can be compared.
SMALLEST_GRID, SMALLEST_IMAGE = 360, 128


def examples_body(images: list[Image], total: int, columns: Sequence[str] = ()) -> str:
    """The grids side by side in epoch order (scroll sideways), each captioned above, columns labelled."""
    if not images:
        return "<p>The trainer wrote no example images.</p>"
    shown = f"all {total}" if len(images) == total else f"{len(images)} of {total}, evenly spaced"
    what = " | ".join(columns) if columns else "the trainer's example images"
    widest = max(png_size(image.png)[0] for image in images)
    scale = max(1, SMALLEST_GRID // max(widest, 1))
    figures = "".join(img(image, columns=columns, scale=scale) for image in images)
    return (f"<p>Each grid shows {esc(what)} after the epoch named above it ({shown}); the same images "
            f"in every grid, so epochs compare side by side.</p><div class=\"strip\">{figures}</div>")


def freshness(result: Evaluation, run: RunDir, summary: RunSummary) -> str:
    """Whether the weights tested are still the run's newest (or its current best.pt); HTML."""
    if result.step is None:
        return '<span class="stale">the file does not record which step the weights are from</span>'
    notes = []
    if result.checkpoint == run.best_checkpoint.name:
        now = sidecar_position(run.best_checkpoint) if run.best_checkpoint.is_file() else []
        if now and now[1] != f"step {result.step}":
            notes.append(f"best.pt has been replaced since: it now holds {', '.join(now)}")
    if result.step < summary.steps:
        notes.append(f"the run has trained on since, to step {summary.steps}")
    if not notes:
        return "the run's current weights"
    return '<span class="stale">not current: ' + esc("; ".join(notes)) + "</span>"


def relative_link(target: Path, page: Path) -> str:
    """A URL for ``target`` relative to the folder of ``page`` (the report)."""
    relative = os.path.relpath(target.resolve(), page.resolve().parent)
    return quote(Path(relative).as_posix())


def ranked(result: Evaluation, count: int) -> list[tuple[str, Mapping[str, Any]]]:
    """The ``count`` worst and best images (worst first) with a label, by L1 (else by the first metric)."""
    metric = "l1" if "l1" in result.mean else next(iter(result.mean))
    higher_is_worse = metric in ("l1", "l2", "mse", "mae", "lpips", "fid")
    rows = [row for row in result.per_image if isinstance(row.get("files"), Mapping)
            and isinstance(row.get(metric), (int, float))]
    rows.sort(key=lambda row: to_float(row[metric]), reverse=higher_is_worse)
    if len(rows) <= count:
        return [(f"{i} of {len(rows)}", row) for i, row in enumerate(rows, 1)]
    worst, best = (count + 1) // 2, count // 2
    return ([(f"worst {i}", row) for i, row in enumerate(rows[:worst], 1)]
            + [(f"best {best - i}", row) for i, row in enumerate(rows[len(rows) - best:])])


def test_images(result: Evaluation, count: int) -> str:
    """The best and worst images of one test, embedded: one figure per image, its columns labelled."""
    figures = []
    for label, row in ranked(result, count):
        files = [(str(column), result.folder / str(path)) for column, path in row["files"].items()
                 if result.folder is not None]
        if not files or not all(path.is_file() and is_png(path) for _, path in files):
            continue
        scores = ", ".join(f"{m} {fmt(to_float(row.get(m)))}" for m in result.mean if m in row)
        caption = f"{label}: {row.get('image', '?')} ({scores})"
        pngs = [(column, path.read_bytes()) for column, path in files]
        scale = max(1, SMALLEST_IMAGE // max(max(png_size(png)[0] for _, png in pngs), 1))
        cells = "".join(img(Image(f"{column}: {row.get('image', '?')}", png), captioned=False, scale=scale)
                        for column, png in pngs)
        labels = "".join(f"<span>{esc(column)}</span>" for column, _ in files)
        figures.append(f'<figure><figcaption>{esc(caption)}</figcaption><div class="columns" style="'
                       f'grid-template-columns: repeat({len(files)}, 1fr)">{labels}</div>'
                       f'<div class="gallery" style="gap: 4px; flex-wrap: nowrap">{cells}</div></figure>')
    return f'<div class="gallery">{"".join(figures)}</div>' if figures else ""


def evaluations_body(results: list[Evaluation], run: RunDir | None = None, summary: RunSummary | None = None,
                     report: Path | None = None, images: int = 6) -> str:
    """A table of every test folder's means, then per folder its best and worst images and page link."""
    metrics = list(dict.fromkeys(name for result in results for name in result.mean))
    rows: list[list[Any]] = []
    for result in results:
        rows.append([result.name, result.weights, result.mode or "?", *(result.mean.get(m) for m in metrics)])
        if result.baseline:
            rows.append([f"{result.name} (baseline: output = input)", "", "",
                         *(result.baseline.get(m) for m in metrics)])
    parts = [f"<p>Mean scores of each <code>test/</code> folder, newest weights first.</p>"
             f"{table(rows, ['test', 'weights', 'mode', *metrics])}"]
    for result in results:
        if run is None or summary is None:
            continue
        link = (f' &middot; <a href="{relative_link(result.page, report)}">results page: every image</a>'
                if result.page is not None and report is not None else "")
        parts.append(f"<h3>{esc(result.name)}</h3><p>{esc(result.split or '?')} split, {esc(result.weights)}, "
                     f"{esc(result.mode or '?')} mode: {freshness(result, run, summary)}{link}</p>"
                     f"{test_images(result, images) if images else ''}")
    return "".join(parts)


def timing_body(timing: Timing, batch_size: int | None) -> str:
    if not timing.steps:
        return "<p>No timed steps yet.</p>"
    rows: list[tuple[str, Any]] = [
        ("s/iter (median over logging intervals)", timing.seconds_per_step),
        ("s/iter including validation and checkpoints", timing.overall_seconds_per_step),
    ]
    if timing.images_per_second is not None:
        rows.append((f"img/s (batch size {batch_size})", timing.images_per_second))
    rows += [("steps timed", timing.steps), ("training wall time", format_seconds(timing.wall_seconds))]
    if timing.sessions > 1:
        rows.append(("sessions (each resume starts one)", timing.sessions))
    durations = [seconds for _, seconds in timing.epoch_seconds]
    if not durations:
        return table(rows)
    spread = (sum(durations) / len(durations), min(durations), max(durations))
    rows.append(("epoch seconds: mean / min / max", " / ".join(fmt(v) for v in spread)))
    every = table(timing.epoch_seconds, ["epoch", "seconds"])
    return f"{table(rows)}<details><summary>Every epoch</summary>{every}</details>"


def page(title: str, header: str, sections: list[tuple[str, str, str]]) -> str:
    """The HTML document: ``sections`` are ``(anchor, heading, body)``."""
    nav = " ".join(f'<a href="#{anchor}">{esc(heading)}</a>' for anchor, heading, _ in sections)
    body = "".join(f'<section id="{anchor}"><h2>{esc(heading)}</h2>{content}</section>'
                   for anchor, heading, content in sections)
    return ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{esc(title)}</title><style>{STYLE}</style></head>"
            f"<body><header>{header}<nav>{nav}</nav></header>{body}</body></html>\n")


def build_report(run: RunDir, *, smooth: int = 10, max_examples: int = 24, test_images: int = 6,
                 output: Path | None = None) -> str:
    """The report page for ``run`` as an HTML string (``output``: where it will be written, for relative links)."""
    output = output if output is not None else run.path / "report.html"
    history = History.read(run.metrics_file)
    config = read_config(run)
    summary = summarize(run, history, config)
    batch_size = batch_size_of(config)
    results = read_evaluations(run)
    columns = [str(c) for c in run.read_summary().get("example_columns") or []]
    sections = [
        ("setup", "Setup", setup_body(run, config)),
        ("run", "Run", run_body(run, summary, history)),
        ("curves", "Curves", curves_body([] if history.empty else render_plots(history, smooth), smooth)),
        ("examples", "Examples", examples_body(*example_images(run, max_examples), columns)),
        *([("test", "Test results", evaluations_body(results, run, summary, output, test_images))]
          if results else []),
        ("timing", "Timing", timing_body(timing_of(history.records, batch_size), batch_size)),
    ]
    header = (f"<h1>{esc(summary.label)}</h1><p class=\"meta\">trainer <b>{esc(config.get('trainer'))}</b> "
              f"&middot; <span class=\"status {esc(summary.status)}\">{esc(summary.status_text)}</span> "
              f"&middot; report written {time.strftime('%Y-%m-%d %H:%M:%S')}</p>")
    return page(f"NectarGAN report: {summary.label}", header, sections)


def write_report(run: RunDir, output: Path | None = None, **options: int) -> Path:
    """Write the report (default ``RUN_DIR/report.html``) atomically; returns its path."""
    path = output if output is not None else run.path / "report.html"
    document = build_report(run, output=path, **options)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, document)
    except OSError as exc:
        raise RunDirError(f"{path}: cannot write the report there ({exc.strerror}); choose a file with -o") from None
    return path
