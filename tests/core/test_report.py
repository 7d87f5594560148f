"""``nectargan report``: one HTML file that opens offline and shows the whole run."""

from __future__ import annotations

import base64
import json
import re

import pytest

from nectargan_core.reporting.report import build_report, evaluations_body, read_evaluations, sample_evenly
from nectargan_core.rundir import RunDir
from runs_support import GanLosses, Tags, make_run, png_size, rendered_dom, write_png
from support import run_cli

PLOTS = 4  # losses-G, losses-D, validation, learning-rates
EXAMPLES = 3


@pytest.fixture(scope="module")
def reported(tmp_path_factory):
    """A finished run with example grids and a test result, and its report written by the CLI."""
    run_dir = make_run(tmp_path_factory.mktemp("report") / "runs", GanLosses(), name="facades")
    grids = {epoch: write_png(run_dir / "examples" / f"epoch{epoch:04d}.png", 96, 32, (40 * epoch, 90, 160))
             for epoch in range(1, EXAMPLES + 1)}
    test_dir = run_dir / "test" / "epoch0003-step00000012-test"
    test_dir.mkdir(parents=True)
    (test_dir / "metrics.json").write_text(json.dumps({
        "epoch": 3, "split": "test", "mean": {"l1": 0.125, "psnr": 21.5, "ssim": 0.75},
        "baseline": {"what": "output = input", "mean": {"l1": 0.5, "psnr": 9.0, "ssim": 0.25}},
    }))
    result = run_cli("report", str(run_dir))
    assert result.returncode == 0, result.stderr
    page = run_dir / "report.html"
    assert result.stdout.strip() == f"wrote {page}"
    return run_dir, page, grids


def test_report_is_self_contained(reported):
    _, page, grids = reported
    document = page.read_text(encoding="utf-8")
    tags = Tags(document)
    images = tags.of("img")
    assert len(images) == PLOTS + EXAMPLES
    for attrs in images:
        assert attrs["src"].startswith("data:image/png;base64,")
        png = base64.b64decode(attrs["src"].split(",", 1)[1])
        assert png_size(png) == (int(attrs["width"]), int(attrs["height"]))
    embedded = [base64.b64decode(a["src"].split(",", 1)[1]) for a in images[PLOTS:]]
    assert embedded == [grids[epoch] for epoch in sorted(grids)]
    links = [attrs.get(key) or "" for _, attrs in tags.tags for key in ("src", "href")]
    assert not [link for link in links if re.match(r"\s*(https?:)?//", link)]
    assert not tags.of("script") and not tags.of("link") and not tags.of("iframe")


def test_report_shows_config_status_metrics_examples_tests_and_timing(reported):
    run_dir, page, _ = reported
    text = " ".join(" ".join(Tags(page.read_text(encoding="utf-8")).text).split())
    assert "facades/version_0" in text and "trainer toy" in text
    assert "status finished" in text and "epochs 3 of 3" in text and "steps 12" in text
    assert "latest checkpoint checkpoints/epoch0003-step00000012.pt (epoch 3, step 12)" in text
    assert re.search(r"best checkpoint checkpoints/best\.pt \(epoch \d, step \d+, val/mse [\d.e-]+\)", text)
    assert "toy.batch_size 4" in text and "loop.log_every_steps 1" in text and "toy.model.name toy_linear" in text
    assert "checkpoint.best_metric val/mse" in text and "name: facades" in text  # full config, in <details>
    assert re.search(r"last validation \(epoch 3\) mse [\d.e-]+", text)
    assert "epoch 1 epoch 2 epoch 3" in text  # example captions, in order
    assert "test l1 psnr ssim epoch0003-step00000012-test 0.125 21.5 0.75" in text
    assert "epoch0003-step00000012-test (baseline: output = input) 0.5 9 0.25" in text
    assert re.search(r"s/iter \(median over logging intervals\) [\d.e-]+", text)
    assert re.search(r"img/s \(batch size 4\) [\d.e+]+", text)
    assert re.search(r"epoch seconds: mean / min / max [\d.e-]+ / [\d.e-]+ / [\d.e-]+", text)


def test_report_renders_in_headless_chromium_with_every_image_loaded(reported, tmp_path):
    _, page, grids = reported
    tags = Tags(rendered_dom(page, tmp_path))
    images = tags.of("img")
    assert len(images) == PLOTS + EXAMPLES
    assert [a["data-loaded"] for a in images] == ["yes"] * len(images)
    assert [a["data-natural"] for a in images[PLOTS:]] == ["96x32"] * EXAMPLES
    text = " ".join(" ".join(tags.text).split())
    assert "Curves" in text and "Examples" in text and "Test metrics" in text and "Timing" in text


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
