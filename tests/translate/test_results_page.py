"""``nectargan test``'s results page in headless Chromium, and outputs that say which weights made them.

The page is opened from a copy of the results folder (its links are relative),
the way someone opens a folder they were sent.
"""

from __future__ import annotations

import json
import shutil

import pytest

from nectargan_core.checkpoint import sidecar_path
from pages import Tags, rendered_dom
from support import run_cli

#: Runs after the page's own script: the row order worst first, then after clicking PSNR once and twice, and image.
CLICK_AND_RECORD = """<script>
window.addEventListener("load", () => {
  const order = () => Array.from(document.querySelectorAll("#images tbody tr")).map(r => r.dataset.image).join(",");
  const click = (key) => document.querySelector(`th button[data-key="${key}"]`).click();
  const seen = {initial: order()};
  click("psnr"); seen.psnr = order(); seen.psnr_label = document.getElementById("order").textContent;
  click("psnr"); seen.psnr_again = order();
  click("image"); seen.image = order();
  document.body.dataset.orders = JSON.stringify(seen);
});
</script>"""


@pytest.fixture(scope="module")
def run_copy(trained_run, tmp_path_factory):
    """A copy of the shared tiny run (these tests replace its best.pt), with its dataset."""
    copy = tmp_path_factory.mktemp("results") / "version_0"
    shutil.copytree(trained_run.path, copy, ignore=shutil.ignore_patterns("test", "export"))
    return copy


def make_best(run_dir, epoch):
    """Make ``best.pt`` the weights of ``epoch``, as training does when that epoch validates best."""
    source = next((run_dir / "checkpoints").glob(f"epoch{epoch:04d}-*.pt"))
    shutil.copyfile(source, run_dir / "checkpoints" / "best.pt")
    shutil.copyfile(sidecar_path(source), sidecar_path(run_dir / "checkpoints" / "best.pt"))
    return source.stem


@pytest.mark.slow
def test_the_results_page_shows_every_image_worst_first_and_sorts_in_chromium(run_copy, tmp_path):
    make_best(run_copy, 2)
    result = run_cli("test", str(run_copy), "--checkpoint", "best", "--device", "cpu")
    assert result.returncode == 0, result.stderr
    out = run_copy / "test" / "best-epoch0002-step00000020-test"
    assert result.stdout.splitlines()[1:] == [f"results: {out}", f"page: {out / 'index.html'}"]
    metrics = json.loads((out / "metrics.json").read_text())
    assert (metrics["checkpoint_name"], metrics["epoch"], metrics["global_step"]) == ("best.pt", 2, 20)
    rows = metrics["per_image"]
    worst_first = [row["image"] for row in sorted(rows, key=lambda r: (-r["l1"], r["image"]))]
    by_psnr = [row["image"] for row in sorted(rows, key=lambda r: (r["psnr"], r["image"]))]

    moved = shutil.copytree(out, tmp_path / "sent" / "results")  # opened where it was copied to
    tags = Tags(rendered_dom(moved / "index.html", tmp_path, CLICK_AND_RECORD, beside=True))
    images = tags.of("img")
    assert len(images) == 3 * 4 and [a["data-loaded"] for a in images] == ["yes"] * 12
    assert [a["src"].split("/")[0] for a in images[:3]] == ["inputs", "images", "targets"]
    assert {a["data-natural"] for a in images} == {"32x32"}  # the test split keeps its original size
    orders = {k: v.split(",") if k != "psnr_label" else v
              for k, v in json.loads(tags.of("body")[0]["data-orders"]).items()}
    assert orders["initial"] == worst_first
    assert orders["psnr"] == by_psnr and orders["psnr_label"] == "by PSNR (dB), smallest first"
    assert orders["psnr_again"] == by_psnr[::-1]
    assert orders["image"] == sorted(worst_first)
    text = " ".join(" ".join(tags.text).split())
    assert f"Test results: {run_copy.parent.name}/version_0: test, best.pt (epoch 2)" in text
    assert "checkpoint best.pt: epoch 2, step 20" in text
    assert "mode eval: dropout off, batch norm on its running statistics" in text
    mean, base = metrics["mean"], metrics["baseline"]["mean"]
    assert (f"generator {mean['l1']:.4f} {mean['psnr']:.4f} {mean['ssim']:.4f} output = input (baseline) "
            f"{base['l1']:.4f} {base['psnr']:.4f} {base['ssim']:.4f}") in text
    first = rows[[row["image"] for row in rows].index(worst_first[0])]
    assert (f"1 {first['image']} {first['l1']:.4f} {first['psnr']:.4f} {first['ssim']:.4f} "
            f"{first['baseline']['psnr']:.4f}") in text


@pytest.mark.slow
def test_a_later_best_gets_its_own_folder_and_the_report_says_which_is_current(run_copy):
    first = make_best(run_copy, 1)
    assert first == "epoch0001-step00000010"
    assert run_cli("test", str(run_copy), "--checkpoint", "best", "--device", "cpu").returncode == 0
    make_best(run_copy, 2)
    assert run_cli("test", str(run_copy), "--checkpoint", "best", "--device", "cpu").returncode == 0
    for epoch, step in ((1, 10), (2, 20)):
        folder = run_copy / "test" / f"best-epoch{epoch:04d}-step{step:08d}-test"
        assert json.loads((folder / "metrics.json").read_text())["epoch"] == epoch
    assert run_cli("report", str(run_copy)).returncode == 0
    text = " ".join(" ".join(Tags((run_copy / "report.html").read_text()).text).split())
    assert ("best-epoch0001-step00000010-test test split, best.pt (epoch 1, step 10), eval mode: not current: "
            "best.pt has been replaced since: it now holds epoch 2, step 20") in text
    assert ("best-epoch0002-step00000020-test test split, best.pt (epoch 2, step 20), eval mode: the run's "
            "current weights") in text


@pytest.mark.slow
def test_testing_again_replaces_the_folder_whole_and_foreign_folders_are_refused(run_copy, tmp_path):
    out = tmp_path / "results"
    assert run_cli("test", str(run_copy), "--out", str(out), "--grid", "--device", "cpu").returncode == 0
    assert sorted(p.name for p in (out / "grids").iterdir())
    again = run_cli("test", str(run_copy), "--out", str(out), "--device", "cpu")
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines()[1] == f"results: {out} (replaced the earlier results there)"
    assert not (out / "grids").exists()  # nothing of the earlier test is left to pass for current
    assert sorted(p.name for p in out.iterdir()) == ["images", "index.html", "inputs", "metrics.csv",
                                                     "metrics.json", "targets"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging folder left behind
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me")
    refused = run_cli("test", str(run_copy), "--out", str(foreign), "--device", "cpu")
    assert refused.returncode == 1
    assert refused.stderr.strip().splitlines() == [
        f"error: {foreign}: holds files that nectargan test did not write; choose another --out (results replace "
        "a folder as a whole)"]
    assert sorted(p.name for p in foreign.iterdir()) == ["notes.txt"]


@pytest.mark.slow
def test_exports_and_predictions_say_which_weights_made_them(run_copy, trained_run, tmp_path):
    make_best(run_copy, 1)
    exported = run_cli("export", str(run_copy), "--format", "torchscript", "--checkpoint", "best")
    assert exported.returncode == 0, exported.stderr
    path = run_copy / "export" / "best-epoch0001-step00000010.torchscript.pt"
    assert exported.stdout.splitlines()[1] == (f"wrote {path} (32x32, dynamic batch; best.pt (epoch 1, step 10)) "
                                               f"and {path.name}.json")
    sidecar = json.loads(sidecar_path(path).read_text())
    assert (sidecar["checkpoint_name"], sidecar["epoch"], sidecar["global_step"]) == ("best.pt", 1, 10)
    image = tmp_path / "a.png"
    shutil.copy(sorted((trained_run.data / "test").glob("*.png"))[0], image)
    predicted = run_cli("predict", str(run_copy), str(image), "-o", str(tmp_path / "out"), "--checkpoint", "best")
    assert predicted.returncode == 0, predicted.stderr
    assert "(best.pt (epoch 1, step 10); " in predicted.stdout
    record = json.loads((tmp_path / "out" / "predict.json").read_text())
    assert (record["checkpoint_name"], record["epoch"], record["global_step"]) == ("best.pt", 1, 10)
    assert record["outputs"] == ["a.png"]
