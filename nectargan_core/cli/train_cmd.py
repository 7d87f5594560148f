"""``nectargan train``: start a run or resume one."""

from __future__ import annotations

import sys

import click

from ..errors import ConfigError
from .options import all_overrides, config_options


@click.command("train")
@config_options
@click.option("--resume", metavar="RUN_DIR|latest", default=None,
              help="Continue a run from its latest good checkpoint (the whole state).")
@click.option("--checkpoint", metavar="PATH", default=None, type=click.Path(dir_okay=False),
              help="With --resume: resume from this checkpoint instead of the latest.")
@click.option("--init-from", metavar="CHECKPOINT", default=None, type=click.Path(dir_okay=False),
              help="Start a new run from these network weights (fine-tuning; not a resume).")
@click.option("--output-dir", metavar="DIR", default=None,
              help="With --resume latest: where to look for runs (default: runs).")
def train_command(config_file: str | None, overrides: tuple[str, ...], trainer: str | None,
                  resume: str | None, checkpoint: str | None, init_from: str | None,
                  output_dir: str | None) -> None:
    """Train with the trainer named in the config (or --trainer).

    Stops cleanly on Ctrl-C or SIGTERM: the current step finishes, a checkpoint
    is written, and the command exits with 130 (SIGINT) or 143 (SIGTERM).

    \b
    Examples:
      nectargan train -c run.yaml
      nectargan train -c run.yaml --set loop.epochs=2 --set run.device=cpu
      nectargan train --resume runs/facades/version_0
      nectargan train --resume latest --set loop.epochs=300
      nectargan train -c finetune.yaml --init-from runs/base/version_0/checkpoints/best.pt
    """
    from ..run import Run
    from ..signals import EXIT_CODES, graceful_stop

    if resume is None and checkpoint is not None:
        raise ConfigError("--checkpoint needs --resume RUN_DIR")
    if resume is not None and init_from is not None:
        raise ConfigError("--init-from starts a new run from weights; --resume continues one: use one of them")
    if init_from is not None:
        overrides = (*overrides, f"run.init_from={init_from}")
    if resume is not None:
        if config_file is not None:
            raise ConfigError("--resume uses the run's own config.yaml; drop -c/--config (use --set to change values)")
        run = Run.resume(resume, checkpoint=checkpoint, overrides=all_overrides(overrides, trainer),
                         output_dir=output_dir or "runs")
        click.echo(f"resuming {run.dir} at epoch {run.trainer.epochs_done}, step {run.trainer.global_step}",
                   err=True)
    else:
        run = Run.create(config_file, overrides=all_overrides(overrides, trainer))
        click.echo(f"run directory: {run.dir}", err=True)
    with graceful_stop(run.trainer) as received:
        run.fit()
    trainer_state = run.trainer
    if received:
        click.echo(
            f"interrupted at epoch {trainer_state.epochs_done}, step {trainer_state.global_step}; "
            f"checkpoint saved. Resume with: nectargan train --resume {run.dir}", err=True)
        sys.exit(EXIT_CODES.get(received[0], 1))
    click.echo(f"finished: {trainer_state.epochs_done} epochs, {trainer_state.global_step} steps; "
               f"results in {run.dir}", err=True)
