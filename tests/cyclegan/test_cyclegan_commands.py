"""``nectargan test``, ``predict`` and ``export`` on a CycleGAN run, both directions, through the real CLI.

The outputs are checked against the trained generators run directly in
Python: AtoB must be G_A's translation of testA, BtoA G_B's of testB, and the
test scores the reconstruction G_B(G_A(A)) against A.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from nectargan_core.checkpoint import load_checkpoint, save_checkpoint
from nectargan_core.rundir import RunDir
from nectargan_translate.data.decode import read_image, to_channels
from nectargan_translate.evaluation import per_image
from nectargan_translate.examples import LABEL_HEIGHT
from nectargan_translate.inference import load_generator
from support import run_cli as run_cli_with_env


def run_cli(*args, **kwargs):
    """The real console script, on one thread: the networks are tiny, and a second thread only waits."""
    return run_cli_with_env(*args, env={"OMP_NUM_THREADS": "1"}, **kwargs)

from cyclegan_helpers import TINY_SETTINGS


@pytest.fixture(scope="module")
def cyclegan_run(make_unpaired, tmp_path_factory):
    """Two epochs of a tiny CycleGAN on 16x16 images: testA has 4 images, testB 3."""
    root = tmp_path_factory.mktemp("cyclegan_run")
    data = root / "data"
    shutil.copytree(make_unpaired(16, 16, val=0.125, test=0.25), data)
    sorted((data / "testB").iterdir())[-1].unlink()
    settings = [f"data.root={data}", "data.load_size=16", "data.crop_size=16", "data.num_workers=0",
                "data.batch_size=2", "loop.epochs=2", "run.device=cpu", "run.threads=1", "run.output_dir=runs",
                "visualizers=[]",
                "examples.count=2", "pool.size=4", *TINY_SETTINGS]
    trained = run_cli("train", "--trainer", "cyclegan", *(a for s in settings for a in ("--set", s)), cwd=root)
    assert trained.returncode == 0, trained.stderr
    return root / "runs" / "run" / "version_0", data


def images(folder: Path) -> torch.Tensor:
    """Every PNG of ``folder`` (sorted) as a [-1, 1] batch, as the test split reads them (16x16, 3 channels)."""
    return torch.stack([to_channels(read_image(path), 3) * 2 - 1 for path in sorted(folder.glob("*.png"))])


def pixels(path: Path) -> np.ndarray:
    return np.asarray(Image.open(path), dtype=np.int16)


def as_png_pixels(batch: torch.Tensor) -> np.ndarray:
    return (((batch + 1) / 2).clamp(0, 1) * 255).round().to(torch.uint8).permute(0, 2, 3, 1).numpy().astype(np.int16)


@pytest.mark.slow  # the trained run, then the CLI
def test_each_direction_loads_its_own_generator_from_the_checkpoint(cyclegan_run):
    run, _ = cyclegan_run
    checkpoint = load_checkpoint(RunDir(run).latest_checkpoint())
    for direction, network in (("AtoB", "G_A"), ("BtoA", "G_B")):
        loaded = load_generator(run, direction=direction)
        assert (loaded.direction, loaded.tracked, loaded.directions, loaded.inverse) == \
            (direction, network, ("AtoB", "BtoA"), "BtoA" if direction == "AtoB" else "AtoB")
        for key, value in loaded.model.state_dict().items():
            assert torch.equal(value, checkpoint["state"][network][key]), (direction, key)
    assert not torch.equal(checkpoint["state"]["G_A"]["stem.1.weight"], checkpoint["state"]["G_B"]["stem.1.weight"])


@pytest.mark.slow  # the trained run, then the CLI
def test_test_without_a_direction_tests_both_as_the_reference_does(cyclegan_run, tmp_path):
    run, _ = cyclegan_run
    result = run_cli("test", str(run), "--split", "val", "--device", "cpu")
    assert result.returncode == 0, result.stderr
    folders = [line.removeprefix("results: ") for line in result.stdout.splitlines() if line.startswith("results: ")]
    assert folders == [str(run / "test" / f"epoch0002-step00000010-val-{d}") for d in ("AtoB", "BtoA")]
    assert "AtoB, cycle A->B->A with A" in result.stdout and "BtoA, cycle B->A->B with B" in result.stdout
    one = run_cli("test", str(run), "--split", "val", "--device", "cpu", "--out", str(tmp_path / "mine"))
    assert one.returncode == 0 and one.stdout.count("results: ") == 1
    assert one.stderr == (f"note: {run} has a generator for BtoA too; with --out only AtoB was tested (give "
                          "--direction and another --out for the other)\n")


@pytest.mark.slow  # the trained run, then the CLI
@pytest.mark.parametrize("direction, source", [("AtoB", "testA"), ("BtoA", "testB")])
def test_test_scores_the_cycle_reconstruction_of_each_direction(cyclegan_run, direction, source):
    run, data = cyclegan_run
    result = run_cli("test", str(run), "--direction", direction, "--grid", "--device", "cpu")
    assert result.returncode == 0, result.stderr
    domain, other = direction[0], direction[-1]
    out = run / "test" / f"epoch0002-step00000010-test-{direction}"
    assert result.stdout.splitlines()[-2:] == [f"results: {out}", f"page: {out / 'index.html'}"]
    assert f"{direction}, cycle {domain}->{other}->{domain} with {domain}: L1 " in result.stdout
    report = json.loads((out / "metrics.json").read_text())
    names = sorted(p.name for p in (data / source).iterdir())
    assert report["direction"] == direction and report["images"] == len(names) == (4 if domain == "A" else 3)
    assert report["compared"] == f"cycle {domain}->{other}->{domain} with {domain}" and report["baseline"] is None
    assert [row["source"] for row in report["per_image"]] == [str(data / source / name) for name in names]
    assert sorted(p.name for p in (out / "images").iterdir()) == names
    assert sorted(p.name for p in (out / "grids").iterdir()) == names
    for folder in ("inputs", "reconstructions"):  # the page's columns, beside images/ (no targets/)
        assert sorted(p.name for p in (out / folder).iterdir()) == names
    assert not (out / "targets").exists()
    assert report["per_image"][0]["files"] == {"input": f"inputs/{names[0]}", "output": f"images/{names[0]}",
                                               "reconstruction": f"reconstructions/{names[0]}"}
    page = (out / "index.html").read_text()
    assert "<th>input</th><th>output</th><th>reconstruction</th>" in page and "<th>target</th>" not in page
    assert f"cycle {domain}-&gt;{other}-&gt;{domain} with {domain}" in page and "unpaired split has no targets" in page
    for name in names:
        assert f'src="reconstructions/{name}"' in page and f'data-image="{name}"' in page
    assert Image.open(out / "grids" / names[0]).size == (3 * 16 + 4 * 2, LABEL_HEIGHT + 16 + 2 * 2)  # real | fake | rec

    forth = load_generator(run, direction=direction).model
    back = load_generator(run, direction="BtoA" if direction == "AtoB" else "AtoB").model
    real = images(data / source)
    with torch.no_grad():
        fake = forth(real)
        reconstructed = back(fake)
        expected = per_image(reconstructed, real)
    assert report["mean"]["l1"] == pytest.approx(float(expected["l1"].mean()), rel=1e-5)
    assert report["mean"]["psnr"] == pytest.approx(float(expected["psnr"].mean()), rel=1e-5)
    for index, name in enumerate(names):  # each output is this direction's translation of its input
        assert np.abs(pixels(out / "images" / name) - as_png_pixels(fake[index:index + 1])[0]).max() <= 1
        assert np.abs(pixels(out / "reconstructions" / name)
                      - as_png_pixels(reconstructed[index:index + 1])[0]).max() <= 1


@pytest.mark.slow  # the trained run, then the CLI
def test_test_of_the_val_split_gives_the_validation_metrics(cyclegan_run):
    run, _ = cyclegan_run
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    last = [r for r in records if r["kind"] == "val"][-1]["metrics"]
    assert {"cycle_A_l1", "cycle_A_psnr", "cycle_A_ssim", "cycle_B_l1", "cycle_B_psnr", "cycle_B_ssim",
            "cycle_l1", "cycle_psnr", "cycle_ssim"} <= set(last)
    assert last["cycle_psnr"] == pytest.approx((last["cycle_A_psnr"] + last["cycle_B_psnr"]) / 2)
    for direction, domain in (("AtoB", "A"), ("BtoA", "B")):
        result = run_cli("test", str(run), "--split", "val", "--direction", direction, "--device", "cpu")
        assert result.returncode == 0, result.stderr
        report = json.loads((run / "test" / f"epoch0002-step00000010-val-{direction}" / "metrics.json").read_text())
        assert report["mean"]["l1"] == pytest.approx(last[f"cycle_{domain}_l1"], rel=1e-5)
        assert report["mean"]["ssim"] == pytest.approx(last[f"cycle_{domain}_ssim"], rel=1e-5)


@pytest.mark.slow  # the trained run, then the CLI
def test_predict_runs_the_generator_of_each_direction(cyclegan_run, tmp_path):
    run, data = cyclegan_run
    inputs = data / "testB"
    written = {}
    for direction in ("BtoA", "AtoB"):
        result = run_cli("predict", str(run), str(inputs), "-o", str(tmp_path / direction), "--direction", direction,
                         "--device", "cpu")
        assert result.returncode == 0, result.stderr
        assert result.stdout.startswith(f"wrote 3 images to {tmp_path / direction} ({direction}, epoch0002")
        written[direction] = {p.name: pixels(p) for p in sorted((tmp_path / direction).glob("*.png"))}
        record = json.loads((tmp_path / direction / "predict.json").read_text())  # beside the outputs
        assert record["direction"] == direction and record["epoch"] == 2 and len(record["outputs"]) == 3
    with torch.no_grad():
        expected = as_png_pixels(load_generator(run, direction="BtoA").model(images(inputs)))
    for index, (name, got) in enumerate(written["BtoA"].items()):
        assert np.abs(got - expected[index]).max() <= 1, name
    assert any(np.abs(written["BtoA"][n] - written["AtoB"][n]).max() > 8 for n in written["BtoA"])
    default = run_cli("predict", str(run), str(inputs), "-o", str(tmp_path / "default"), "--device", "cpu")
    assert default.returncode == 0 and "(AtoB, " in default.stdout  # the first declared direction


@pytest.mark.slow  # the trained run, then the CLI
@pytest.mark.filterwarnings("ignore:`torch.jit.load` is deprecated:FutureWarning")
def test_export_writes_each_direction_s_generator(cyclegan_run, tmp_path):
    run, data = cyclegan_run
    for direction, network in (("BtoA", "G_B"), ("AtoB", "G_A")):
        result = run_cli("export", str(run), "--format", "torchscript", "--direction", direction)
        assert result.returncode == 0, result.stderr
        path = run / "export" / f"epoch0002-step00000010-{direction}.torchscript.pt"
        sidecar = json.loads(path.with_name(path.name + ".json").read_text())
        assert sidecar["direction"] == direction and sidecar["network"] == network
        assert sidecar["parity"]["passed"] is True
        exported = torch.jit.load(str(path))
        x = images(data / "testA")
        with torch.no_grad():
            torch.testing.assert_close(exported(x), load_generator(run, direction=direction).model(x))


@pytest.mark.slow  # the CLI loads torch
def test_a_direction_the_checkpoint_lacks_is_one_line(tmp_path):
    checkpoint = save_checkpoint({"trainer": "pix2pix", "epoch": 1, "global_step": 1, "config": {}, "state": {}},
                                 tmp_path / "p2p.pt")
    image = tmp_path / "in.png"
    Image.fromarray(np.zeros((16, 16, 3), np.uint8)).save(image)
    result = run_cli("predict", str(checkpoint), str(image), "-o", str(tmp_path / "out"), "--direction", "BtoA")
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert result.stderr.strip() == (f"error: {checkpoint}: --direction BtoA: this 'pix2pix' checkpoint has a "
                                     "generator for AtoB only")


@pytest.mark.parametrize("layout, problem", [
    ({}, "{root}/trainA: folder does not exist; the unpaired layout needs trainA/ and trainB/ side by side"),
    ({"trainA": [], "trainB": []}, "{root}/trainA: no images (looked for .bmp, .jpeg, .jpg, .png, .tif, .tiff, "
                                   ".webp)"),
])
def test_a_dataset_that_cannot_train_is_refused_before_the_run_directory(tmp_path, layout, problem):
    """As pix2pix: a missing or empty domain folder is one line naming it, exit 2, and no run directory."""
    root = tmp_path / "data"
    for folder in layout:
        (root / folder).mkdir(parents=True)
    refused = run_cli("train", "--trainer", "cyclegan", "--set", f"data.root={root}", "--set", "run.device=cpu",
                      "--set", "run.output_dir=runs", cwd=tmp_path)
    assert refused.returncode == 2, refused.stderr
    assert refused.stderr.strip() == "error: data.root: " + problem.format(root=root)
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("size, problem", [
    (12, "error: data.crop_size: input size 12 is too small for patchgan with n_layers=3: it needs at least 24; "
         "raise data.crop_size or use fewer layers in models.discriminator (n_layers)"),
    (30, "error: data.crop_size: 30 is not a multiple of 4, which models.generator ('resnet_9blocks') needs for its "
         "inputs; use 28 or 32, or a generator with fewer downsamplings (depth)"),
])
def test_a_size_the_networks_cannot_take_is_refused_before_the_run_directory(tmp_path, size, problem):
    """As pix2pix: the networks are built on the meta device against the training size before anything is made."""
    made = run_cli("data", "synth", str(tmp_path / "data"), "--unpaired", "--count", "4", "--size", "32")
    assert made.returncode == 0, made.stderr
    refused = run_cli("train", "--trainer", "cyclegan", "--set", f"data.root={tmp_path / 'data'}",
                      "--set", f"data.load_size={size}", "--set", f"data.crop_size={size}", "--set", "run.device=cpu",
                      "--set", "run.output_dir=runs", cwd=tmp_path)
    assert (refused.returncode, refused.stderr) == (2, problem + "\n")
    assert not (tmp_path / "runs").exists()
