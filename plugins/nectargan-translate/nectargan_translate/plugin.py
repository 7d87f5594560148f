"""Entry point module: registration only. It must not import torch.

The datasets, metrics and commands every image-translation trainer shares:
the paired and unpaired datasets, L1, PSNR and SSIM, ``nectargan data``,
``test``, ``predict`` and ``export``. Factories are ``"module:attribute"`` strings, imported only when a
run builds them.
"""

from __future__ import annotations

from nectargan_core import hookimpl

from .commands import COMMANDS
from .data.options import PairedDataOptions
from .data.unpaired_options import UnpairedDataOptions
from .data_cli import data_group


@hookimpl
def register_datasets(register):
    # Both came with the trainers before 0.1.0: runs recorded with those owners go on with this one.
    register("paired", "nectargan_translate.data.paired:build_paired_dataset", options=PairedDataOptions,
             description="Paired A/B images: aligned A|B files or A/ and B/ folders, train/val/test splits",
             formerly=["nectargan-pix2pix"])
    register("unpaired", "nectargan_translate.data.unpaired:build_unpaired_dataset", options=UnpairedDataOptions,
             description="Unpaired A/B images: trainA/ and trainB/ (valA/ valB/, testA/ testB/) of any sizes",
             formerly=["nectargan-cyclegan"])


@hookimpl
def register_commands(cli):
    cli.add_command(data_group)
    for command in COMMANDS:
        cli.add_command(command)


@hookimpl
def option_hint(command, option):
    """The reference's train.py/test.py flags, pointed at what to write here."""
    from .reference_flags import hint

    return hint(command, option)


@hookimpl
def register_metrics(register):
    register("l1", "nectargan_translate.evaluation:l1", direction="min",
             description="Mean absolute pixel error on a 0..1 scale")
    register("psnr", "nectargan_translate.evaluation:psnr", direction="max",
             description="Peak signal-to-noise ratio in dB (data range 1)")
    register("ssim", "nectargan_translate.evaluation:ssim", direction="max",
             description="Structural similarity (data range 1)")


@hookimpl
def report_sections(report):
    """The results of ``nectargan test`` in ``nectargan report``."""
    from .report_section import test_results_section

    return test_results_section(report)
