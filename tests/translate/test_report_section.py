"""The "Test results" section that nectargan-translate adds to ``nectargan report`` (the core's report_sections
hook): mean scores beside the baseline, whether the weights are still current, the worst and best images, and a
relative link to each results page, all read from the files ``nectargan test`` writes."""

from __future__ import annotations

import base64
import json
import os
import re

import pytest

from nectargan_core import RunDir
from nectargan_translate.report_section import read_evaluations
from runs_support import GanLosses, Tags, make_run, png_size, write_png
from support import run_cli

PLOTS, EXAMPLES = 4, 0
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
def tested(tmp_path_factory):
    """A finished run with three test results, and its report written by the installed command."""
    run_dir = make_run(tmp_path_factory.mktemp("report") / "runs", GanLosses(), name="facades")
    write_test_folder(run_dir, CURRENT, 3, 12, "epoch0003-step00000012.pt", [0.2, 0.4, 0.1, 0.3])
    write_test_folder(run_dir, OLDER, 2, 8, "epoch0002-step00000008.pt")
    write_test_folder(run_dir, OLD_BEST, 1, 1, "best.pt")
    result = run_cli("report", str(run_dir), "--test-images", "2")
    assert result.returncode == 0, result.stderr
    return run_dir, run_dir / "report.html"


def text_of(document: str) -> str:
    return " ".join(" ".join(Tags(document).text).split())


def test_the_section_sits_before_the_timing_and_shows_scores_freshness_and_images(tested):
    run_dir, page = tested
    document = page.read_text(encoding="utf-8")
    tags = Tags(document)
    assert [attrs["id"] for attrs in tags.of("section")] == ["setup", "run", "curves", "examples", "test", "timing"]
    text = text_of(document)
    assert (f"Test results Mean scores of each test/ folder, newest weights first. test weights mode l1 psnr ssim "
            f"{CURRENT} epoch0003-step00000012.pt (epoch 3, step 12) eval 0.25 17.5 0.75 {CURRENT} (baseline: output "
            f"= input) 0.5 9 0.25 {OLDER} epoch0002-step00000008.pt (epoch 2, step 8) eval 0.25 21.5 0.75") in text
    assert (f"{CURRENT} test split, epoch0003-step00000012.pt (epoch 3, step 12), eval mode: the run's current "
            "weights · results page: every image worst 1: 00001.png (l1 0.4, psnr 16, ssim 0.6) input output "
            "target best 1: 00002.png (l1 0.1, psnr 19, ssim 0.9) input output target") in text
    assert (f"{OLDER} test split, epoch0002-step00000008.pt (epoch 2, step 8), eval mode: not current: the run has "
            "trained on since, to step 12") in text
    best_now = json.loads((run_dir / "checkpoints" / "best.pt.json").read_text())
    assert (f"{OLD_BEST} test split, best.pt (epoch 1, step 1), eval mode: not current: best.pt has been replaced "
            f"since: it now holds epoch {best_now['epoch']}, step {best_now['global_step']}; the run has trained on "
            "since, to step 12") in text
    images = tags.of("img")
    assert len(images) == PLOTS + EXAMPLES + TEST_IMAGES
    embedded = [base64.b64decode(a["src"].split(",", 1)[1]) for a in images[PLOTS:]]
    folder = run_dir / "test" / CURRENT
    assert embedded == [(folder / sub / name).read_bytes() for name in ("00001.png", "00002.png")
                        for sub in ("inputs", "images", "targets")]
    assert all(png_size(png) == (8, 8) for png in embedded)
    assert {(a["width"], a["height"]) for a in images[PLOTS:]} == {("128", "128")}  # enlarged 16x, pixels sharp
    pages = [attrs["href"] for attrs in tags.of("a") if not attrs["href"].startswith("#")]
    assert pages == [f"test/{name}/index.html" for name in (CURRENT, OLDER, OLD_BEST)]  # newest weights first


def test_a_report_written_elsewhere_links_the_results_pages_relatively(tested, tmp_path):
    run_dir, _ = tested
    output = tmp_path / "shared" / "facades.html"
    result = run_cli("report", str(run_dir), "-o", str(output), "--test-images", "0")
    assert result.returncode == 0, result.stderr
    tags = Tags(output.read_text(encoding="utf-8"))
    pages = [attrs["href"] for attrs in tags.of("a") if not attrs["href"].startswith("#")]
    assert pages[0] == os.path.relpath(run_dir / "test" / CURRENT / "index.html", output.parent)
    assert all((output.parent / href).resolve().is_file() for href in pages)
    assert len(tags.of("img")) == PLOTS + EXAMPLES  # --test-images 0: no test images


def test_results_files_are_read_tolerantly(tmp_path):
    run_dir = make_run(tmp_path / "runs", epochs=1)
    bodies = {"a-test": '{"l1": 0.5, "note": "x"}', "b-test": "{not json", "c-test": "[1, 2]",
              "d-test": '{"mean": {"psnr": null}}', "e-test": "[" * 100_000 + "]" * 100_000,
              "f-test": '{"mean": {"l1": 0.1}, "per_image": [{"l1": 0.1, "files": {"input": "../../../config.yaml"}}]}'}
    for name, body in bodies.items():
        (run_dir / "test" / name).mkdir(parents=True)
        (run_dir / "test" / name / "metrics.json").write_text(body)
    results = read_evaluations(RunDir(run_dir).path)
    assert [(r.name, list(r.mean)) for r in results] == [("a-test", ["l1"]), ("d-test", ["psnr"]), ("f-test", ["l1"])]
    result = run_cli("report", str(run_dir))
    assert (result.returncode, result.stderr) == (0, "")
    document = (run_dir / "report.html").read_text(encoding="utf-8")
    assert "<td class=\"num\">n/a</td>" in document  # an unknown (null) score
    section = document[document.index('<section id="test">'):document.index('<section id="timing">')]
    assert "f-test" in section and "<img" not in section  # a file outside its results folder is not embedded


def test_worst_and_best_follow_the_metric_direction(tmp_path):
    """Without L1 the first metric ranks the images; PSNR is registered as higher-is-better, so its worst is lowest."""
    run_dir = make_run(tmp_path / "runs", epochs=1)
    write_test_folder(run_dir, "t", 1, 4, "best.pt", [0.3, 0.1, 0.2])
    data = json.loads((run_dir / "test" / "t" / "metrics.json").read_text())
    for row in data["per_image"]:
        del row["l1"]
    data["mean"].pop("l1")
    (run_dir / "test" / "t" / "metrics.json").write_text(json.dumps(data))
    result = run_cli("report", str(run_dir), "--test-images", "2")
    assert result.returncode == 0, result.stderr
    text = text_of((run_dir / "report.html").read_text(encoding="utf-8"))
    assert re.search(r"worst 1: 00000\.png \(psnr 17, ssim 0\.7\).*best 1: 00001\.png \(psnr 19, ssim 0\.9\)", text)


def test_damaged_and_odd_results_are_named_and_never_hang_the_report(tmp_path):
    """A stranger's cases: a FIFO and /dev/zero as metrics.json, a page outside the folder, a file without a mean
    mapping, a NaN score, a folder name that is not UTF-8. The report is written at once; what it cannot show it
    names with the reason, and the good results stay."""
    run_dir = make_run(tmp_path / "runs", epochs=1)
    write_test_folder(run_dir, "good", 1, 4, "best.pt", [0.2, float("nan"), 0.1])
    odd = {}
    for name in ("fifo", "zero", "plain", "outside", "listmean"):
        (run_dir / "test" / name).mkdir(parents=True)
    os.mkfifo(run_dir / "test" / "fifo" / "metrics.json")
    (run_dir / "test" / "zero" / "metrics.json").symlink_to("/dev/zero")
    (run_dir / "test" / "plain" / "metrics.json").write_text('{"epoch": 1, "global_step": 5, "images": 2, "l1": 0.5}')
    (run_dir / "test" / "outside" / "metrics.json").write_text('{"mean": {"l1": 0.3}, "page": "../../../../etc/passwd"}')
    (run_dir / "test" / "listmean" / "metrics.json").write_text('{"mean": [1, 2]}')
    undecodable = os.fsdecode(b"bad\xffname")
    (run_dir / "test" / undecodable).mkdir()
    (run_dir / "test" / undecodable / "metrics.json").write_text('{"mean": {"l1": 0.4}, "global_step": 2}')
    result = run_cli("report", str(run_dir), "--test-images", "2", timeout=60)
    assert (result.returncode, result.stderr) == (0, "")
    document = (run_dir / "report.html").read_text(encoding="utf-8")
    section = document[document.index('<section id="test">'):document.index('<section id="timing">')]
    text = text_of(section)
    assert ("Left out: test/fifo: metrics.json is not a regular file; test/listmean: its mean is a JSON list, not an "
            "object; test/zero: metrics.json is not a regular file.") in text
    assert "test weights mode l1 psnr ssim" in text and "bad\\udcffname" in text  # shown, escaped
    assert "plain checkpoint not recorded (epoch 1, step 5) ? 0.5" in text  # epoch, step, images are no scores
    hrefs = [a["href"] for a in Tags(section).of("a")]
    assert hrefs == ["test/good/index.html"]  # nothing outside the run, nothing for folders without a page
    assert re.search(r"worst 1: 00001\.png \(l1 n/a, psnr n/a, ssim n/a\)", text)  # the score nobody could compute
