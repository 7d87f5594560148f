"""The ``nectargan`` command group and its error handling.

Every :class:`~nectargan_core.errors.NectarGANError` becomes ``error: <line>``
on stderr and a non-zero exit, with no traceback.
"""

from __future__ import annotations

import os
import sys

import click

from .. import __version__
from ..errors import NectarGANError
from ..plugins import get_plugins
from .config_cmd import config_group
from .plugins_cmd import plugins_group
from .train_cmd import train_command


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, "-V", "--version", prog_name="nectargan")
def cli() -> None:
    """NectarGAN: train paired image-to-image GANs (pix2pix) with plugins.

    \b
    Examples:
      nectargan plugins list            what is installed
      nectargan config init -o run.yaml a commented starter config
      nectargan train -c run.yaml       train
      nectargan train --resume latest   continue the newest run exactly
      nectargan runs                    every run, its status and best result
      nectargan report RUN_DIR          one HTML page about a run
    """


cli.add_command(plugins_group)
cli.add_command(config_group)
cli.add_command(train_command)


def report(error: NectarGANError) -> int:
    for line in str(error).splitlines() or [type(error).__name__]:
        click.echo(f"error: {line}", err=True)
    if os.environ.get("TORCHELASTIC_ERROR_FILE"):  # a torchrun worker: tell the launcher too
        from ..launch import record_for_launcher

        record_for_launcher(str(error).splitlines()[0] if str(error) else type(error).__name__)
    return error.exit_code


def main(argv: list[str] | None = None) -> None:
    """Console entry point: load plugins, add their commands, run."""
    try:
        host = get_plugins()
        host.add_commands(cli)
    except NectarGANError as error:  # strict plugin mode
        sys.exit(report(error))
    host.warn_failures()
    try:
        cli.main(args=argv, prog_name="nectargan", standalone_mode=False)
    except NectarGANError as error:
        sys.exit(report(error))
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.ClickException as error:
        error.show()
        sys.exit(error.exit_code)
    except click.exceptions.Exit as done:
        sys.exit(done.exit_code)
