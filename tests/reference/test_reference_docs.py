"""docs/coming-from-reference.md: every reference option is mapped, every key exists, every command runs."""

from __future__ import annotations

import re
import shlex

import numpy as np
import pytest
import torch
from PIL import Image

from nectargan_core.config import load_config
from nectargan_core.plugins import get_plugins
from nectargan_core.presets import preset_data
from support import ROOT, run_cli

PAGE = ROOT / "docs" / "coming-from-reference.md"

#: The reference's train.py / test.py options a user of it will look for.
REFERENCE_OPTIONS = [
    "dataroot", "name", "checkpoints_dir", "model", "gpu_ids", "netG", "netD", "n_layers_D", "norm", "ngf", "ndf",
    "input_nc", "output_nc", "init_type", "init_gain", "no_dropout", "direction", "dataset_mode", "serial_batches",
    "num_threads", "batch_size", "load_size", "crop_size", "preprocess", "no_flip", "max_dataset_size", "phase",
    "n_epochs", "n_epochs_decay", "epoch_count", "lr", "beta1", "lr_policy", "lr_decay_iters", "gan_mode",
    "lambda_L1", "pool_size", "lambda_A", "lambda_B", "lambda_identity", "continue_train", "epoch", "load_iter",
    "save_epoch_freq", "save_latest_freq", "save_by_iter", "print_freq", "display_id", "display_server",
    "display_port", "display_env", "display_freq", "display_ncols", "display_winsize", "update_html_freq", "no_html",
    "suffix", "verbose", "results_dir", "num_test", "eval", "aspect_ratio",
]
SECTIONS = ("run", "loop", "checkpoint", "data", "models", "loss", "optim", "precision", "validation", "examples",
            "test", "visualizers", "pool")
#: Mappings whose keys are names the user chooses (a loss term, a visualizer).
OPEN_MAPPINGS = ("loss.terms.", "visualizers.")


def test_every_reference_option_has_a_row():
    text = PAGE.read_text()
    missing = [option for option in REFERENCE_OPTIONS if not re.search(rf"`[^`]*--{option}(?![A-Za-z0-9_])", text)]
    assert not missing


def flat_keys(data: dict, prefix: str = "") -> set[str]:
    keys = set()
    for key, value in data.items():
        keys.add(f"{prefix}{key}")
        if isinstance(value, dict):
            keys |= flat_keys(value, f"{prefix}{key}.")
    return keys


def test_every_config_key_on_the_page_exists():
    registry = get_plugins().registry
    known = flat_keys(load_config({"trainer": "pix2pix", "visualizers": ["console", "visdom"]}, (),
                                  registry).to_dict())
    known |= flat_keys(load_config(preset_data(registry, "pix2pix-reference"), (), registry).to_dict())
    known |= flat_keys(load_config(preset_data(registry, "cyclegan-reference"), (), registry).to_dict())
    named = {key for key in re.findall(r"`((?:%s)\.[A-Za-z0-9_.]+)" % "|".join(SECTIONS), PAGE.read_text())
             if not key.endswith(".py")}  # test.py is the reference's script
    assert len(named) > 40
    unknown = sorted(key for key in named if key not in known and not key.startswith(OPEN_MAPPINGS))
    assert not unknown
    load_config({"trainer": "pix2pix"}, ["loss.terms.l1.weight=50"], registry)  # the one open key it names


def console_blocks() -> list[list[str]]:
    """The page's ```console blocks, each a list of its ``$ `` commands."""
    blocks = re.findall(r"```console\n(.*?)```", PAGE.read_text(), re.S)
    return [[line[2:] for line in block.splitlines() if line.startswith("$ ")] for block in blocks]


@pytest.mark.slow  # eight console-script subprocesses, two training steps of the full-size unet_256
def test_the_pages_commands_work_as_written(tmp_path):
    made = run_cli("data", "synth", "datasets/facades", "--count", "20", "--size", "32", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    (tmp_path / "photos").mkdir()
    Image.fromarray(np.random.default_rng(0).integers(0, 256, (256, 256, 3), dtype=np.uint8)).save(
        tmp_path / "photos" / "photo.png")
    preset, weights_in, weights_out = console_blocks()
    for command in preset + weights_out + weights_in:  # the export writes the file the import section reads
        args = shlex.split(command)
        assert args[0] == "nectargan"
        if args[1] == "train":  # the recipe's 200 epochs, cut to one step
            args += ["--set", "loop.max_steps=1"]
        result = run_cli(*args[1:], cwd=tmp_path, timeout=600)
        assert result.returncode == 0, (command, result.stderr)
        if args[1] == "train" and "--init-from" in args:
            assert "init_from: 'generator' loaded 82/82 tensors from facades_label2photo.pt" in result.stderr
            assert "has no weights for 'discriminator'; all 22 of its tensors stay at their initialisation" \
                in result.stderr
    run = tmp_path / "runs" / "facades_pix2pix" / "version_0"
    assert (run / "test").is_dir() and len(list((run / "test").iterdir())) == 2  # train mode, then eval mode
    exported = torch.load(tmp_path / "checkpoints" / "facades_pix2pix" / "latest_net_G.pth", weights_only=True)
    assert next(iter(exported)) == "model.model.0.weight"  # the reference's layout
    assert (tmp_path / "translated" / "photo.png").is_file()
