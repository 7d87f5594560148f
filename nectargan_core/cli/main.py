"""The ``nectargan`` command group and its error handling.

Every :class:`~nectargan_core.errors.NectarGANError` becomes ``error: <line>``
on stderr and a non-zero exit, with no traceback. So does a fault of the
machine that no command turned into one (a full, read-only or size-limited
disk, a path through a file; see :func:`~nectargan_core.atomic.describe_os_error`):
it is the user's to fix, whichever command met it.
"""

from __future__ import annotations

import os
import re
import sys
import traceback

import click

from .. import __version__
from ..atomic import describe_os_error
from ..brokenimports import describe as describe_import_error
from ..brokenimports import describe_mismatch
from ..errors import NectarGANError
from ..first_party import provider_hint
from ..plugins import get_plugins
from ..text import printable
from .config_cmd import config_group
from .plugins_cmd import plugins_group
from .train_cmd import train_command


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, "-V", "--version", prog_name="nectargan")
@click.option("--traceback", "show_traceback", is_flag=True,
              help="Show the full traceback of errors and of plugin failures (same as NECTARGAN_DEBUG=1).")
def cli(show_traceback: bool) -> None:
    """NectarGAN: train image-to-image GANs (pix2pix, CycleGAN and your own) with plugins.

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
    """Print ``error`` as ``error:`` lines; names read from disk may hold escape sequences, so they are shown escaped.

    A process of ``nectargan train --nproc`` only records it: the launcher
    prints one line for the run, naming the first rank that failed (every
    rank failing alike would otherwise print the same line once each).
    """
    from ..launchfolder import LAUNCHER_PID_ENV, record_for_launcher  # torch-free: errors print without torch too

    recorded = record_for_launcher(str(error).splitlines()[0] if str(error) else type(error).__name__)
    if not (recorded and os.environ.get(LAUNCHER_PID_ENV)):  # under our launcher, it prints the line
        for line in str(error).splitlines() or [type(error).__name__]:
            click.echo(f"error: {printable(line)}", err=True)
    return error.exit_code


def debugged(error: NectarGANError) -> NectarGANError:
    """``error``, after printing its traceback when ``nectargan --traceback`` or ``NECTARGAN_DEBUG=1`` asks for it."""
    if os.environ.get("NECTARGAN_DEBUG", "").strip().lower() in {"1", "true", "yes", "on"}:
        traceback.print_exception(error)
    return error


def main(argv: list[str] | None = None) -> None:
    """Console entry point: load plugins, add their commands, run.

    ``--traceback`` before the command (or ``NECTARGAN_DEBUG=1``) shows the
    tracebacks of plugin failures and of the error a command ends with.
    """
    args = sys.argv[1:] if argv is None else argv
    if "--traceback" in args[: next((i for i, a in enumerate(args) if not a.startswith("-")), len(args))]:
        os.environ["NECTARGAN_DEBUG"] = "1"  # before plugins load, and for the processes commands start
    try:
        host = get_plugins()
        host.add_commands(cli)
    except NectarGANError as error:  # strict plugin mode
        sys.exit(report(debugged(error)))
    host.warn_failures()
    try:
        cli.main(args=argv, prog_name="nectargan", standalone_mode=False)
    except NectarGANError as error:
        sys.exit(report(debugged(error)))
    except click.exceptions.Abort:
        if os.environ.get("RANK", "0") == "0":  # one line for a --nproc run too (every rank is stopped)
            click.echo("aborted", err=True)
        sys.exit(130)
    except click.UsageError as error:  # one line, like every other error (click's own block is four)
        where = error.ctx.command_path if error.ctx is not None else "nectargan"
        message = error.format_message()
        if isinstance(error, click.NoSuchOption):  # click 8.1 says "No such option: --x", later ones "... '--x'"
            message = f"No such option '{error.option_name}'" + message[len(error.message):]
            hint = host.option_hint(where, error.option_name)  # e.g. a reference flag: what to write here
            if hint:
                message = f"No such option '{error.option_name}'; {hint}"
        command = re.match(r"No such command '([^']+)'", message)
        install = provider_hint("command", command.group(1)) if command and where == "nectargan" else None
        if install:  # a command of one of our plugins, which is not installed
            message = f"No such command '{command.group(1)}' ({install})"
        message = " ".join(message.split()).rstrip(".")
        click.echo(f"error: {printable(message)} (see: {printable(where)} --help)", err=True)
        sys.exit(error.exit_code)
    except click.ClickException as error:
        error.show()
        sys.exit(error.exit_code)
    except click.exceptions.Exit as done:
        sys.exit(done.exit_code)
    except ImportError as error:  # a dependency missing (--no-deps) or broken by another (numpy 2 under matplotlib 3.6)
        line = describe_import_error(error)
        if line is None:
            raise
        failure = NectarGANError(line)
        failure.__cause__ = error  # what --traceback shows
        sys.exit(report(debugged(failure)))
    except (OSError, RuntimeError) as error:  # RuntimeError: torch reports a failed write() as one
        line = describe_mismatch(error) or describe_os_error(error)
        if line is None:
            raise
        sys.exit(report(NectarGANError(line)))
