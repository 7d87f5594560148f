"""The run report: one self-contained HTML file that can be mailed, archived or opened offline.

It leads with what defines the run (the trainer's ``summary.json``: networks
and their parameter counts, data, schedule, precision), keeps the full
config collapsed, then shows status, curves, the example grids side by side,
the sections installed plugins add (``report_sections``: nectargan-translate
shows the results of ``nectargan test``) and timing. Images are embedded as
base64 ``data:`` URIs and the stylesheet is inline; the page loads nothing
from anywhere and runs no script. The only links are relative ones that
plugins' sections make to files in the run directory.
"""

from __future__ import annotations

import copy
import os
import re
import time
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence, TypeVar

import yaml

from ..atomic import atomic_write_text
from ..builtin.console import format_seconds
from ..errors import RunDirError
from ..rundir import RunDir
from .history import History, as_int, section, to_float
from .markup import Image, esc, fmt, img, is_png, png_size, safe_text, table
from .plots import Plot, render_plots
from .runs import RunSummary, read_config, summarize
from .sections import RunReport, checkpoint_position
from .timing import Timing, timing_of

EXAMPLE_NAME = re.compile(r"^epoch(\d+)\.png$")
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


def sidecar_position(path: Path) -> list[str]:
    """Epoch and step of a checkpoint, from its JSON sidecar (no torch needed)."""
    position = checkpoint_position(path)
    return [f"epoch {position[0]}", f"step {position[1]}"] if position else []


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
    why = ("its summary.json cannot be read (damaged, or not written by NectarGAN)"
           if os.path.lexists(run.summary_file) else "This run has no summary.json (it predates it)")
    note = f"<p class=\"note\">{esc(why[0].upper() + why[1:])}; its key settings:</p>"
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
    """The HTML document: ``sections`` are ``(anchor, heading, body)``; text UTF-8 cannot hold is escaped."""
    nav = " ".join(f'<a href="#{anchor}">{esc(heading)}</a>' for anchor, heading, _ in sections)
    body = "".join(f'<section id="{anchor}"><h2>{esc(heading)}</h2>{content}</section>'
                   for anchor, heading, content in sections)
    return ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{esc(title)}</title><style>{STYLE}</style></head>"
            f"<body><header>{header}<nav>{nav}</nav></header>{safe_text(body)}</body></html>\n")


def build_report(run: RunDir, *, smooth: int = 10, max_examples: int = 24, test_images: int = 6,
                 output: Path | None = None, plugins: Any = None) -> str:
    """The report page for ``run`` as an HTML string (``output``: where it will be written, for relative links).

    ``plugins`` (a :class:`~nectargan_core.PluginHost`; default: the installed plugins) add their
    ``report_sections`` between the example grids and the timing.
    """
    output = output if output is not None else run.path / "report.html"
    history = History.read(run.metrics_file)
    config = read_config(run)
    summary = summarize(run, history, config)
    batch_size = batch_size_of(config)
    columns = [str(c) for c in run.read_summary().get("example_columns") or []]
    sections = [
        ("setup", "Setup", setup_body(run, config)),
        ("run", "Run", run_body(run, summary, history)),
        ("curves", "Curves", curves_body([] if history.empty else render_plots(history, smooth), smooth)),
        ("examples", "Examples", examples_body(*example_images(run, max_examples), columns)),
    ]
    header = (f"<h1>{esc(summary.label)}</h1><p class=\"meta\">trainer <b>{esc(config.get('trainer'))}</b> "
              f"&middot; <span class=\"status {esc(summary.status)}\">{esc(summary.status_text)}</span> "
              f"&middot; report written {time.strftime('%Y-%m-%d %H:%M:%S')}</p>")
    if plugins is None:
        from ..plugins import get_plugins

        plugins = get_plugins()
    # the plugins get a copy of the config: what one changes shows nowhere else
    report = RunReport(run, summary, copy.deepcopy(config), output, test_images, plugins.registry)
    taken = {anchor for anchor, _, _ in sections} | {"timing"}
    for section in plugins.report_sections(report):
        anchor = section.anchor
        while anchor in taken:  # two plugins (or a plugin and the core) chose one anchor: both stay reachable
            anchor = f"{section.anchor}-{len(taken)}"
        taken.add(anchor)
        sections.append((anchor, section.heading, section.html))
    sections.append(("timing", "Timing", timing_body(timing_of(history.records, batch_size), batch_size)))
    return page(f"NectarGAN report: {summary.label}", header, sections)


def write_report(run: RunDir, output: Path | None = None, **options: Any) -> Path:
    """Write the report (default ``RUN_DIR/report.html``) atomically; returns its path."""
    path = output if output is not None else run.path / "report.html"
    document = build_report(run, output=path, **options)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, document)
    except OSError as exc:
        raise RunDirError(f"{path}: cannot write the report there ({exc.strerror}); choose a file with -o") from None
    return path
