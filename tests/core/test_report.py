"""``nectargan report``: one HTML file that opens offline and shows the whole run."""

from __future__ import annotations

import base64
import json
import os
import re

import pytest

from nectargan_core import MAX_IMAGE_SIDE, ReportSection, hookimpl
from nectargan_core.reporting.report import build_report, sample_evenly, write_report
from nectargan_core.rundir import RunDir
from runs_support import GanLosses, Tags, make_run, png_size, rendered_dom, write_png
from support import run_cli

PLOTS = 4  # losses-G, losses-D, validation, learning-rates
EXAMPLES = 3
COLUMNS = ["input", "output", "target"]
@pytest.fixture(scope="module")
def reported(tmp_path_factory):
    """A finished run with example grids, and its report written by the CLI."""
    run_dir = make_run(tmp_path_factory.mktemp("report") / "runs", GanLosses(), name="facades")
    grids = {epoch: write_png(run_dir / "examples" / f"epoch{epoch:04d}.png", 96, 32, (40 * epoch, 90, 160))
             for epoch in range(1, EXAMPLES + 1)}
    summary = json.loads((run_dir / "summary.json").read_text())  # as a trainer with three-column grids writes it
    (run_dir / "summary.json").write_text(json.dumps({**summary, "example_columns": COLUMNS}))
    result = run_cli("report", str(run_dir))
    assert result.returncode == 0, result.stderr
    page = run_dir / "report.html"
    assert result.stdout.strip() == f"wrote {page}"
    return run_dir, page, grids


def text_of(document: str) -> str:
    return " ".join(" ".join(Tags(document).text).split())


def test_report_is_self_contained(reported):
    run_dir, page, grids = reported
    document = page.read_text(encoding="utf-8")
    tags = Tags(document)
    images = tags.of("img")
    assert len(images) == PLOTS + EXAMPLES
    for attrs in images:
        assert attrs["src"].startswith("data:image/png;base64,")
        width, height = png_size(base64.b64decode(attrs["src"].split(",", 1)[1]))
        scale = int(attrs["width"]) // width  # small images are enlarged by a whole factor
        assert scale >= 1 and (int(attrs["width"]), int(attrs["height"])) == (scale * width, scale * height)
    embedded = [base64.b64decode(a["src"].split(",", 1)[1]) for a in images[PLOTS:PLOTS + EXAMPLES]]
    assert embedded == [grids[epoch] for epoch in sorted(grids)]
    links = [attrs.get(key) or "" for _, attrs in tags.tags for key in ("src", "href")]
    assert not [link for link in links if re.match(r"\s*(https?:)?//", link)]
    assert [attrs["href"] for attrs in tags.of("a") if not attrs["href"].startswith("#")] == []
    assert not tags.of("script") and not tags.of("link") and not tags.of("iframe")


def test_report_leads_with_the_setup_and_keeps_the_config_collapsed(reported):
    run_dir, page, _ = reported
    document = page.read_text(encoding="utf-8")
    tags = Tags(document)
    assert [attrs["id"] for attrs in tags.of("section")] == ["setup", "run", "curves", "examples", "timing"]
    rows = dict(json.loads((run_dir / "summary.json").read_text())["rows"])
    setup = document[document.index('<section id="setup">'):document.index('<section id="run">')]
    assert text_of(setup).startswith("Setup " + " ".join(f"{label} {text}" for label, text in rows.items()))
    assert "schedule 3 epochs x 4 batches = 12 steps" in text_of(setup)
    assert "<details><summary>Full resolved config (config.yaml)</summary><pre>" in setup
    assert "<details open" not in document


def test_report_shows_status_metrics_examples_tests_and_timing(reported):
    run_dir, page, _ = reported
    text = text_of(page.read_text(encoding="utf-8"))
    assert "facades/version_0" in text and "trainer toy" in text
    assert "status finished" in text and "epochs 3 of 3" in text and "steps 12" in text
    assert "latest checkpoint checkpoints/epoch0003-step00000012.pt (epoch 3, step 12)" in text
    assert re.search(r"best checkpoint checkpoints/best\.pt \(epoch \d, step \d+, val/mse [\d.e-]+\)", text)
    assert "best_metric: val/mse" in text and "name: facades" in text  # full config, in <details>
    assert re.search(r"last validation \(epoch 3\) mse [\d.e-]+", text)
    assert ("Each grid shows input | output | target after the epoch named above it (all 3); the same images in "
            "every grid, so epochs compare side by side. epoch 1 input output target epoch 2 input output target "
            "epoch 3 input output target") in text  # each grid: its caption, then its column labels
    assert re.search(r"s/iter \(median over logging intervals\) [\d.e-]+", text)
    assert re.search(r"img/s \(batch size 4\) [\d.e+]+", text)
    assert re.search(r"epoch seconds: mean / min / max [\d.e-]+ / [\d.e-]+ / [\d.e-]+", text)


def test_report_renders_in_headless_chromium_with_every_image_loaded(reported, tmp_path):
    _, page, grids = reported
    tags = Tags(rendered_dom(page, tmp_path))
    images = tags.of("img")
    assert len(images) == PLOTS + EXAMPLES
    assert [a["data-loaded"] for a in images] == ["yes"] * len(images)
    assert [a["data-natural"] for a in images[PLOTS:PLOTS + EXAMPLES]] == ["96x32"] * EXAMPLES
    text = " ".join(" ".join(tags.text).split())
    assert "Setup" in text and "Curves" in text and "Examples" in text
    assert "Timing" in text


def test_long_runs_embed_an_even_sample_of_example_grids(tmp_path):
    run_dir = make_run(tmp_path / "runs", epochs=1)
    for epoch in range(1, 31):
        write_png(run_dir / "examples" / f"epoch{epoch:04d}.png", 4, 4)
    (run_dir / "examples" / "epoch0031.png").write_bytes(b"half a file")
    document = build_report(RunDir(run_dir), max_examples=5)
    captions = re.findall(r"<figcaption>(.*?)</figcaption>", document)
    assert captions == ["epoch 1", "epoch 8", "epoch 15", "epoch 23", "epoch 30"]  # the broken file is left out
    assert "(5 of 30, evenly spaced)" in document
    assert sample_evenly(list(range(10)), 0) == list(range(10))
    assert sample_evenly(list(range(10)), 1) == [9]


def test_report_of_a_run_without_metrics_yet(tmp_path):
    run_dir = tmp_path / "fresh"
    run_dir.mkdir()
    (run_dir / "config.yaml").write_text("trainer: toy\nloop: {epochs: 5}\n")
    result = run_cli("report", str(run_dir), "-o", str(tmp_path / "out" / "fresh.html"))
    assert result.returncode == 0, result.stderr
    document = (tmp_path / "out" / "fresh.html").read_text()
    assert "No metrics recorded yet." in document and "<img" not in document
    assert "epochs</th><td>0 of 5" in document
    blocked = tmp_path / "out" / "fresh.html" / "report.html"  # under a file
    result = run_cli("report", str(run_dir), "-o", str(blocked))
    assert result.returncode == 1
    (line,) = result.stderr.strip().splitlines()
    assert re.fullmatch(rf"error: {re.escape(str(blocked))}: cannot write the report there \(.+\); "
                        r"choose a file with -o", line)


def test_report_on_a_folder_that_is_not_a_run(tmp_path):
    result = run_cli("report", str(tmp_path))
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [f"error: {tmp_path}: not a NectarGAN run directory (no config.yaml)"]


def test_plugins_add_sections_between_the_examples_and_the_timing(tmp_path, nectargan_plugin_host):
    run_dir = make_run(tmp_path / "runs", epochs=1)
    seen = []

    class Gallery:
        @hookimpl
        def report_sections(self, report):
            seen.append((report.run.path, report.summary.steps, report.config["trainer"], report.images))
            link = report.link(report.run.path / "config.yaml")
            return [ReportSection("gallery", "Gallery <1>", f"<p>{report.escape('<b>&')}</p><a href=\"{link}\">c</a>"),
                    ReportSection("timing", "Second", "<p>two</p>")]

    class Quiet:
        @hookimpl
        def report_sections(self, report):
            return None

    host = nectargan_plugin_host(Gallery(), Quiet(), installed=False)
    output = tmp_path / "elsewhere" / "page.html"
    document = build_report(RunDir(run_dir), plugins=host, output=output, test_images=3)
    tags = Tags(document)
    assert [attrs["id"] for attrs in tags.of("section")] == [
        "setup", "run", "curves", "examples", "gallery", "timing-6", "timing"]  # a taken anchor is made unique
    assert "<h2>Gallery &lt;1&gt;</h2><p>&lt;b&gt;&amp;</p>" in document
    assert [a["href"] for a in tags.of("a")][-1] == os.path.relpath(run_dir / "config.yaml", output.parent)
    assert seen == [(run_dir, 4, "toy", 3)]  # the run, its summary and config, and --test-images


@pytest.mark.parametrize("answer, why", [
    ("raise", "RuntimeError: cannot read <test>"),
    ("text", "returned a str, not a list of ReportSection"),
    ("dict", "returned a dict where a ReportSection belongs"),
    ("anchor", "anchor 'Not An Anchor' is not lower-case letters, digits and '-', starting with a letter"),
])
def test_a_plugin_section_that_fails_is_a_note_and_the_report_is_still_written(answer, why, tmp_path,
                                                                              nectargan_plugin_host):
    run_dir = make_run(tmp_path / "runs", epochs=1)

    class Broken:
        @hookimpl
        def report_sections(self, report):
            if answer == "raise":
                raise RuntimeError("cannot read <test>")
            return {"text": "<p>hi</p>", "dict": [{"anchor": "x"}],
                    "anchor": [ReportSection("Not An Anchor", "x", "")]}[answer]

    class Fine:
        @hookimpl
        def report_sections(self, report):
            return [ReportSection("fine", "Fine", "<p>still here</p>")]

    document = build_report(RunDir(run_dir), plugins=nectargan_plugin_host(Broken(), Fine(), installed=False))
    sections = [attrs["id"] for attrs in Tags(document).of("section")]
    assert sections == ["setup", "run", "curves", "examples", "plugin-note", "fine", "timing"]
    note = document[document.index('<section id="plugin-note">'):document.index('<section id="fine">')]
    assert text_of(note) == ("Left out: Broken's section The report_sections hook of plugin 'Broken' (Broken) failed, "
                             f"so its section is not on this page: {why}")
    assert "<test>" not in note


def test_a_plugin_section_is_held_to_the_pages_rules(tmp_path, nectargan_plugin_host, capsys):
    """What a stranger's hook tried: lone surrogates (an undecodable file name), links out of the run, bytes that
    are no whole PNG, a FIFO where a PNG should be, a changed config, sys.exit()."""
    run_dir = make_run(tmp_path / "runs", epochs=1)
    fifo = run_dir / "pipe.png"
    os.mkfifo(fifo)
    grid = write_png(run_dir / "g.png", 4, 4)
    checks = {}

    class Probing:
        @hookimpl
        def report_sections(self, report):
            report.config["trainer"] = "HACKED"
            checks["fifo"] = report.is_png(fifo)
            checks["cut"] = report.is_png(run_dir / "cut.png")
            checks["whole"] = report.is_png(str(run_dir / "g.png"))
            checks["inside"] = report.link("g.png")
            for attempt, call in {"outside": lambda: report.link("/etc/passwd"),
                                  "up": lambda: report.link("../../elsewhere"),
                                  "bytes": lambda: report.image(b"\x89PNG\r\n\x1a\n", "x"),
                                  "huge": lambda: report.image(grid[:16] + (60000).to_bytes(4, "big") * 2 + grid[24:], "x")
                                  }.items():
                with pytest.raises(ValueError) as caught:
                    call()
                checks[attempt] = str(caught.value)
            checks["direction"] = report.metric_direction(None), report.metric_direction("val/psnr")
            return [ReportSection("odd", "S\ud800", f"<p>{report.escape('name' + chr(0xDCFF))}</p>")]

    class Exiting:
        @hookimpl
        def report_sections(self, report):
            raise SystemExit(3)

    (run_dir / "cut.png").write_bytes(grid[:-12])
    host = nectargan_plugin_host(Probing(), Exiting(), installed=False)
    capsys.readouterr()
    path = write_report(RunDir(run_dir), plugins=host)
    document = path.read_text(encoding="utf-8")
    assert "trainer <b>toy</b>" in document  # the plugin changed its copy of the config only
    assert "<h2>S\\ud800</h2><p>name\\udcff</p>" in document
    assert (checks["fifo"], checks["cut"], checks["whole"], checks["inside"]) == (False, False, True, "g.png")
    assert checks["outside"] == "/etc/passwd: outside the run directory; the report links only to files inside it"
    assert checks["up"].endswith(": outside the run directory; the report links only to files inside it")
    assert checks["bytes"] == "'x': not a PNG (no PNG signature and header)"
    assert checks["huge"] == f"'x': a PNG of 60000x60000 pixels; the page shows images of 1 to {MAX_IMAGE_SIDE} pixels a side"
    assert checks["direction"] == (None, "max")
    assert "The report_sections hook of plugin 'Exiting' (Exiting) failed, so its section is not on this page: " \
           "SystemExit: 3" in text_of(document)
    assert capsys.readouterr().err == ("warning: plugin 'Exiting' (Exiting): report_sections failed, its section is "
                                       "left out of the report: SystemExit: 3\n")


def test_strict_plugins_make_a_failing_report_section_an_error(tmp_path, nectargan_plugin_host, monkeypatch):
    from nectargan_core import PluginError

    class Broken:
        @hookimpl
        def report_sections(self, report):
            raise RuntimeError("boom")

    host = nectargan_plugin_host(Broken(), installed=False)
    host.strict = True
    with pytest.raises(PluginError, match=r"^plugin 'Broken' \(Broken\): report_sections failed: RuntimeError: boom$"):
        build_report(RunDir(make_run(tmp_path / "runs", epochs=1)), plugins=host)


def test_the_hook_references_report_sections_example_works_as_written(tmp_path, nectargan_plugin_host):
    """docs/hooks.md's example plugin, run as written, adds its FID table to the page."""
    import types
    from pathlib import Path as _Path

    text = (_Path(__file__).resolve().parents[2] / "docs" / "hooks.md").read_text()
    section = text[text.index("### report_sections"):text.index("## Run hooks")]
    code = section[section.index("```python\n") + len("```python\n"):]
    code = code[:code.index("```")]
    module = types.ModuleType("fid_report")
    exec(compile(code, "hooks.md", "exec"), module.__dict__)
    run_dir = make_run(tmp_path / "runs", epochs=1)
    (run_dir / "fid").mkdir()
    (run_dir / "fid" / "scores.json").write_text('{"best.pt": 41.25, "epoch0001-step00000004.pt": 58.5}')
    document = build_report(RunDir(run_dir), plugins=nectargan_plugin_host(module, installed=False))
    fid = document[document.index('<section id="fid">'):document.index('<section id="timing">')]
    assert text_of(fid) == "FID checkpoint FID best.pt 41.25 epoch0001-step00000004.pt 58.5"
