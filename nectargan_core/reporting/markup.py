"""The HTML pieces the report is made of: escaped text, numbers, tables and embedded PNGs.

Shared by the report's own sections and by the sections plugins add
(:class:`~nectargan_core.reporting.sections.RunReport` hands them out), so a
plugin's section looks like the rest of the page and escapes what it shows.
"""

from __future__ import annotations

import base64
import html
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

import yaml

from ..filekind import open_regular
from ..limits import MAX_IMAGE_SIDE

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
#: The chunk that ends every whole PNG (length 0, type IEND, its CRC).
PNG_END = b"\x00\x00\x00\x00IEND\xaeB`\x82"
#: Widest and tallest image the page embeds: the core's image-size limit.
MAX_SIDE = MAX_IMAGE_SIDE


@dataclass(frozen=True)
class Image:
    """A PNG to embed, with the text shown under it (and read by screen readers)."""

    caption: str
    png: bytes


def png_problem(png: bytes) -> str | None:
    """Why ``png`` is not a whole PNG the page can show (signature, header, end chunk, a side from 1 to
    :data:`MAX_SIDE` pixels), or None."""
    if not isinstance(png, (bytes, bytearray)):
        return f"a {type(png).__name__}, not the bytes of a PNG"
    if png[:8] != PNG_SIGNATURE or png[12:16] != b"IHDR":
        return "not a PNG (no PNG signature and header)"
    if not png.endswith(PNG_END):
        return "an incomplete PNG (it does not end with the IEND chunk)"
    width, height = png_size(png)
    if not (1 <= width <= MAX_SIDE and 1 <= height <= MAX_SIDE):
        return f"a PNG of {width}x{height} pixels; the page shows images of 1 to {MAX_SIDE} pixels a side"
    return None


def is_png(path: Path) -> bool:
    """Whether ``path`` is a regular file holding a whole PNG (a writer's half-done file is not yet)."""
    try:  # never a FIFO or a device, which a read would wait on or never finish
        with os.fdopen(open_regular(path), "rb") as handle:
            head = handle.read(24)
            handle.seek(0, 2)
            if handle.tell() < 24 + len(PNG_END):
                return False
            handle.seek(-len(PNG_END), 2)
            tail = handle.read()
    except OSError:
        return False
    return png_problem(head + tail) is None


def safe_text(text: str) -> str:
    """``text`` with what UTF-8 cannot hold (a lone surrogate from an undecodable file name) shown as an escape."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def esc(value: Any) -> str:
    return html.escape(safe_text(str(value)), quote=True)


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
    Raises ValueError for bytes that are not a whole PNG or a scale that is not a positive number.
    """
    problem = png_problem(image.png)
    if problem is not None:
        raise ValueError(f"{image.caption!r}: {problem}")
    width, height = png_size(image.png)
    if not (isinstance(scale, (int, float)) and math.isfinite(scale) and scale > 0
            and max(width, height) * scale <= MAX_SIDE):
        raise ValueError(f"scale {scale!r}: must be above 0, and show the image at most {MAX_SIDE} pixels a side")
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
