"""Headless Chromium for the HTML pages the project writes (the run report, the test results page).

The page is loaded from a file with a script appended that runs after the page's
own: it marks every image with whether it decoded and its pixel size, and may
do more (click, read the result back into the DOM). ``--dump-dom`` then returns
the DOM as the browser left it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]
#: Appended to a copy of a page: after load, every <img> says whether it decoded, and its pixel size.
MARK_IMAGES = """<script>
window.addEventListener("load", () => {
  for (const image of document.images) {
    image.dataset.loaded = image.complete && image.naturalWidth > 0 ? "yes" : "no";
    image.dataset.natural = image.naturalWidth + "x" + image.naturalHeight;
  }
});
</script>"""


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not on PATH; .ci/run installs it")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    return found


def rendered_dom(page: Path, scratch: Path, script: str = "", beside: bool = False) -> str:
    """The DOM after headless Chromium loaded a copy of ``page`` with MARK_IMAGES (and ``script``) added.

    ``beside``: the copy is written next to ``page`` (so its relative links resolve), else into ``scratch``.
    """
    probe = (page.parent if beside else scratch) / f"rendered-{page.name}"
    probe.write_text(page.read_text(encoding="utf-8").replace("</body>", MARK_IMAGES + script + "</body>"),
                     encoding="utf-8")
    for attempt in (1, 2):  # a start that stalls for good (seen once in CI) gets a second browser
        profile = scratch / f"chromium-profile-{attempt}"
        profile.mkdir(exist_ok=True)
        try:
            result = subprocess.run([chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--dump-dom",
                                     probe.as_uri()], capture_output=True, text=True, timeout=60)
            break
        except subprocess.TimeoutExpired:
            if attempt == 2:
                raise
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


class Tags(HTMLParser):
    """Every start tag of a document with its attributes, and the document's text."""

    def __init__(self, document: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.feed(document)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def of(self, name: str) -> list[dict[str, str | None]]:
        return [attrs for tag, attrs in self.tags if tag == name]
