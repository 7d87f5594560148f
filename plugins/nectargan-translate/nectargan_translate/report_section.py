"""The "Test results" section of ``nectargan report``: what ``nectargan test`` left in ``RUN_DIR/test/``.

Drawn through the core's ``report_sections`` hook from the files alone
(``test/<name>/metrics.json`` and the PNGs it names), so it works on a copy of
a run and never imports torch. Per test folder: the mean scores next to the
output = input baseline, whether the weights tested are still the run's
current ones, the worst and best images by the first metric (its direction
from the metric registry), and a link to the folder's results page.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Optional

from nectargan_core import ReportSection, RunReport

#: Larger ``metrics.json`` files are left out of the report (a test of 100,000 images writes about 30 MB).
MAX_RESULTS_BYTES = 256 * 1024 * 1024


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


def to_float(value: Any) -> float:
    """A recorded score as a float; null (a score nobody could compute) is NaN."""
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        return math.nan


def numbers(mapping: Any) -> dict[str, float]:
    """The numeric entries of a mapping (null counts as a number we do not know)."""
    if not isinstance(mapping, Mapping):
        return {}
    return {str(k): to_float(v) for k, v in mapping.items()
            if v is None or (isinstance(v, (int, float)) and not isinstance(v, bool))}


def integer(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def read_results(path: Path) -> Optional[Mapping[str, Any]]:
    """The object in a ``metrics.json``, or None for a file that is missing, too large, nested too deep,
    not JSON or not an object (the report shows what it can read and leaves the rest out)."""
    try:
        if path.stat().st_size > MAX_RESULTS_BYTES:
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    return data if isinstance(data, Mapping) else None


def read_evaluations(run_path: Path) -> list[Evaluation]:
    """``RUN_DIR/test/*/metrics.json``: a ``mean`` mapping, or else the file's top-level numbers.

    Newest weights first (by recorded step, then name); a folder whose file records no step comes last.
    """
    results = []
    for path in sorted((run_path / "test").glob("*/metrics.json")):
        data = read_results(path)
        if data is None:
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


def freshness(result: Evaluation, report: RunReport) -> str:
    """Whether the weights tested are still the run's newest (or its current best.pt); HTML."""
    if result.step is None:
        return '<span class="stale">the file does not record which step the weights are from</span>'
    notes = []
    best = report.run.best_checkpoint
    if result.checkpoint == best.name and best.is_file():
        now = report.checkpoint_position(best)
        if now is not None and now[1] != result.step:
            notes.append(f"best.pt has been replaced since: it now holds epoch {now[0]}, step {now[1]}")
    if result.step < report.summary.steps:
        notes.append(f"the run has trained on since, to step {report.summary.steps}")
    if not notes:
        return "the run's current weights"
    return '<span class="stale">not current: ' + report.escape("; ".join(notes)) + "</span>"


def ranked(result: Evaluation, count: int, report: RunReport) -> list[tuple[str, Mapping[str, Any]]]:
    """The ``count`` worst and best images (worst first) with a label, by L1 (else by the first metric)."""
    metric = "l1" if "l1" in result.mean else next(iter(result.mean))
    lower_is_better = report.metric_direction(metric) != "max"
    rows = [row for row in result.per_image if isinstance(row.get("files"), Mapping)
            and isinstance(row.get(metric), (int, float)) and not isinstance(row.get(metric), bool)
            and math.isfinite(row[metric])]
    rows.sort(key=lambda row: float(row[metric]), reverse=lower_is_better)
    if len(rows) <= count:
        return [(f"{i} of {len(rows)}", row) for i, row in enumerate(rows, 1)]
    worst, best = (count + 1) // 2, count // 2
    return ([(f"worst {i}", row) for i, row in enumerate(rows[:worst], 1)]
            + [(f"best {best - i}", row) for i, row in enumerate(rows[len(rows) - best:])])


def inside(folder: Path, relative: Any) -> Optional[Path]:
    """``folder / relative`` when that stays inside ``folder`` (a results file names its own images only)."""
    path = folder / str(relative)
    try:
        return path if path.resolve().is_relative_to(folder.resolve()) else None
    except (OSError, ValueError):
        return None


def test_images(result: Evaluation, count: int, report: RunReport) -> str:
    """The best and worst images of one test, embedded: one figure per image, its columns labelled."""
    figures = []
    for label, row in ranked(result, count, report):
        if result.folder is None:
            break
        files = [(str(column), inside(result.folder, path)) for column, path in row["files"].items()]
        if not files or not all(path is not None and report.is_png(path) for _, path in files):
            continue
        scores = ", ".join(f"{m} {report.number(to_float(row.get(m)))}" for m in result.mean if m in row)
        pngs = [(column, path.read_bytes()) for column, path in files if path is not None]
        figures.append(report.image_row(f"{label}: {row.get('image', '?')} ({scores})", pngs))
    return report.gallery(figures) if figures else ""


def evaluations_body(results: list[Evaluation], report: RunReport) -> str:
    """A table of every test folder's means, then per folder its best and worst images and page link."""
    metrics = list(dict.fromkeys(name for result in results for name in result.mean))
    rows: list[list[Any]] = []
    for result in results:
        rows.append([result.name, result.weights, result.mode or "?", *(result.mean.get(m) for m in metrics)])
        if result.baseline:
            rows.append([f"{result.name} (baseline: output = input)", "", "",
                         *(result.baseline.get(m) for m in metrics)])
    parts = [f"<p>Mean scores of each <code>test/</code> folder, newest weights first.</p>"
             f"{report.table(rows, ['test', 'weights', 'mode', *metrics])}"]
    esc = report.escape
    for result in results:
        link = (f' &middot; <a href="{report.link(result.page)}">results page: every image</a>'
                if result.page is not None else "")
        parts.append(f"<h3>{esc(result.name)}</h3><p>{esc(result.split or '?')} split, {esc(result.weights)}, "
                     f"{esc(result.mode or '?')} mode: {freshness(result, report)}{link}</p>"
                     f"{test_images(result, report.images, report) if report.images else ''}")
    return "".join(parts)


def test_results_section(report: RunReport) -> list[ReportSection]:
    """The report's "Test results" section, when ``nectargan test`` left readable results in the run."""
    results = read_evaluations(report.run.path)
    return [ReportSection("test", "Test results", evaluations_body(results, report))] if results else []
