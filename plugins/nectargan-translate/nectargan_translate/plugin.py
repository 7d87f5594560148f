"""Entry point module: registration only. It must not import torch.

The datasets and commands every image-translation trainer shares: the paired
and unpaired datasets, ``nectargan data``, ``test``, ``predict`` and
``export``. Factories are ``"module:attribute"`` strings, imported only when a
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
    register("paired", "nectargan_translate.data.paired:build_paired_dataset", options=PairedDataOptions,
             description="Paired A/B images: aligned A|B files or A/ and B/ folders, train/val/test splits")
    register("unpaired", "nectargan_translate.data.unpaired:build_unpaired_dataset", options=UnpairedDataOptions,
             description="Unpaired A/B images: trainA/ and trainB/ (valA/ valB/, testA/ testB/) of any sizes")


@hookimpl
def register_commands(cli):
    cli.add_command(data_group)
    for command in COMMANDS:
        cli.add_command(command)
