"""The HTML pieces the report is made of: escaped text, numbers, tables and embedded PNGs.

Shared by the report's own sections and by the sections plugins add
(:class:`~nectargan_core.reporting.sections.RunReport` hands them out), so a
plugin's section looks like the rest of the page and escapes what it shows.
"""

from __future__ import annotations

import base64
import html
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

import yaml

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@dataclass(frozen=True)
class Image:
    """A PNG to embed, with the text shown under it (and read by screen readers)."""

    caption: str
    png: bytes


def is_png(path: Path) -> bool:
    """Whether ``path`` starts as a PNG does (a writer's half-done file does not yet)."""
    with open(path, "rb") as handle:
        return handle.read(len(PNG_SIGNATURE)) == PNG_SIGNATURE


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


def labelled_row(caption: str, images: Sequence[tuple[str, bytes]], smallest: int = 0) -> str:
    """One figure: ``caption`` above PNGs side by side, each labelled (``input``, ``output``, ...).

    Images narrower than ``smallest`` pixels are enlarged by a whole factor, all by the same one.
    """
    scale = max(1, smallest // max(max(png_size(png)[0] for _, png in images), 1)) if images and smallest else 1
    cells = "".join(img(Image(f"{label}: {caption}", png), captioned=False, scale=scale) for label, png in images)
    labels = "".join(f"<span>{esc(label)}</span>" for label, _ in images)
    return (f'<figure><figcaption>{esc(caption)}</figcaption><div class="columns" style="'
            f'grid-template-columns: repeat({len(images)}, 1fr)">{labels}</div>'
            f'<div class="gallery" style="gap: 4px; flex-wrap: nowrap">{cells}</div></figure>')


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
