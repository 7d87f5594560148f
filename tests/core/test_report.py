"""``nectargan report``: one HTML file that opens offline and shows the whole run."""

from __future__ import annotations

import base64
import json
import os
import re

import pytest

from nectargan_core.reporting.report import (build_report, evaluations_body, read_evaluations, sample_evenly,
                                             sidecar_position)
from nectargan_core.rundir import RunDir
from runs_support import GanLosses, Tags, make_run, png_size, rendered_dom, write_png
from support import run_cli

PLOTS = 4  # losses-G, losses-D, validation, learning-rates
EXAMPLES = 3
COLUMNS = ["input", "output", "target"]
TEST_IMAGES = 2 * 3  # --test-images 2: the worst and the best image, three columns each
CURRENT, OLDER, OLD_BEST = "epoch0003-step00000012-test", "epoch0002-step00000008-test", "best-epoch0001-step00000001-test"


def write_test_folder(run_dir, name, epoch, step, checkpoint, l1_values=()):
    """A results folder as ``nectargan test`` writes it: metrics.json, per-image PNGs and index.html."""
    folder = run_dir / "test" / name
    rows = []
    for i, l1 in enumerate(l1_values):
        image = f"{i:05d}.png"
        for column, sub, size in (("input", "inputs", 8), ("output", "images", 8), ("target", "targets", 8)):
            write_png(folder / sub / image, size, size, (60 * i, 20 * len(column), 200))
        rows.append({"image": image, "l1": l1, "psnr": 20 - 10 * l1, "ssim": 1 - l1,
                     "files": {"input": f"inputs/{image}", "output": f"images/{image}", "target": f"targets/{image}"}})
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "index.html").write_text("<!DOCTYPE html><title>results</title>")
    mean = {m: sum(r[m] for r in rows) / len(rows) for m in ("l1", "psnr", "ssim")} if rows else \
        {"l1": 0.25, "psnr": 21.5, "ssim": 0.75}
    (folder / "metrics.json").write_text(json.dumps({
        "checkpoint_name": checkpoint, "epoch": epoch, "global_step": step, "split": "test", "mode": "eval",
        "page": "index.html", "mean": mean, "per_image": rows,
        "baseline": {"what": "output = input", "mean": {"l1": 0.5, "psnr": 9.0, "ssim": 0.25}},
    }))


@pytest.fixture(scope="module")
def reported(tmp_path_factory):
    """A finished run with example grids and three test results, and its report written by the CLI."""
    run_dir = make_run(tmp_path_factory.mktemp("report") / "runs", GanLosses(), name="facades")
    grids = {epoch: write_png(run_dir / "examples" / f"epoch{epoch:04d}.png", 96, 32, (40 * epoch, 90, 160))
             for epoch in range(1, EXAMPLES + 1)}
    summary = json.loads((run_dir / "summary.json").read_text())  # as a trainer with three-column grids writes it
    (run_dir / "summary.json").write_text(json.dumps({**summary, "example_columns": COLUMNS}))
    write_test_folder(run_dir, CURRENT, 3, 12, "epoch0003-step00000012.pt", [0.2, 0.4, 0.1, 0.3])
    write_test_folder(run_dir, OLDER, 2, 8, "epoch0002-step00000008.pt")
    write_test_folder(run_dir, OLD_BEST, 1, 1, "best.pt")
    result = run_cli("report", str(run_dir), "--test-images", "2")
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
    assert len(images) == PLOTS + EXAMPLES + TEST_IMAGES
    for attrs in images:
        assert attrs["src"].startswith("data:image/png;base64,")
        width, height = png_size(base64.b64decode(attrs["src"].split(",", 1)[1]))
        scale = int(attrs["width"]) // width  # small images are enlarged by a whole factor
        assert scale >= 1 and (int(attrs["width"]), int(attrs["height"])) == (scale * width, scale * height)
    embedded = [base64.b64decode(a["src"].split(",", 1)[1]) for a in images[PLOTS:PLOTS + EXAMPLES]]
    assert embedded == [grids[epoch] for epoch in sorted(grids)]
    links = [attrs.get(key) or "" for _, attrs in tags.tags for key in ("src", "href")]
    assert not [link for link in links if re.match(r"\s*(https?:)?//", link)]
    pages = [attrs["href"] for attrs in tags.of("a") if not attrs["href"].startswith("#")]
    assert pages == [f"test/{name}/index.html" for name in (CURRENT, OLDER, OLD_BEST)]  # newest weights first
    assert all((run_dir / href).is_file() for href in pages)
    assert not tags.of("script") and not tags.of("link") and not tags.of("iframe")


def test_report_leads_with_the_setup_and_keeps_the_config_collapsed(reported):
    run_dir, page, _ = reported
    document = page.read_text(encoding="utf-8")
    tags = Tags(document)
    assert [attrs["id"] for attrs in tags.of("section")] == ["setup", "run", "curves", "examples", "test", "timing"]
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
    assert (f"test weights mode l1 psnr ssim {CURRENT} epoch0003-step00000012.pt (epoch 3, step 12) eval 0.25 17.5 "
            f"0.75 {CURRENT} (baseline: output = input) 0.5 9 0.25 {OLDER} epoch0002-step00000008.pt (epoch 2, "
            "step 8) eval 0.25 21.5 0.75") in text
    assert (f"{CURRENT} test split, epoch0003-step00000012.pt (epoch 3, step 12), eval mode: the run's current "
            "weights · results page: every image worst 1: 00001.png (l1 0.4, psnr 16, ssim 0.6) input output "
            "target best 1: 00002.png (l1 0.1, psnr 19, ssim 0.9) input output target") in text
    assert (f"{OLDER} test split, epoch0002-step00000008.pt (epoch 2, step 8), eval mode: not current: the run has "
            "trained on since, to step 12") in text
    best_now = ", ".join(sidecar_position(run_dir / "checkpoints" / "best.pt"))
    assert (f"{OLD_BEST} test split, best.pt (epoch 1, step 1), eval mode: not current: best.pt has been replaced "
            f"since: it now holds {best_now}; the run has trained on since, to step 12") in text
    assert re.search(r"s/iter \(median over logging intervals\) [\d.e-]+", text)
    assert re.search(r"img/s \(batch size 4\) [\d.e+]+", text)
    assert re.search(r"epoch seconds: mean / min / max [\d.e-]+ / [\d.e-]+ / [\d.e-]+", text)


def test_report_renders_in_headless_chromium_with_every_image_loaded(reported, tmp_path):
    _, page, grids = reported
    tags = Tags(rendered_dom(page, tmp_path))
    images = tags.of("img")
    assert len(images) == PLOTS + EXAMPLES + TEST_IMAGES
    assert [a["data-loaded"] for a in images] == ["yes"] * len(images)
    assert [a["data-natural"] for a in images[PLOTS:PLOTS + EXAMPLES]] == ["96x32"] * EXAMPLES
    assert [a["data-natural"] for a in images[PLOTS + EXAMPLES:]] == ["8x8"] * TEST_IMAGES
    text = " ".join(" ".join(tags.text).split())
    assert "Setup" in text and "Curves" in text and "Examples" in text and "Test results" in text
    assert "Timing" in text


def test_a_report_written_elsewhere_links_the_results_pages_relatively(reported, tmp_path):
    run_dir, _, _ = reported
    output = tmp_path / "shared" / "facades.html"
    result = run_cli("report", str(run_dir), "-o", str(output), "--test-images", "0")
    assert result.returncode == 0, result.stderr
    tags = Tags(output.read_text(encoding="utf-8"))
    pages = [attrs["href"] for attrs in tags.of("a") if not attrs["href"].startswith("#")]
    assert pages[0] == os.path.relpath(run_dir / "test" / CURRENT / "index.html", output.parent)
    assert all((output.parent / href).resolve().is_file() for href in pages)
    assert len(tags.of("img")) == PLOTS + EXAMPLES  # --test-images 0: no test images


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


def test_test_metrics_are_read_tolerantly(tmp_path):
    run_dir = make_run(tmp_path / "runs", epochs=1)
    for name, body in {"a-test": '{"l1": 0.5, "note": "x"}', "b-test": "{not json", "c-test": "[1, 2]",
                       "d-test": '{"mean": {"psnr": null}}'}.items():
        (run_dir / "test" / name).mkdir(parents=True)
        (run_dir / "test" / name / "metrics.json").write_text(body)
    results = read_evaluations(RunDir(run_dir))
    assert [(r.name, list(r.mean)) for r in results] == [("a-test", ["l1"]), ("d-test", ["psnr"])]
    assert "<td class=\"num\">n/a</td>" in evaluations_body(results)  # an unknown (null) score


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
