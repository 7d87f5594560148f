"""``nectargan train``: start a run or resume one."""

from __future__ import annotations

import sys

import click

from ..errors import ConfigError
from ..limits import PROCESSES_OPTION, RESTARTS_OPTION
from ..text import printable
from .options import all_overrides, config_options, config_source


#: Keys a ``--resume`` cannot change: they only act when a run starts.
STARTING_ONLY = {
    "run.init_from": "weights to start from are loaded when a run starts",
    "run.init_from_strict": "weights to start from are loaded when a run starts",
    "run.name": "a run keeps the name of its folder",
    "run.output_dir": "a run keeps its folder",
}


@click.command("train")
@config_options
@click.option("--resume", metavar="RUN_DIR|latest|latest:NAME", default=None,
              help="Continue a run from its latest good checkpoint (the whole state). latest: the most "
                   "recently updated run under --output-dir; latest:NAME: the same among runs named NAME.")
@click.option("--checkpoint", metavar="PATH", default=None, type=click.Path(dir_okay=False),
              help="With --resume: resume from this checkpoint instead of the latest.")
@click.option("--keep-schedule", is_flag=True,
              help="With --resume and a new loop.epochs: keep the LR schedule fitted to the epochs the run was "
                   "planned for, then hold its last LR (loop.schedule_epochs), instead of re-fitting it.")
@click.option("--data-changed", is_flag=True,
              help="With --resume of a checkpoint saved mid-epoch: go on although train files were added, removed "
                   "or renamed since (the rest of the epoch is drawn from the files there now).")
@click.option("--init-from", metavar="CHECKPOINT", default=None, type=click.Path(dir_okay=False),
              help="Start a new run from these network weights (fine-tuning; not a resume).")
@click.option("--init-from-partial", "init_partial", is_flag=True,
              help="With --init-from: load what fits and start the rest from its initialisation "
                   "(run.init_from_strict=false); the report says what stays random.")
@click.option("--output-dir", metavar="DIR", default=None,
              help="With --resume latest[:NAME]: where to look for runs (default: runs).")
@click.option("--nproc", type=PROCESSES_OPTION, default=None, metavar="N",
              help="Train data-parallel in N processes on this machine (through torchrun's agent).")
@click.option("--max-restarts", type=RESTARTS_OPTION, default=0, show_default=True,
              help="With --nproc: restart the processes this often after a failure (each restart resumes).")
def train_command(config_file: str | None, preset: str | None, overrides: tuple[str, ...], trainer: str | None,
                  resume: str | None, checkpoint: str | None, keep_schedule: bool, data_changed: bool,
                  init_from: str | None,
                  init_partial: bool, output_dir: str | None, nproc: int | None, max_restarts: int) -> None:
    """Train with the trainer named in the config (or --trainer).

    Stops cleanly on Ctrl-C or SIGTERM: the current step finishes, a checkpoint
    is written, and the command exits with 130 (SIGINT) or 143 (SIGTERM).
    Resuming a run that has already done its loop.epochs trains nothing: it
    says so and exits 0 (raise loop.epochs with --set to train longer).

    \b
    Examples:
      nectargan train -c run.yaml
      nectargan train -c run.yaml --set loop.epochs=2 --set run.device=cpu
      nectargan train --preset pix2pix-reference --set data.root=datasets/facades
      nectargan train --resume runs/facades/version_0
      nectargan train --resume latest --set loop.epochs=300
      nectargan train --resume latest --set loop.epochs=300 --keep-schedule
      nectargan train --resume latest:facades
      nectargan train -c finetune.yaml --init-from runs/base/version_0/checkpoints/best.pt
      nectargan train -c finetune.yaml --init-from generator_only.pt --init-from-partial
      nectargan train -c run.yaml --nproc 2
    """
    from ..torchload import require_torch

    require_torch("nectargan train")
    from ..run import Run, check_keep_schedule
    from ..signals import EXIT_CODES, graceful_stop, settle

    if resume is None and checkpoint is not None:
        raise ConfigError("--checkpoint needs --resume RUN_DIR")
    if resume is None and keep_schedule:
        raise ConfigError("--keep-schedule needs --resume RUN_DIR: a new run fits its schedules to its loop.epochs")
    if resume is None and data_changed:
        raise ConfigError("--data-changed needs --resume RUN_DIR: it lets a resume go on over changed train files")
    if keep_schedule:  # before --nproc starts N processes that would each refuse it
        check_keep_schedule(overrides)
    if resume is not None and init_from is not None:
        raise ConfigError("--init-from starts a new run from weights; --resume continues one: use one of them")
    if init_partial and init_from is None:
        raise ConfigError("--init-from-partial needs --init-from CHECKPOINT")
    if resume is not None and (config_file is not None or preset is not None):
        raise ConfigError("--resume uses the run's own config.yaml; drop -c/--config and --preset "
                          "(use --set to change values)")
    if resume is not None:
        # these only act when a run starts: on resume they would be recorded in config.yaml and do nothing
        for override in overrides:
            key = override.partition("=")[0].strip()
            if key in STARTING_ONLY:
                raise ConfigError(f"--set {key}: {STARTING_ONLY[key]}; --resume continues the run as it is "
                                  "(start a new run to change it)")
    if init_partial:
        overrides = (*overrides, "run.init_from_strict=false")
    if nproc is not None:
        from ..launch import launch

        # A config mistake is one line from here, before N processes would each report it.
        _check_config(config_source(config_file, preset), all_overrides(overrides, trainer), resume, init_from,
                      output_dir)
        args = [*(["-c", config_file] if config_file else []), *(["--preset", preset] if preset else []),
                *(a for o in overrides for a in ("--set", o)),
                *(["--trainer", trainer] if trainer else []), *(["--resume", resume] if resume else []),
                *(["--checkpoint", checkpoint] if checkpoint else []),
                *(["--keep-schedule"] if keep_schedule else []),
                *(["--data-changed"] if data_changed else []),
                *(["--init-from", init_from] if init_from else []),
                *(["--output-dir", output_dir] if output_dir else [])]
        sys.exit(launch(nproc, ["train", *args], max_restarts=max_restarts))
    if init_from is not None:
        overrides = (*overrides, f"run.init_from={init_from}")
    if resume is not None:
        target, name = resume_target(resume)
        run = Run.resume(target, name=name, checkpoint=checkpoint, overrides=all_overrides(overrides, trainer),
                         output_dir=output_dir or "runs", keep_schedule=keep_schedule,
                         data_changed=data_changed)
        say = run.trainer.is_main
        picked = "" if target != "latest" else (
            f" (the most recently updated run{f' named {name!r}' if name else ''} under {output_dir or 'runs'})")
        if run.finished:
            if say:
                click.echo(f"{printable(run.dir)}{picked}: {already_finished(run.trainer)}", err=True)
            run.close()
            return
        if say:
            click.echo(f"resuming {printable(run.dir)}{picked} at {run.trainer.position_text()}" + _processes(run), err=True)
    else:
        run = Run.create(config_source(config_file, preset), overrides=all_overrides(overrides, trainer))
        say = run.trainer.is_main
        if say:
            click.echo(f"run directory: {printable(run.dir)}" + _processes(run), err=True)
    world = run.trainer.dist.world_size
    resume_command = f"nectargan train --resume {printable(run.dir)}" + (f" --nproc {world}" if world > 1 else "")
    try:
        with graceful_stop(run.trainer) as received:
            run.fit()
    except KeyboardInterrupt:  # a second Ctrl-C: stopped inside a step, status.json says interrupted
        settle()
        if say:
            last = run.run_dir.latest_checkpoint()
            saved = (f"the last checkpoint is {printable(last)}; resume with: {resume_command}" if last
                     else "no checkpoint was written")
            click.echo(f"stopped at once after {run.trainer.position_text()}; the step in progress was not "
                       f"saved; {saved}", err=True)
        sys.exit(130)
    settle()  # the run has ended and is saved: a late signal must not turn this exit into a traceback
    run.close()  # only after a normal end: after a failure the process just exits
    trainer_state = run.trainer
    # The signal that stopped the run, here or in another process of it (each process ends the same way).
    stopped_by = received[0] if received else (
        trainer_state.stop_reason if trainer_state.interrupted and trainer_state.stop_reason in EXIT_CODES else None)
    cut_short = stopped_by is not None and not trainer_state.trained_all
    if not say:
        if cut_short:
            sys.exit(EXIT_CODES[stopped_by])
        return
    if cut_short:
        # The console has said where it stopped; this line adds the file and the command.
        saved = trainer_state.last_checkpoint
        click.echo((f"interrupted: checkpoint saved as {printable(saved)}" if saved else "interrupted")
                   + f"; resume with: {resume_command}", err=True)
        sys.exit(EXIT_CODES[stopped_by])
    if trainer_state.stop_reason is not None and stopped_by is None:
        click.echo(f"stopped early at {trainer_state.position_text()} ({trainer_state.stop_reason}); "
                   f"results in {printable(run.dir)}", err=True)
        return
    loop = trainer_state.config.loop
    if loop.max_steps is not None and trainer_state.global_step >= loop.max_steps \
            and trainer_state.epochs_done < loop.epochs:
        click.echo(f"finished: loop.max_steps={loop.max_steps} reached at {trainer_state.position_text()}; "
                   f"results in {printable(run.dir)}", err=True)
        return
    click.echo(f"finished: {trainer_state.epochs_done}/{loop.epochs} epochs, "
               f"{trainer_state.global_step} steps; results in {printable(run.dir)}", err=True)


def resume_target(resume: str) -> tuple[str, str | None]:
    """``--resume`` as (target, run name): ``latest``, ``latest:NAME`` or a run directory."""
    if resume == "latest" or resume.startswith("latest:"):
        name = resume.partition(":")[2] or None
        return "latest", name
    return resume, None


def already_finished(trainer: object) -> str:
    """Why resuming a run trains nothing, and what to raise instead."""
    loop = trainer.config.loop  # type: ignore[attr-defined]
    done, step = trainer.epochs_done, trainer.global_step  # type: ignore[attr-defined]
    if loop.max_steps is not None and step >= loop.max_steps and done < loop.epochs:
        return (f"already finished (loop.max_steps={loop.max_steps} reached at step {step}); nothing to train. "
                f"Raise loop.max_steps to train longer, e.g. --set loop.max_steps={loop.max_steps * 2}")
    return (f"already finished ({done}/{loop.epochs} epochs, {step} steps); nothing to train. "
            f"Raise loop.epochs to train longer, e.g. --set loop.epochs={max(done, loop.epochs) * 2}")


def _processes(run: object) -> str:
    dist = run.dist  # type: ignore[attr-defined]
    return f" ({dist.world_size} processes, {dist.backend})" if dist.enabled else ""


def _check_config(config_file: str | dict | None, overrides: list[str], resume: str | None,
                  init_from: str | None, output_dir: str | None) -> None:
    """Validate the config a launch would train with, raising the same one-line errors.

    A new run also gets the trainer's own checks (``Trainer.check_config``), as
    ``Run.create`` would make them in every process.
    """
    from ..config import load_config, load_file
    from ..plugins import get_plugins
    from ..rundir import RunDir, latest_run
    from ..runlock import check_free

    host = get_plugins()
    registry = host.registry
    if resume is None:
        from ..run import check_before_run_dir

        extra = (f"run.init_from={init_from}",) if init_from is not None else ()
        check_before_run_dir(load_config(config_file, (*overrides, *extra), registry), host)
        return
    target, name = resume_target(resume)
    run_dir = latest_run(output_dir or "runs", name) if target == "latest" else RunDir.open(target)
    check_free(run_dir.path)
    load_config(load_file(run_dir.config_file), overrides, registry, label=str(run_dir.config_file))
