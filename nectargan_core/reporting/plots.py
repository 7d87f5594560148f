"""Loss, validation and learning-rate figures as PNG images.

Figures are drawn on ``matplotlib.figure.Figure`` objects and rendered by the
Agg canvas, never through pyplot: no GUI backend, no global figure state, and
matplotlib is imported only when the first figure is drawn.
"""

from __future__ import annotations

import io
import math
import re
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..atomic import atomic_write, new_folder
from ..errors import RunDirError
from ..text import printable
from .history import History, Series, moving_average

PANEL_SIZE = (4.8, 3.2)  # inches per subplot; at 100 dpi a 480x320 px panel
DPI = 100
TITLE_HEIGHT = 40  # pixels for the figure's title
MAX_COLUMNS = 3
#: Panels of one figure (and lines of the learning-rate plot) at most: a crafted log with thousands of loss
#: terms made plot and report draw for ever; a real trainer logs a handful per network.
MAX_PANELS = 24
#: Loss figures (one per network) at most: "K17/t" names a network of its own.
MAX_NETWORKS = 12


@dataclass(frozen=True)
class Plot:
    """One rendered figure: ``name`` is its file stem, ``png`` the encoded image."""

    name: str
    title: str
    png: bytes


def render_plots(history: History, smooth: int = 10, details: bool = False) -> list[Plot]:
    """Every figure the log supports: one per network's losses, then validation, then learning rates.

    Values past what an axis can scale (1e308) draw as they can, without numpy's overflow warnings.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return _render(history, smooth, details)


#: The largest magnitude drawn: matplotlib's tick maths overflows near the float limit (1.7e308 crashed plot
#: and report with "arange: cannot compute length"); a loss that large is a blow-up, left out like a NaN.
MAX_DRAWN = 1e300


def plottable(values: list[float]) -> list[float]:
    """``values`` with those no axis can scale left out (NaN: a gap in the curve)."""
    return [v if math.isfinite(v) and abs(v) < MAX_DRAWN else math.nan for v in values]


def first(curves: dict[str, Series], what: str) -> tuple[dict[str, Series], str]:
    """At most :data:`MAX_PANELS` of ``curves``, and the title's note when some were left out."""
    if len(curves) <= MAX_PANELS:
        return curves, ""
    return dict(list(curves.items())[:MAX_PANELS]), f" (the first {MAX_PANELS} of {len(curves)} {what})"


def _render(history: History, smooth: int, details: bool) -> list[Plot]:
    repeated = history.repeated()  # a term equal to its network's total gets no panel of its own
    totals = {total: term for term, total in repeated.items()}
    networks = list(history.losses(details).items())
    plots = [loss_plot(network, {k: v for k, v in curves.items() if k not in repeated}, smooth, totals,
                       f" (figure {index + 1} of the first {MAX_NETWORKS} of {len(networks)} networks)"
                       if len(networks) > MAX_NETWORKS else "")
             for index, (network, curves) in enumerate(networks[:MAX_NETWORKS])]
    validation = history.validation()
    if validation:
        plots.append(validation_plot(validation))
    rates = history.learning_rates()
    if rates:
        plots.append(learning_rate_plot(rates))
    return plots


def write_plots(plots: list[Plot], out_dir: Path) -> list[Path]:
    """Write each plot as ``out_dir/<name>.png`` (atomically: a viewer never sees half a file)."""
    written = []
    try:
        with new_folder(out_dir):
            for plot in plots:
                path = out_dir / f"{plot.name}.png"
                atomic_write(path, lambda handle, png=plot.png: handle.write(png))
                written.append(path)
    except OSError as exc:
        raise RunDirError(f"{out_dir}: cannot write plots there ({exc.strerror}); choose a folder with -o") from None
    return written


def loss_plot(network: str, curves: dict[str, Series], smooth: int, repeats: dict[str, str] | None = None,
              note: str = "") -> Plot:
    """One panel per loss term: the logged interval means, faint, under their moving average.

    ``repeats`` maps a total to the one term it equals (that term has no panel of its own).
    """
    repeats = repeats or {}
    curves, more = first(curves, "terms")
    title = (f"{network} losses" if network else "losses") + more + note
    figure, axes = new_figure(title, len(curves))
    for ax, (key, series) in zip(axes, curves.items()):
        smoothed = smooth > 1
        ax.plot(series.x, plottable(series.y), color="C0", linewidth=1, alpha=0.35 if smoothed else 1.0, label="raw",
                marker=single_point(series))
        if smoothed:
            ax.plot(series.x, plottable(moving_average(plottable(series.y), smooth)), color="C0", linewidth=1.8,
                    label=f"moving average ({smooth})")
        style(ax, f"{key} (= {repeats[key]})" if key in repeats else key)
    axes[0].legend(fontsize="small")
    return Plot(f"losses-{file_stem(network)}" if network else "losses", title, to_png(figure))


def validation_plot(curves: dict[str, Series]) -> Plot:
    curves, more = first(curves, "metrics")
    figure, axes = new_figure("validation metrics" + more, len(curves))
    for ax, (name, series) in zip(axes, curves.items()):
        ax.plot(series.x, plottable(series.y), color="C1", marker="o", markersize=3)
        style(ax, name)
    return Plot("validation", "validation metrics", to_png(figure))


def learning_rate_plot(curves: dict[str, Series]) -> Plot:
    curves, more = first(curves, "optimizers")
    figure, (ax,) = new_figure("learning rates" + more, 1)
    for name, series in curves.items():
        ax.plot(series.x, plottable(series.y), label=label(name), marker=single_point(series))
    style(ax, "")
    ax.legend(fontsize="small")
    return Plot("learning-rates", "learning rates", to_png(figure))


def new_figure(title: str, panels: int) -> tuple[Any, list[Any]]:
    """A figure with ``panels`` subplots in rows of at most MAX_COLUMNS."""
    from matplotlib.figure import Figure

    columns = min(panels, MAX_COLUMNS)
    rows = math.ceil(panels / columns)
    width, height = round(PANEL_SIZE[0] * DPI) * columns, round(PANEL_SIZE[1] * DPI) * rows + TITLE_HEIGHT
    figure = Figure(figsize=(inches(width), inches(height)), layout="constrained")
    figure.suptitle(label(title))
    axes = figure.subplots(rows, columns, squeeze=False).ravel().tolist()
    for unused in axes[panels:]:
        unused.set_visible(False)
    return figure, axes[:panels]


def inches(pixels: int) -> float:
    """``pixels`` at DPI as inches that give back exactly ``pixels``: 14.4 x 100 is 1439.999... in floating point,
    which matplotlib before 3.7 cut to 1439 px."""
    value = pixels / DPI
    while value * DPI < pixels:
        value = math.nextafter(value, math.inf)
    return value


def label(text: str) -> str:
    """Text from the metrics log as matplotlib shows it literally: control characters escaped, no mathtext."""
    return printable(text).replace("$", r"\$")


def style(ax: Any, title: str) -> None:
    ax.set_title(label(title), fontsize="medium")
    ax.set_xlabel("epoch")
    ax.grid(alpha=0.3)


def single_point(series: Series) -> str | None:
    """A marker when a curve has one point, which a line alone would not show."""
    return "o" if len(series.x) == 1 else None


def file_stem(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "_", name)


def to_png(figure: Any) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=DPI)
    return buffer.getvalue()
