"""The "Test results" section of ``nectargan report``: what ``nectargan test`` left in ``RUN_DIR/test/``.

Drawn through the core's ``report_sections`` hook from the files alone
(``test/<name>/metrics.json`` and the PNGs it names), so it works on a copy of
a run and never imports torch. Per test folder: the mean scores next to the
output = input baseline, whether the weights tested are still the run's
current ones, the worst and best images by the first metric (its direction
from the metric registry), and a link to the folder's results page.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Optional

from nectargan_core import JSONFileError, ReportSection, RunReport, read_json_object

#: The largest ``metrics.json`` read back (a test of 100,000 images writes about 30 MB).
RESULTS_MAX_BYTES = 256 * 1024 * 1024



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


#: Top-level keys of a results file that are not scores (a file without a ``mean`` mapping lists its scores there).
NOT_SCORES = frozenset({"epoch", "global_step", "step", "images", "split", "mode", "direction", "checkpoint",
                        "checkpoint_name", "page", "data_root", "compared", "tiling", "per_image", "baseline"})


def read_results(path: Path) -> tuple[Optional[Mapping[str, Any]], str]:
    """The object in a ``metrics.json``, or None and why the report leaves it out (not a regular file, too large,
    not UTF-8 JSON, nested too deep, not an object). Never waits on a FIFO or reads a device to its end."""
    try:
        return read_json_object(path, max_bytes=RESULTS_MAX_BYTES), ""
    except JSONFileError as exc:
        return None, "metrics.json " + str(exc).removeprefix(f"{path}: ")
    except OSError as exc:
        return None, f"metrics.json cannot be read ({exc.strerror or exc})"


def read_evaluations(run_path: Path) -> list[Evaluation]:
    """``RUN_DIR/test/*/metrics.json``: a ``mean`` mapping, or else the file's top-level numbers.

    Newest weights first (by recorded step, then name); a folder whose file records no step comes last.
    """
    return read_test_folders(run_path)[0]


def read_test_folders(run_path: Path) -> tuple[list[Evaluation], list[tuple[str, str]]]:
    """The readable results (as :func:`read_evaluations`) and, for every other ``test/<name>/metrics.json``,
    ``(name, why it is left out)``."""
    results, left_out = [], []
    folders = run_path / "test"
    for path in sorted(folders.glob("*/metrics.json")) if folders.is_dir() else []:
        name = path.parent.name
        data, why = read_results(path)
        if data is None:
            left_out.append((name, why))
            continue
        if "mean" in data:
            if not isinstance(data["mean"], Mapping):
                left_out.append((name, f"its mean is a JSON {type(data['mean']).__name__}, not an object"))
                continue
            mean = numbers(data["mean"])
        else:  # a file of plain scores
            mean = numbers({k: v for k, v in data.items() if k not in NOT_SCORES})
        if not mean:
            left_out.append((name, "metrics.json records no numeric score"))
            continue
        baseline = data.get("baseline")
        base_mean = numbers(baseline.get("mean")) if isinstance(baseline, Mapping) else {}
        checkpoint = data.get("checkpoint_name") or data.get("checkpoint")
        rows = data.get("per_image")
        page = inside(path.parent, data.get("page") or "index.html")
        results.append(Evaluation(
            name, mean, base_mean or None, path.parent, integer(data.get("epoch")),
            integer(data.get("global_step")), Path(str(checkpoint)).name if checkpoint else None,
            str(data["split"]) if "split" in data else None, str(data["mode"]) if "mode" in data else None,
            tuple(row for row in rows if isinstance(row, Mapping)) if isinstance(rows, list) else (),
            page if page is not None and page.is_file() else None))
    return sorted(results, key=lambda r: (r.step is None, -(r.step or 0), r.name)), left_out


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
            and (row.get(metric) is None or isinstance(row.get(metric), (int, float)))
            and not isinstance(row.get(metric), bool)]

    def badness(row: Mapping[str, Any]) -> tuple[bool, float]:
        """Worst first: a score nobody could compute (null, NaN: the image to look at), then by the metric."""
        value = to_float(row[metric])
        if math.isnan(value):
            return False, 0.0
        return True, -value if lower_is_better else value

    rows.sort(key=badness)
    if len(rows) <= count:
        return [(f"{i} of {len(rows)}", row) for i, row in enumerate(rows, 1)]
    worst, best = (count + 1) // 2, count // 2
    return ([(f"worst {i}", row) for i, row in enumerate(rows[:worst], 1)]
            + [(f"best {best - i}", row) for i, row in enumerate(rows[len(rows) - best:])])


def inside(folder: Path, relative: Any) -> Optional[Path]:
    """``folder / relative`` when that stays inside ``folder`` (a results file names its own files only)."""
    if not isinstance(relative, str) or not relative:
        return None
    path = folder / relative
    try:
        return path if path.resolve().is_relative_to(folder.resolve()) else None
    except (OSError, ValueError, RuntimeError):  # RuntimeError: a symlink loop on older Pythons
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
    """The report's "Test results" section, when ``nectargan test`` left results in the run (those it cannot read
    are named with the reason)."""
    results, left_out = read_test_folders(report.run.path)
    if not results and not left_out:
        return []
    body = evaluations_body(results, report) if results else ""
    if left_out:
        listed = "; ".join(f"test/{name}: {why}" for name, why in left_out)
        body += f'<p class="note">Left out: {report.escape(listed)}.</p>'
    return [ReportSection("test", "Test results", body)]
