"""``nectargan test``: metrics files that agree with each other and with a direct computation, modes, checkpoints."""

from __future__ import annotations

import csv
import hashlib
import json

import numpy as np
import pytest
import torch
from PIL import Image

from nectargan_core.errors import CheckpointError, NectarGANError
from nectargan_translate.data.paired import PairedDataset
from nectargan_translate.evaluation import METRICS, per_image
from nectargan_translate.examples import LABEL_HEIGHT
from nectargan_translate.inference import load_generator
from nectargan_translate.tester import run_test
from nectargan_translate.evaluation import evaluation_mode
from support import run_cli

TEST_IMAGES = ["00012.png", "00013.png", "00014.png", "00015.png"]


def sha256(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_cli_writes_json_csv_and_images_that_match_a_direct_computation(trained_run):
    result = run_cli("test", str(trained_run.path), "--device", "cpu", "--grid")
    assert result.returncode == 0, result.stderr
    out = trained_run.path / "test" / "epoch0002-step00000020-test"
    summary, where, page = result.stdout.strip().splitlines()
    assert summary.startswith("test: 4 images, epoch0002-step00000020.pt (epoch 2, step 20), eval mode: L1 ")
    assert "| output=input: L1 " in summary
    assert where.startswith(f"results: {out}") and page == f"page: {out / 'index.html'}"

    data = json.loads((out / "metrics.json").read_text())
    assert (data["split"], data["mode"], data["epoch"], data["global_step"], data["images"]) == ("test", "eval", 2,
                                                                                                  20, 4)
    assert data["checkpoint"].endswith("checkpoints/epoch0002-step00000020.pt")
    assert [row["image"] for row in data["per_image"]] == TEST_IMAGES
    with open(out / "metrics.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [row["image"] for row in rows] == TEST_IMAGES + ["mean"]
    for row, entry in zip(rows, data["per_image"]):
        assert all(float(row[m]) == entry[m] for m in METRICS)
    for metric in METRICS:
        values = [entry[metric] for entry in data["per_image"]]
        assert data["mean"][metric] == pytest.approx(sum(values) / len(values), rel=1e-12)
        assert float(rows[-1][metric]) == data["mean"][metric]

    generator = load_generator(trained_run.path, device="cpu")
    dataset = PairedDataset(generator.config.data.options, "test")
    real_a = torch.stack([dataset[i]["A"] for i in range(len(dataset))])
    real_b = torch.stack([dataset[i]["B"] for i in range(len(dataset))])
    with torch.no_grad():
        direct = per_image(generator.model(real_a), real_b)
    baseline = per_image(real_a, real_b)
    for metric in METRICS:
        stored = torch.tensor([entry[metric] for entry in data["per_image"]])
        torch.testing.assert_close(stored, direct[metric].float(), rtol=1e-5, atol=1e-5)
        assert data["baseline"]["mean"][metric] == pytest.approx(baseline[metric].double().mean().item(), rel=1e-6)
    assert data["mean"]["psnr"] > data["baseline"]["mean"]["psnr"]  # the generator beats copying its input

    for name in TEST_IMAGES:
        assert Image.open(out / "images" / name).size == (32, 32)
        assert Image.open(out / "grids" / name).size == (3 * 32 + 4 * 2, LABEL_HEIGHT + 32 + 2 * 2)  # labelled


def test_train_mode_differs_from_eval_mode_repeats_and_leaves_the_weights_untouched(trained_run, tmp_path):
    checkpoint = trained_run.path / "checkpoints" / "epoch0002-step00000020.pt"
    before = sha256(checkpoint)
    evaluated = run_test(trained_run.path, out_dir=tmp_path / "eval")
    trained = run_test(trained_run.path, mode="train", out_dir=tmp_path / "train")
    again = run_test(trained_run.path, mode="train", out_dir=tmp_path / "again")
    assert trained.values != evaluated.values
    assert again.values == trained.values  # dropout draws from run.seed
    assert json.loads((tmp_path / "train" / "metrics.json").read_text())["mode"] == "train"
    assert sha256(checkpoint) == before

    generator = load_generator(trained_run.path, device="cpu")
    state = {k: v.clone() for k, v in generator.model.state_dict().items()}
    with evaluation_mode(generator.model, False):
        generator.model(torch.rand(2, 3, 32, 32) * 2 - 1)
    assert all(torch.equal(state[k], v) for k, v in generator.model.state_dict().items())
    assert not generator.model.training


def test_default_folder_names_the_checkpoint_split_and_mode(trained_run):
    report = run_test(trained_run.path, "best", split="val", mode="train")
    position = f"epoch{report.generator.epoch:04d}-step{report.generator.global_step:08d}"
    assert report.out_dir == trained_run.path / "test" / f"best-{position}-val-train-mode"
    assert report.generator.checkpoint.name == "best.pt"
    assert len(report.names) == 2


@pytest.mark.parametrize("which,epoch", [("latest", 2), ("1", 1), ("2", 2)])
def test_checkpoint_choice(trained_run, tmp_path, which, epoch):
    report = run_test(trained_run.path, which, out_dir=tmp_path)
    assert report.generator.epoch == epoch
    assert json.loads((tmp_path / "metrics.json").read_text())["epoch"] == epoch


def test_a_checkpoint_file_writes_into_its_run_directory(trained_run):
    report = run_test(trained_run.path / "checkpoints" / "epoch0001-step00000010.pt", split="val")
    assert report.out_dir == trained_run.path / "test" / "epoch0001-step00000010-val"
    assert report.generator.epoch == 1


def test_images_at_original_sizes_are_padded_for_the_generator_and_cropped_back(trained_run, tmp_path):
    root = tmp_path / "data"  # the run reads its test split with preprocess: none
    (root / "test").mkdir(parents=True)
    rng = np.random.default_rng(1)
    for i in range(2):
        Image.fromarray(rng.integers(0, 256, (36, 80, 3), dtype=np.uint8)).save(root / "test" / f"{i}.png")
    report = run_test(trained_run.path, data_root=root, out_dir=tmp_path / "out", batch_size=2)
    assert [Image.open(tmp_path / "out" / "images" / name).size for name in report.names] == [(40, 36)] * 2
    assert all(0 < value < 1 for value in report.values["ssim"])


def test_train_split_is_read_without_augmentation(trained_run, tmp_path):
    first = run_test(trained_run.path, split="train", out_dir=tmp_path / "a", batch_size=4)
    second = run_test(trained_run.path, split="train", out_dir=tmp_path / "b", batch_size=3)
    assert len(first.names) == 10
    for metric in METRICS:
        torch.testing.assert_close(torch.tensor(first.values[metric]), torch.tensor(second.values[metric]))


def test_missing_dataset_folder_asks_for_data_root(trained_run, tmp_path):
    with pytest.raises(NectarGANError) as given:  # a --data-root that is not there is named as such
        run_test(trained_run.path, data_root=tmp_path / "moved", out_dir=tmp_path / "out")
    assert str(given.value) == f"--data-root {tmp_path / 'moved'}: no such folder"
    moved = tmp_path / "data-moved"
    trained_run.data.rename(moved)
    try:  # the run's own data.root gone: asks for --data-root
        with pytest.raises(NectarGANError, match="was not found from here; pass --data-root DIR"):
            run_test(trained_run.path, out_dir=tmp_path / "out")
        report = run_test(trained_run.path, data_root=moved, out_dir=tmp_path / "out")
    finally:
        moved.rename(trained_run.data)
    assert len(report.names) == 4


def test_a_missing_epoch_names_the_available_ones(trained_run):
    with pytest.raises(CheckpointError) as error:
        run_test(trained_run.path, "7")
    assert str(error.value) == f"{trained_run.path}: no checkpoint for epoch 7; available epochs: 1, 2"
