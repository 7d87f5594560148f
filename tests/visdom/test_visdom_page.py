"""visdom's web page, as a person sees it: a real run, a real ``nectargan visdom serve``, headless Chromium.

Chromium reaches 127.0.0.1 and nothing else, so the page can only work with the
browser assets this package ships. The same page with those assets blocked
(what a plain ``pip install visdom`` serves offline) must come out blank: that
shows the checks below see the difference.
"""

from __future__ import annotations

import importlib.util
import struct

import pytest

from browser import Page, chromium
from nectargan_core import Run
from support import ROOT, cli_runner
from visdom_helpers import VisdomServer

# visdom's client calls the deprecated Logger.warn when it runs without its websocket (its bug, not ours).
pytestmark = [pytest.mark.slow,
              pytest.mark.filterwarnings("ignore:The 'warn' method is deprecated:DeprecationWarning")]

#: Each window's title, its kind of content, and (for plots) what its traces are drawn as, read from the DOM.
PANES = """(() => {
  const panes = {};
  for (const item of document.querySelectorAll('.react-grid-item')) {
    const title = item.querySelector('.bar > div.pull-right');
    const pane = {};
    const plot = item.querySelector('.js-plotly-plot');
    if (plot) {
      pane.legend = Array.from(plot.querySelectorAll('.legendtext'), e => e.textContent);
      pane.traces = Array.from(plot.querySelectorAll('.scatterlayer .trace'), t => ({
        line: Array.from(t.querySelectorAll('path.js-line'), p => (p.getAttribute('d') || '').length)
              .reduce((a, b) => a + b, 0),
        points: t.querySelectorAll('path.point').length,
      }));
      pane.yticks = Array.from(plot.querySelectorAll('.ytick text'), e => e.textContent);
    }
    const image = item.querySelector('img');
    if (image) {
      pane.image = {loaded: image.complete && image.naturalWidth > 0,
                    size: [image.naturalWidth, image.naturalHeight]};
    }
    const text = item.querySelector('.content-text');
    if (text) pane.text = text.textContent;
    panes[title ? title.textContent.trim() : '?'] = pane;
  }
  return panes;
})()"""


def vendored_assets() -> list[str]:
    """The files under visdom's static/ that come from npm (the ones a pip-installed visdom lacks)."""
    path = ROOT / "plugins" / "nectargan-visdom" / "refresh_vendored.py"
    spec = importlib.util.spec_from_file_location("refresh_vendored", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return [asset.target for asset in module.ASSETS]


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def drawn(panes: dict) -> dict:
    """The windows that show something: plots with every trace drawn, loaded images, text."""
    return {title: pane for title, pane in panes.items()
            if (pane.get("traces") and len(pane["traces"]) == len(pane["legend"])
                and all(t["line"] or t["points"] for t in pane["traces"]))
            or (pane.get("image") or {}).get("loaded") or pane.get("text")}


def ticks(labels: list[str]) -> list[float]:
    return [float(label.replace("\u2212", "-")) for label in labels]  # plotly writes U+2212 for minus


@pytest.fixture(scope="module")
def live_run(tmp_path_factory):
    """One epoch of a tiny pix2pix run plotted to a real server, which stays up for the page."""
    from nectargan_translate.data_cli import data_group

    chromium()  # skips (or, in CI, fails) before training when there is no browser
    root = tmp_path_factory.mktemp("visdom_page")
    made = cli_runner().invoke(data_group, ["synth", str(root / "data"), "--count", "8", "--size", "32",
                                           "--val", "0.25", "--test", "0"])
    assert made.exit_code == 0, made.output
    server = VisdomServer(root / "server").start()
    try:
        run = Run.create({
            "trainer": "pix2pix",
            "run": {"output_dir": str(root / "runs"), "name": "live", "device": "cpu"},
            "loop": {"epochs": 1, "log_every_steps": 1},
            "data": {"root": str(root / "data"), "load_size": 32, "crop_size": 32, "num_workers": 0,
                     "batch_size": 2},
            "models": {"generator": {"name": "unet", "depth": 4, "ngf": 8},
                       "discriminator": {"name": "patchgan", "ndf": 8, "n_layers": 2}},
            "checkpoint": {"every_epochs": None, "save_last": False},
            "visualizers": {"visdom": {"port": server.port}},
        }).fit()
        yield run, server, root
    finally:
        server.stop()


@pytest.fixture
def artefacts(live_run, capsys):
    """Keeps a screenshot in the run's temporary folder and prints where, even when pytest captures output."""
    folder = live_run[2] / "screenshots"
    folder.mkdir(exist_ok=True)

    def keep(page: Page, name: str) -> None:
        path = page.screenshot(folder / name)
        with capsys.disabled():
            print(f"\nvisdom page screenshot: {path}")

    return keep


def test_the_page_shows_the_runs_curves_and_example_grid_offline(live_run, tmp_path, artefacts):
    run, server, _ = live_run
    base = f"http://127.0.0.1:{server.port}"
    train = run.metrics("train")
    losses = [key for key in train[-1]["losses"] if "." not in key and key != "D/gan_d"]  # D/total alone
    validations = run.metrics("val")
    metrics = list(validations[-1]["metrics"])
    newest = sorted((run.dir / "examples").glob("*.png"))[-1]
    expected = {"config", "G losses", "D losses", "learning rates", "examples", *(f"val/{m}" for m in metrics)}

    page = Page(tmp_path / "chromium")
    try:
        page.open(f"{base}/env/live_v0")
        panes = page.wait_for(PANES, lambda value: set(drawn(value)) >= expected, timeout=30)
        artefacts(page, "visdom-live.png")
    finally:
        page.close()

    assert set(drawn(panes)) == expected, panes
    assert [p for p in page.requests.values() if not p.startswith((f"{base}/", "data:"))] == []
    assert page.failed == {} and page.errors == []
    assert {url: status for url, status in page.statuses.items() if status >= 400} == {}
    for network in ("G", "D"):
        pane = panes[f"{network} losses"]
        assert pane["legend"] == [k for k in losses if k.startswith(f"{network}/")]
        assert all(trace["line"] for trace in pane["traces"])  # the curves themselves, not only markers
    # One validation so far: a one-point series, which plotly draws only as a marker.
    assert len(validations) == 1
    for metric in metrics:
        assert [t["points"] for t in panes[f"val/{metric}"]["traces"]] == [1], metric
    # A constant learning rate of 2e-4 on an axis from 0 that reaches it (not a "0" on a +-1 axis).
    lr = panes["learning rates"]
    assert lr["legend"] == ["opt_g", "opt_d"] and {r["lr"]["opt_g"] for r in train} == {2e-4}
    assert min(ticks(lr["yticks"])) == 0 and 2e-4 <= max(ticks(lr["yticks"])) < 1e-3, lr["yticks"]
    assert panes["examples"]["image"]["size"] == list(png_size(newest.read_bytes()))
    assert "trainer: pix2pix" in panes["config"]["text"]


def test_without_the_vendored_assets_the_same_page_is_blank(live_run, tmp_path, artefacts):
    _, server, _ = live_run
    assets = vendored_assets()
    assert len(assets) >= 14
    page = Page(tmp_path / "chromium")
    try:
        page.block(*(f"*/static/{name}*" for name in assets))
        page.open(f"http://127.0.0.1:{server.port}/env/live_v0")
        page.wait_for("document.readyState", lambda state: state == "complete", timeout=15)
        panes = page.wait_for(PANES, lambda value: bool(value), timeout=3)  # give it time to (not) draw
        artefacts(page, "visdom-without-assets.png")
    finally:
        page.close()
    assert drawn(panes) == {} and panes == {}
    assert {url.split("?")[0].split("/static/")[1] for url in page.failed} == set(assets) - {
        "fonts/glyphicons-halflings-regular.woff2", "fonts/glyphicons-halflings-regular.woff"}  # asked by CSS
