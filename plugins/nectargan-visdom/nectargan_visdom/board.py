"""The run's windows as the sender keeps them: the whole picture, not a stream of increments.

Every window holds its full content and is redrawn whole when it changes.
That costs a little bandwidth but makes every send idempotent: a server that
restarted, lost the env, or had a window closed in the browser gets the
complete window back on the next send, with nothing to replay.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional, Protocol

import numpy as np

from nectargan_core import repeated_terms

from .options import VisdomOptions
from .updates import ImageUpdate, LogUpdate, Update, ValidationUpdate

UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")
#: Points are drawn as markers too while no series of a window is longer than this: plotly draws a
#: one-point line as nothing, and a validation window has one point per validation.
MARKERS_UP_TO = 50
MARKER_SIZE = 6
#: The learning-rate axis starts at 0 and labels ticks like 2e-4: plotly's default range for a constant
#: series is value +-1, which puts a constant 2e-4 on a line labelled "0".
LR_AXIS = {"rangemode": "tozero", "exponentformat": "e", "showexponent": "all"}


class Window(Protocol):
    win: str
    dirty: bool  # changed since it was last drawn on this server

    @property
    def ready(self) -> bool:
        """Whether there is anything to draw yet."""

    def draw(self, client: Any) -> None: ...


class Curves:
    """A line window: named series of (x, y) points; x is the fractional epoch.

    ``yaxis`` holds plotly axis settings that visdom has no option for (they
    replace visdom's own y axis, so the label is repeated there).
    """

    def __init__(self, win: str, title: str, ylabel: str, log_scale: bool = False,
                 yaxis: Optional[Mapping[str, Any]] = None) -> None:
        self.win = win
        self.dirty = False
        self.series: dict[str, tuple[list[float], list[float]]] = {}
        self.opts: dict[str, Any] = {"title": title, "xlabel": "epoch", "ylabel": ylabel, "showlegend": True}
        if log_scale:
            self.opts["ytype"] = "log"
        if yaxis:
            axis = {"title": ylabel, **({"type": "log"} if log_scale else {}), **yaxis}
            self.opts["layoutopts"] = {"plotly": {"yaxis": axis}}

    def add(self, x: float, values: Mapping[str, Any]) -> None:
        for name, value in values.items():
            try:
                y = float(value)
            except (TypeError, ValueError):
                continue
            xs, ys = self.series.setdefault(name, ([], []))
            xs.append(x)
            ys.append(y if math.isfinite(y) else math.nan)  # NaN becomes a gap; JSON has no Infinity
            self.dirty = True

    @property
    def ready(self) -> bool:
        return bool(self.series)

    def window_opts(self) -> dict[str, Any]:
        """The opts sent with the window now: markers while the series are short."""
        opts = {**self.opts, "legend": list(self.series)}
        if max(len(xs) for xs, _ in self.series.values()) <= MARKERS_UP_TO:
            opts.update(markers=True, markersize=MARKER_SIZE)
        return opts

    def draw(self, client: Any) -> None:
        # visdom wants one rectangular array; series that started later are padded
        # with NaN, which visdom sends as null and plotly leaves out.
        names = list(self.series)
        length = max(len(xs) for xs, _ in self.series.values())
        X = np.full((length, len(names)), np.nan)
        Y = np.full((length, len(names)), np.nan)
        for column, name in enumerate(names):
            xs, ys = self.series[name]
            X[: len(xs), column] = xs
            Y[: len(ys), column] = ys
        client.line(Y=Y, X=X, win=self.win, env=client.env, opts=self.window_opts())


class Text:
    """An HTML text window (the run config)."""

    def __init__(self, win: str, title: str, html: str) -> None:
        self.win = win
        self.title = title
        self.html = html
        self.dirty = True

    @property
    def ready(self) -> bool:
        return True

    def draw(self, client: Any) -> None:
        client.text(self.html, win=self.win, env=client.env, opts={"title": self.title})


class Picture:
    """An image window showing one PNG file, read when drawn (the sender's thread, not training's)."""

    def __init__(self, win: str, title: str) -> None:
        self.win = win
        self.title = title
        self.path: Optional[Path] = None
        self.caption = ""
        self.dirty = False

    def show(self, path: Path, caption: str) -> None:
        self.path, self.caption, self.dirty = path, caption, True

    @property
    def ready(self) -> bool:
        return self.path is not None

    def draw(self, client: Any) -> None:
        from PIL import Image

        assert self.path is not None
        with Image.open(self.path) as image:
            pixels = np.asarray(image.convert("RGB")).transpose(2, 0, 1)
        client.image(pixels, win=self.win, env=client.env, opts={"title": self.title, "caption": self.caption})


class Board:
    """All windows of one run, built from updates; the options decide what is shown."""

    def __init__(self, options: VisdomOptions, config_html: Optional[str] = None) -> None:
        self.options = options
        self.windows: dict[str, Window] = {}
        if options.config and config_html is not None:
            self.windows["config"] = Text("config", "config", config_html)

    def apply(self, update: Update) -> None:
        if isinstance(update, LogUpdate):
            if self.options.losses and update.losses:
                self._losses(update.x, update.losses)
            if self.options.lr and update.lr:
                self._curves("lr", "learning rates", "learning rate", yaxis=LR_AXIS).add(update.x, update.lr)
        elif isinstance(update, ValidationUpdate):
            if self.options.validation:
                for name, value in update.metrics.items():
                    name = name.removeprefix("val/")
                    self._curves(f"val_{UNSAFE.sub('_', name)}", f"val/{name}", name).add(update.x, {name: value})
        elif isinstance(update, ImageUpdate):
            picture = self.windows.setdefault("examples", Picture("examples", "examples"))
            assert isinstance(picture, Picture)
            picture.show(update.path, update.caption)

    def _losses(self, x: float, losses: Mapping[str, Any]) -> None:
        """One window per network: the part of the key before '/' (``G/gan`` -> G)."""
        groups: dict[str, dict[str, Any]] = {}
        repeated = repeated_terms(losses)  # D/gan_d when it is all of D/total: one curve, not two
        for key, value in losses.items():
            if key in repeated or ("." in key and not self.options.details):
                continue
            network, slash, _ = key.partition("/")
            groups.setdefault(network if slash else "", {})[key] = value
        for network, values in groups.items():
            win = f"loss_{UNSAFE.sub('_', network)}" if network else "loss"
            title = f"{network} losses" if network else "losses"
            self._curves(win, title, "loss", self.options.log_scale).add(x, values)

    def _curves(self, win: str, title: str, ylabel: str, log_scale: bool = False,
                yaxis: Optional[Mapping[str, Any]] = None) -> Curves:
        curves = self.windows.setdefault(win, Curves(win, title, ylabel, log_scale, yaxis))
        assert isinstance(curves, Curves)
        return curves

    def load_history(self, records: Iterable[Mapping[str, Any]], batches_per_epoch: Optional[int]) -> None:
        """Rebuild the curves of a resumed run from the records its metrics log already holds."""
        for record in records:
            if record.get("kind") == "train":
                self.apply(LogUpdate(record["epoch_progress"], record.get("losses"), record.get("lr")))
            elif record.get("kind") == "val":
                x = record["step"] / batches_per_epoch if batches_per_epoch else record["epoch"] + 1.0
                self.apply(ValidationUpdate(x, record.get("metrics", {})))

    def dirty(self) -> list[Window]:
        return [window for window in self.windows.values() if window.dirty]

    def mark_all_dirty(self) -> None:
        """After a (re)connection the server's copy is unknown: everything is sent again."""
        for window in self.windows.values():
            window.dirty = window.ready
