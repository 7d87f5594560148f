"""What a plugin adds to ``nectargan report``: a :class:`ReportSection` built from a :class:`RunReport`.

The core's report knows runs in general (setup, curves, example grids,
timing); what a plugin's own commands leave in a run directory (the results
of ``nectargan test``, say) is shown by that plugin's ``report_sections``
hook. The :class:`RunReport` it gets says which run and page it draws for and
hands out the page's pieces, so its section escapes text, lays out tables
and embeds images like the rest of the page.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Optional, Sequence
from urllib.parse import quote

from ..checkpoint import sidecar_path
from ..jsonfiles import read_json_object
from ..rundir import RunDir
from . import markup

if TYPE_CHECKING:  # the summary is read by the report; the hookspecs and the plugin host import this module
    from .runs import RunSummary

ANCHOR = re.compile(r"^[a-z][a-z0-9-]{0,39}$")
"""What a section's anchor may be (it becomes ``#anchor`` in the page's address)."""


def checkpoint_position(path: Path) -> Optional[tuple[int, int]]:
    """``(epoch, global_step)`` of the checkpoint at ``path``, from its JSON sidecar; None if unknown."""
    try:
        meta = read_json_object(sidecar_path(Path(path)))
        return int(meta["epoch"]), int(meta["global_step"])
    except (OSError, ValueError, KeyError, TypeError, OverflowError):
        return None


@dataclass(frozen=True)
class ReportSection:
    """One section of the report: ``<h2>heading</h2>`` and ``html`` under it, reachable as ``#anchor``.

    ``html`` is inserted as it is: escape every text it shows (``RunReport.escape``).
    """

    anchor: str
    heading: str
    html: str

    def problem(self) -> Optional[str]:
        """Why the report cannot show this section, or None."""
        if not isinstance(self.anchor, str) or not ANCHOR.match(self.anchor):
            return f"anchor {self.anchor!r} is not lower-case letters, digits and '-', starting with a letter"
        if not isinstance(self.heading, str) or not self.heading.strip():
            return "heading is empty"
        if not isinstance(self.html, str):
            return f"html is a {type(self.html).__name__}, not a str"
        return None


@dataclass(frozen=True)
class RunReport:
    """The report being drawn, for a plugin's ``report_sections`` hook.

    Read the run through ``run`` (its folder, checkpoints, summary) and the
    parsed ``summary`` and ``config``; write links with :meth:`link` (the page
    may be written outside the run directory); show at most ``images`` images
    of each result the section lists (``nectargan report --test-images``).
    """

    run: RunDir
    summary: RunSummary
    config: Mapping[str, Any]
    output: Path
    images: int = 6
    registry: Any = field(default=None, repr=False)

    # -- the page's pieces ---------------------------------------------------
    #: ``escape(value)``: the text of ``value``, safe to put in the page.
    escape = staticmethod(markup.esc)
    #: ``number(value)``: a float to 4 significant digits, anything else as YAML writes it; not escaped.
    number = staticmethod(markup.fmt)
    #: ``table(rows, header=())``: a table (numbers right-aligned), or label | value rows; escapes every cell.
    table = staticmethod(markup.table)

    @staticmethod
    def image(png: bytes, caption: str, scale: float = 1.0) -> str:
        """A PNG embedded in the page (the file stays self-contained), captioned above, ``scale``-times its size.

        Raises ValueError for bytes that are not a whole PNG within the image-size limit (check files with
        :meth:`is_png` first)."""
        return markup.img(markup.Image(caption, png), scale=scale)

    @staticmethod
    def image_row(caption: str, images: Sequence[tuple[str, bytes]], smallest: int = 128) -> str:
        """PNGs side by side under ``caption``, each labelled; all enlarged by a whole factor below ``smallest`` px.
        Raises ValueError as :meth:`image` does."""
        return markup.labelled_row(caption, images, smallest)

    @staticmethod
    def gallery(figures: Iterable[str]) -> str:
        """Figures (from :meth:`image` or :meth:`image_row`) laid out in wrapping rows."""
        return f'<div class="gallery">{"".join(figures)}</div>'

    @staticmethod
    def is_png(path: str | Path) -> bool:
        """Whether ``path`` is a regular file holding a whole PNG (signature, header, end chunk, sides the page
        shows): worth embedding. Never waits on a FIFO or reads a device."""
        return markup.is_png(Path(path))

    def link(self, target: str | Path) -> str:
        """A URL for ``target`` (relative paths: inside the run directory) relative to the folder the page is
        written to. Raises ValueError for a target outside the run directory: the page links nowhere else."""
        path = Path(target)
        path = (path if path.is_absolute() else self.run.path / path).resolve()
        if not path.is_relative_to(self.run.path.resolve()):
            raise ValueError(f"{markup.safe_text(str(target))}: outside the run directory; the report links only "
                             "to files inside it")
        relative = os.path.relpath(path, self.output.resolve().parent)
        return quote(Path(relative).as_posix(), errors="surrogateescape")

    def checkpoint_position(self, path: Path) -> Optional[tuple[int, int]]:
        """``(epoch, global_step)`` of the checkpoint at ``path``, from its sidecar (no torch); None if unknown."""
        return checkpoint_position(path)

    def metric_direction(self, metric: str) -> Optional[str]:
        """``"min"`` or ``"max"`` for ``metric`` (registered metrics first, then the name), or None."""
        from ..directions import direction

        if not isinstance(metric, str):
            return None
        try:
            return direction(metric, "auto", self.registry)
        except ValueError:
            return None
