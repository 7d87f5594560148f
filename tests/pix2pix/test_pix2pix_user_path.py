"""The newcomer's walk through a pix2pix run, checked where they look: the console, the run directory, the report.

A grey-to-colour run (``data.in_channels: 1``) is trained through the CLI once;
the tests read what it printed and wrote: the setup it starts with, the loss
readout, the example grids, the channels it records, and the config mistakes
that must be refused before a run directory exists.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import torch
import yaml
from PIL import Image

from nectargan_core import Run
from nectargan_core.config import load_config
from nectargan_core.errors import ConfigError
from nectargan_core.plugins import get_plugins
from nectargan_translate.data.paired import PairedDataset
from nectargan_translate.data.errors import DatasetError
from nectargan_translate.data.options import PairedDataOptions
from nectargan_translate.examples import LABEL_HEIGHT, spread_indices
from nectargan_translate.inference import load_generator
from nectargan_translate.networks import build_discriminator
from support import ROOT, run_cli

PAGE = (ROOT / "docs" / "plugins" / "pix2pix.md").read_text()
#: The grey -> colour run that the trainer's page shows (a depth-4 UNet and a 2-layer PatchGAN on 32x32 images).
RUN_YAML = re.search(r"<!-- file: run.yaml -->\n```yaml\n(.*?)```", PAGE, re.S).group(1)
GREY = yaml.safe_load(RUN_YAML)


def write_config(folder, root):
    path = folder / "run.yaml"
    path.write_text(yaml.safe_dump({**GREY, "data": {**GREY["data"], "root": str(root)}}))
    return path


def settings(*pairs):
    return [arg for pair in pairs for arg in ("--set", pair)]


@pytest.fixture(scope="module")
def grey_run(tmp_path_factory):
    """Two epochs of a tiny grey -> colour run through the CLI: (run directory, stdout, stderr)."""
    root = tmp_path_factory.mktemp("grey")
    made = run_cli("data", "synth", "data", "--count", "24", "--size", "32", "--val", "0.25", "--test", "0.25",
                   cwd=root)
    assert made.returncode == 0, made.stderr
    (root / "run.yaml").write_text(RUN_YAML)
    trained = run_cli("train", "-c", "run.yaml", cwd=root)
    assert trained.returncode == 0, trained.stderr
    return root / "runs" / "grey" / "version_0", trained.stdout, trained.stderr


@pytest.mark.slow  # the grey run trains for about 30 s on 2 cores
def test_training_starts_by_printing_and_recording_what_defines_the_run(grey_run):
    run_dir, out, _ = grey_run
    config = load_config(run_dir / "config.yaml", (), get_plugins().registry)
    generator = sum(p.numel() for p in load_generator(run_dir).model.parameters())
    discriminator = sum(p.numel() for p in build_discriminator(get_plugins().registry, config).parameters())
    rows = dict(json.loads((run_dir / "summary.json").read_text())["rows"])
    assert list(rows) == ["trainer", "device", "precision", "generator", "discriminator", "data", "data cache", "loss",
                          "optimizer", "lr schedule", "schedule", "examples", "seed"]
    assert rows["precision"] == "fp32 (precision.amp: auto)"
    assert rows["generator"].startswith(f"unet: {generator:,} parameters, 1 -> 3 channels, inputs multiples of "
                                        "16; depth=4 ngf=8 ")
    assert rows["discriminator"].startswith(f"patchgan: {discriminator:,} parameters, judges A and B (1 + 3 "
                                            "channels), receptive field 34x34, 6x6 logits at 32x32; ")
    assert rows["data"] == ("data (aligned, AtoB): 12 train / 6 val / 6 test pairs; train: resize 32x32 -> "
                            "random crop 32x32, augment hflip(p=0.5), batch 4")
    assert rows["loss"] == "spec basic, gan_mode vanilla: G = 1 gan + 100 l1; D = 0.5 gan_d"
    assert rows["schedule"].startswith("2 epochs x 3 batches = 6 steps; validation every 1 epoch(s)")
    lines = out.splitlines()
    assert lines[0] == "training 'pix2pix' on cpu: 2 epochs, 3 batches/epoch -> runs/grey/version_0"
    width = max(map(len, rows))
    assert lines[1:1 + len(rows)] == [f"  {label:<{width}}  {text}" for label, text in rows.items()]
    shown = PAGE.split("then `nectargan train -c run.yaml`, prints")[1].split("```\n")[1].splitlines()
    device = lines.index(f"  {'device':<{width}}  {rows['device']}")
    assert shown[:device] + shown[device + 1:] == lines[:len(shown)][:device] + lines[device + 1:len(shown)]
    assert shown[device].startswith(f"  {'device':<{width}}  cpu (")  # the thread count is the machine's


@pytest.mark.slow  # the grey run trains for about 30 s on 2 cores
def test_the_loss_readout_shows_each_total_once_with_its_terms(grey_run):
    run_dir, out, _ = grey_run
    steps = [line for line in out.splitlines() if line.startswith("epoch ") and " step " in line]
    assert len(steps) == 6
    logged = [record["losses"] for record in map(json.loads, (run_dir / "metrics.jsonl").read_text().splitlines())
              if record["kind"] == "train"]
    for line, losses in zip(steps, logged):
        assert (f"  D/total {losses['D/total']:.4g}  G/total {losses['G/total']:.4g} (gan {losses['G/gan']:.4g}, "
                f"l1 {losses['G/l1']:.4g})  ") in line
        assert "gan_d" not in line
    assert out.splitlines()[-1].startswith("done: 2/2 epochs (6 steps) in ")


@pytest.mark.slow  # the grey run trains for about 30 s on 2 cores
def test_the_config_records_the_channels_the_networks_were_built_with(grey_run, tmp_path):
    run_dir, _, _ = grey_run
    saved = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert (saved["data"]["in_channels"], saved["data"]["out_channels"]) == (1, 3)
    assert (saved["models"]["generator"]["in_channels"], saved["models"]["generator"]["out_channels"]) == (1, 3)
    assert (saved["models"]["discriminator"]["input_channels"],
            saved["models"]["discriminator"]["target_channels"]) == (1, 3)
    first_conv = next(m for m in load_generator(run_dir).model.modules() if isinstance(m, torch.nn.Conv2d))
    assert first_conv.in_channels == 1  # what was built, and what the config says
    written = run_dir.parents[2] / "run.yaml"  # sets data.in_channels: 1 and no network channels
    assert "in_channels" not in yaml.safe_load(written.read_text())["models"]["generator"]
    shown = run_cli("config", "show", "-c", str(written), "--json")
    assert shown.returncode == 0, shown.stderr
    models = json.loads(shown.stdout)["models"]
    assert models["generator"]["in_channels"] == 1 and models["discriminator"]["input_channels"] == 1
    exported = run_cli("export", str(run_dir), "--format", "torchscript", "-o", str(tmp_path / "g.pt"))
    assert exported.returncode == 0, exported.stderr
    sidecar = json.loads((tmp_path / "g.pt.json").read_text())
    assert sidecar["generator"]["in_channels"] == 1 and sidecar["input"]["shape"][1] == 1
    reported = run_cli("report", str(run_dir))
    assert reported.returncode == 0, reported.stderr
    report = (run_dir / "report.html").read_text()
    assert "1 -&gt; 3 channels" in report and "    in_channels: 1\n    out_channels: 3\n" in report


@pytest.mark.slow  # the grey run trains for about 30 s on 2 cores
def test_a_grey_to_colour_test_has_the_grey_picture_as_its_baseline(grey_run, tmp_path):
    # a newcomer on grey -> colour photos got "No baseline" on the results page
    run_dir, _, _ = grey_run
    tested = run_cli("test", str(run_dir), "--out", str(tmp_path / "t"), cwd=run_dir.parents[2])
    assert tested.returncode == 0, tested.stderr
    assert " | output=input: L1 " in tested.stdout.splitlines()[0]
    metrics = json.loads((tmp_path / "t" / "metrics.json").read_text())
    assert metrics["baseline"]["mean"]["l1"] > 0


def grid_rows(path, size, rows):
    """The (input, output, target) cells of each row of an example grid (make_grid, padding 2), below its labels."""
    pixels = np.asarray(Image.open(path).convert("RGB"))[LABEL_HEIGHT:]
    return [[pixels[2 + r * (size + 2):2 + r * (size + 2) + size, 2 + c * (size + 2):2 + c * (size + 2) + size]
             for c in range(3)] for r in range(rows)]


@pytest.mark.slow  # the grey run trains for about 30 s on 2 cores
def test_examples_are_spread_over_the_split_and_the_same_every_epoch(grey_run):
    run_dir, _, _ = grey_run
    config = load_config(run_dir / "config.yaml", (), get_plugins().registry)
    val = PairedDataset({**config.data.options, "root": str(run_dir.parents[2] / "data")}, "val", seed=0)
    chosen = spread_indices(len(val), 3, 0)
    assert [i // 2 for i in chosen] == [0, 1, 2]  # one from each third of the 6 val images
    names = ", ".join(val.pairs[i].a.name for i in chosen)
    rows = dict(json.loads((run_dir / "summary.json").read_text())["rows"])
    assert rows["examples"] == f"3 val images spread over 6 (seed 0), every 1 epoch(s): {names}"
    first, second = (grid_rows(run_dir / "examples" / f"epoch000{e}.png", 32, 3) for e in (1, 2))
    for row, index in enumerate(chosen):
        grey = np.round(((val[index]["A"][0].numpy() + 1) / 2) * 255).astype(np.uint8)
        assert np.abs(first[row][0][..., 0].astype(int) - grey).max() <= 1  # the input column: that image
        assert np.array_equal(first[row][0], second[row][0]) and np.array_equal(first[row][2], second[row][2])


def test_spread_indices_take_one_image_from_each_stretch_by_seed():
    picked = spread_indices(100, 6, seed=3)
    bounds = [round(i * 100 / 6) for i in range(7)]
    assert all(bounds[i] <= index < bounds[i + 1] for i, index in enumerate(picked))
    assert spread_indices(100, 6, seed=3) == picked  # the same every time it is asked (every epoch, every resume)
    assert spread_indices(100, 6, seed=4) != picked
    assert spread_indices(5, 6, seed=3) == [0, 1, 2, 3, 4]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    root = tmp_path_factory.mktemp("preflight") / "data"
    made = run_cli("data", "synth", str(root), "--count", "12", "--size", "32")
    assert made.returncode == 0, made.stderr
    return root


@pytest.mark.slow
def test_a_config_mistake_is_one_line_and_leaves_no_run_directory(dataset, tmp_path):
    result = run_cli("train", "-c", str(write_config(tmp_path, dataset)), "--set", "models.generator.depth=6",
                     cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [
        "error: data.crop_size: 32 is not a multiple of 64, which models.generator ('unet') needs for its inputs; "
        "use 64, or a generator with fewer downsamplings (depth)"]
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("overrides,error,message", [
    (["models.discriminator.n_layers=5"], ConfigError,
     "data.crop_size: input size 32 is too small for patchgan with n_layers=5: it needs at least 96; raise "
     "data.crop_size or use fewer layers in models.discriminator (n_layers)"),
    (["models.generator={name: unet_256}"], ConfigError,
     "data.crop_size: 32 is not a multiple of 256, which models.generator ('unet_256') needs for its inputs; "
     "use 256, or a generator with fewer downsamplings (depth)"),
    (["models.generator={name: resnet, depth: 5}"], ConfigError,  # a newcomer's walk: was a failed run dir
     "data.crop_size: 32: input 32x32 is too small for this resnet generator: height and width must be at least "
     "64 (reflection padding needs more pixels than it adds); raise data.crop_size or choose another "
     "models.generator"),
    (["precision.cudnn_benchmark=on", "run.deterministic=true"], ConfigError,
     "--set precision.cudnn_benchmark=on: precision.cudnn_benchmark: on picks convolution algorithms by timing "
     "them, which can differ between runs; it cannot go with run.deterministic: true (set "
     "precision.cudnn_benchmark to auto or off, or run.deterministic to false)"),
    (["data.root=nowhere"], DatasetError, "nowhere: dataset folder does not exist (data.root)"),
    (["data.root=empty"], ConfigError, "data.root: empty/train: no images (looked for "),
    (["data.root=null"], ConfigError, "data.root: no dataset folder given; set data.root"),
])
def test_config_mistakes_are_refused_before_a_run_directory_exists(dataset, tmp_path, monkeypatch, overrides, error,
                                                                   message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "empty" / "train").mkdir(parents=True)
    with pytest.raises(error) as raised:
        Run.create(write_config(tmp_path, dataset), overrides=overrides)
    assert str(raised.value).startswith(message)
    assert not (tmp_path / "runs").exists()


def test_config_init_writes_the_data_and_model_sections_in_full(tmp_path):
    path = tmp_path / "run.yaml"
    made = run_cli("config", "init", "--trainer", "pix2pix", "-o", str(path))
    assert made.returncode == 0, made.stderr
    text = path.read_text()
    data = yaml.safe_load(text)
    assert data["data"] == {"name": "paired", **PairedDataOptions().model_dump(mode="json")}
    generator = data["models"]["generator"]
    assert generator["name"] == "unet_256" and generator["depth"] == 8 and generator["dropout_layers"] == 3
    assert {"ngf", "max_width", "norm", "block", "upsample", "dropout", "init"} <= set(generator)
    assert "in_channels" not in generator and "input_channels" not in data["models"]["discriminator"]
    assert "    # in_channels: 3  # set from data.in_channels; Channels of the input image (A)\n" in text
    assert "    # target_channels: 3  # set from data.out_channels; " in text
    # null: the schedule follows loop.epochs (half constant, half decay), as the resolved config does
    assert data["optim"]["lr_schedule"] == {"name": "pix2pix_linear", "n_epochs": None, "n_epochs_decay": None,
                                            "epoch_count": 1}
    body = [line for line in text.splitlines()[3:] if line.strip() and not line.strip().startswith("#")]
    assert all("  # " in line for line in body), [line for line in body if "  # " not in line]
    assert run_cli("config", "validate", str(path)).returncode == 0
    written = json.loads(run_cli("config", "show", "-c", str(path), "--json").stdout)
    defaults = json.loads(run_cli("config", "show", "--trainer", "pix2pix", "--json").stdout)
    assert written == defaults  # the file says what the defaults are, no more, no less
