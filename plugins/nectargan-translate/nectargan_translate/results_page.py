"""The results page of ``nectargan test``: ``index.html`` in the results folder.

What the reference's ``results/<name>/test_<epoch>/index.html`` shows, and
what it leaves out: every test image as input | output | target with its
L1, PSNR and SSIM (and PSNR of the output = input baseline), worst first;
which checkpoint, epoch and step the weights come from; the mode
(eval or train) and the means next to the baseline's. An unpaired split
(CycleGAN) shows input | output | reconstruction, scored by the cycle,
without a baseline. Images are linked
relatively (``images/x.png``), so the folder can be copied or archived as a
whole. A small inline script makes the columns sortable; without it the
table stays worst first. Nothing is loaded from the network.
"""

from __future__ import annotations

import html
import math
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional
from urllib.parse import quote

from nectargan_core import atomic_write_text

from .inference import run_dir_of

if TYPE_CHECKING:  # pragma: no cover
    from .tester import EvaluationReport

#: Thumbnails are shown at most this wide (click one for the full image), and small images at least this wide.
THUMBNAIL, SMALLEST = 256, 128
LABELS = {"l1": "L1", "psnr": "PSNR (dB)", "ssim": "SSIM"}
BETTER = {"l1": "lower is better", "psnr": "higher is better", "ssim": "higher is better"}
MODES = {
    "eval": "eval: dropout off, batch norm on its running statistics (as predict and export run)",
    "train": "train: dropout on, batch norm on each batch's statistics (the reference's test behaviour)",
}

STYLE = """
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1d1d1f; margin: 0 auto;
       max-width: 1500px; padding: 0 24px 48px; }
h1 { margin: 24px 0 4px; font-size: 1.5em; } h2 { margin-top: 30px; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: 8px 0; }
td, th { padding: 4px 12px 4px 0; text-align: left; vertical-align: top; }
th { color: #555; font-weight: 600; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
#images td { vertical-align: middle; border-top: 1px solid #eee; }
#images img { image-rendering: pixelated; border: 1px solid #ddd; display: block; }
th button { font: inherit; color: inherit; font-weight: 600; background: none; border: 0; padding: 0;
            cursor: pointer; text-decoration: underline dotted; }
.note { color: #555; }
"""

SORT_SCRIPT = """
(() => {
  const table = document.getElementById("images");
  const body = table.tBodies[0];
  const order = document.getElementById("order");
  const state = {key: "l1", descending: true};
  function value(row, key) {
    return key === "image" ? row.dataset.image : parseFloat(row.dataset[key]);
  }
  function sortBy(key) {
    state.descending = state.key === key ? !state.descending : key === "l1";
    state.key = key;
    const sign = state.descending ? -1 : 1;
    const rows = Array.from(body.rows);
    rows.sort((a, b) => {
      const x = value(a, key), y = value(b, key);
      if (x === y) return a.dataset.image < b.dataset.image ? -1 : 1;
      return (x < y ? -1 : 1) * sign;
    });
    rows.forEach((row) => body.appendChild(row));
    for (const button of table.querySelectorAll("th button")) {
      button.parentElement.setAttribute("aria-sort", button.dataset.key === key
        ? (state.descending ? "descending" : "ascending") : "none");
    }
    order.textContent = "by " + document.querySelector(`th button[data-key="${key}"]`).textContent
      + (state.descending ? ", largest first" : ", smallest first");
  }
  for (const button of table.querySelectorAll("th button")) {
    button.addEventListener("click", () => sortBy(button.dataset.key));
  }
})();
"""



#: Sub-folders of a results folder, by what they hold (relative links in metrics.json and index.html).
FOLDERS = {"input": "inputs", "output": "images", "target": "targets", "reconstruction": "reconstructions"}

def esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def number(value: Optional[float], digits: int = 4) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return f"{value:.{digits}f}"


def data_value(value: float) -> str:
    """A score for the sort script (``parseFloat`` reads ``Infinity``)."""
    return "Infinity" if value == math.inf else "-Infinity" if value == -math.inf else repr(float(value))


def label(metric: str) -> str:
    return LABELS.get(metric, metric)


def better(metric: str) -> str:
    """Which way ``metric`` improves, in words, as its plugin registered it ("" when nobody says)."""
    if metric in BETTER:
        return BETTER[metric]
    from nectargan_core import get_plugins, metric_direction

    try:
        return "lower is better" if metric_direction(metric, "auto", get_plugins().registry) == "min" else "higher is better"
    except ValueError:
        return ""


def data_key(report: "EvaluationReport", metric: str) -> str:
    """The metric's key in the page's data attributes: its name for L1, PSNR, SSIM; a safe one for the others."""
    return metric if metric in BETTER else f"metric{report.metrics.index(metric)}"


def worst_first(report: "EvaluationReport") -> list[int]:
    """Image indices by L1, highest (worst) first; equal scores by name."""
    l1 = report.values["l1"]
    return sorted(range(len(report.names)), key=lambda i: (-l1[i], report.names[i]))


def facts(report: "EvaluationReport") -> str:
    generator = report.generator
    run = run_dir_of(generator.checkpoint)
    root = f", from {Path(report.data_root).resolve()}" if report.data_root is not None else ""
    model = generator.spec.model if generator.spec is not None else generator.config.models.generator
    rows = [
        ("run", str(run.resolve())),
        ("checkpoint", f"{generator.checkpoint.name}: {generator.position}, step {generator.global_step}"),
        ("split", f"{report.split} ({len(report.names)} images, preprocess {report.preprocess}{root})"),
        ("mode", MODES[report.mode]),
        ("generator", f"{model.name} ({generator.tracked}), {generator.direction}, {generator.channels[0]} -> "
                      f"{generator.channels[1]} channels"),
    ]
    if report.cycle:
        rows.append(("scores", f"{report.compared}: the output translated back by the checkpoint's other "
                               "generator (an unpaired split has no targets)"))
    rows.append(("written", time.strftime("%Y-%m-%d %H:%M:%S")))
    body = "".join(f"<tr><th>{esc(label)}</th><td>{esc(value)}</td></tr>" for label, value in rows)
    return f'<table id="facts">{body}</table>'


def means(report: "EvaluationReport") -> str:
    head = "<tr><th></th>" + "".join(f"<th>{esc(label(m))}<br><small>{esc(better(m))}</small></th>"
                                     for m in report.metrics) + "</tr>"
    rows = [("generator", report.mean)]
    if report.baseline is not None:
        rows.append(("output = input (baseline)", report.baseline))
    body = "".join(f"<tr><th>{esc(label)}</th>"
                   + "".join(f'<td class="num">{number(values[m])}</td>' for m in report.metrics) + "</tr>"
                   for label, values in rows)
    if report.baseline is not None:
        note = ""
    elif report.cycle:
        note = "<p class=\"note\">No baseline: an unpaired split has no targets to score the input against.</p>"
    else:
        note = "<p class=\"note\">No baseline: input and target have different channel counts (a grey input is compared with its channel repeated; other mixes are not).</p>"
    return f'<table id="means">{head}{body}</table>{note}'


def shown_size(size: tuple[int, int]) -> tuple[int, int]:
    """``(height, width)`` to show an image at: small images enlarged (to 128 px), large ones reduced (to 256)."""
    height, width = size
    side = max(height, width, 1)
    scale = min(THUMBNAIL / side, max(1.0, SMALLEST / side))
    return max(1, round(height * scale)), max(1, round(width * scale))


def image_cell(folder: str, name: str, size: tuple[int, int], what: str) -> str:
    src = f"{folder}/{quote(name)}"
    height, width = shown_size(size)
    return (f'<td><a href="{src}"><img src="{src}" width="{width}" height="{height}" loading="lazy" '
            f'alt="{esc(what)}: {esc(name)}"></a></td>')


def images_table(report: "EvaluationReport") -> str:

    sortable = [("image", "image")] + [(data_key(report, m), label(m)) for m in report.metrics]
    headers = {key: f'<th aria-sort="{"descending" if key == "l1" else "none"}"><button type="button" '
                    f'data-key="{key}">{esc(label)}</button></th>' for key, label in sortable}
    baseline_head = ('<th><button type="button" data-key="baseline_psnr">PSNR of output = input</button></th>'
                     if report.baseline_values is not None else "")
    head = (f"<tr><th>rank</th>{headers['image']}" + "".join(f"<th>{what}</th>" for what in report.columns)
            + "".join(headers[data_key(report, m)] for m in report.metrics) + baseline_head + "</tr>")
    rows = []
    for rank, i in enumerate(worst_first(report), 1):
        name = report.names[i]
        size = report.sizes[i] if report.sizes else (0, 0)
        scores = {data_key(report, m): report.values[m][i] for m in report.metrics}
        data = "".join(f' data-{m}="{data_value(v)}"' for m, v in scores.items())
        cells = "".join(f'<td class="num">{number(v)}</td>' for v in scores.values())
        if report.baseline_values is not None:
            base = report.baseline_values["psnr"][i]
            data += f' data-baseline_psnr="{data_value(base)}"'
            cells += f'<td class="num">{number(base)}</td>'
        pictures = "".join(image_cell(FOLDERS[what], name, size, what) for what in report.columns)
        rows.append(f'<tr data-image="{esc(name)}" data-index="{i}"{data}><td class="num">{rank}</td>'
                    f"<td>{esc(name)}</td>{pictures}{cells}</tr>")
    return f'<table id="images"><thead>{head}</thead><tbody>{"".join(rows)}</tbody></table>'


def page_html(report: "EvaluationReport") -> str:
    generator = report.generator
    run = run_dir_of(generator.checkpoint)
    direction = f" {generator.direction}" if report.cycle else ""
    title = (f"{run.parent.name}/{run.name}: {report.split}{direction}, {generator.checkpoint.name} "
             f"({generator.position})")
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>Test results: {esc(title)}</title><style>{STYLE}</style></head><body>"
        f"<h1>Test results: {esc(title)}</h1>{facts(report)}"
        f"<h2>Means</h2>{means(report)}"
        f"<h2>Every image</h2><p class=\"note\">Sorted <span id=\"order\">by L1, largest (worst) first</span>. "
        "Click a column heading to sort by it, again to reverse; click an image for its full size. "
        "Metrics compare images in [0, 1].</p>"
        f"{images_table(report)}<script>{SORT_SCRIPT}</script></body></html>\n"
    )


def write_page(report: "EvaluationReport", folder: Path) -> Path:
    """Write ``folder/index.html`` (the results folder, or its staging copy)."""
    path = folder / "index.html"
    atomic_write_text(path, page_html(report))
    return path
