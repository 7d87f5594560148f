"""Training helpers every image-translation trainer shares: Adam, LR schedules, examples, early stopping.

pix2pix and CycleGAN build their optimizers, schedulers and example grids the
same way, from the same option sections (:mod:`.options`); a third trainer
on this layer gets the same behaviour by calling the same functions.
"""

from __future__ import annotations

import sys
from typing import Any

import torch

from nectargan_core import ConfigError, Trainer, metric_improved
from nectargan_losses import Pix2PixLinear, build_schedule, lr_scheduler


def make_adam(params: Any, lr: float, optim: Any, device: torch.device) -> torch.optim.Adam:
    """Adam with the configured kernel; ``auto`` uses the fused kernel where the device has one.

    ``default`` asks for nothing, so torch picks the kernel exactly as for the
    reference's ``torch.optim.Adam(params, lr, betas)``.
    """
    kwargs = dict(lr=lr, betas=(optim.beta1, optim.beta2), weight_decay=optim.weight_decay)
    params = list(params)
    choice = optim.implementation
    if choice == "default":
        return torch.optim.Adam(params, **kwargs)
    if choice in {"auto", "fused"}:
        try:
            return torch.optim.Adam(params, fused=True, **kwargs)
        except (RuntimeError, ValueError) as exc:
            if choice == "fused":
                raise ConfigError(f"optim.implementation: fused Adam is not available on {device}: {exc}") from None
            choice = "foreach"
    return torch.optim.Adam(params, foreach=choice == "foreach", **kwargs)


def warn_if_decay_never_starts(schedule: Any, epochs: int, key: str, say: bool) -> None:
    """One warning when a pix2pix_linear LR schedule keeps the full LR for every epoch the run trains."""
    if not isinstance(schedule, Pix2PixLinear):  # another schedule's n_epochs may mean something else
        return
    n_epochs = schedule.n_epochs
    if say and isinstance(n_epochs, int) and schedule.n_epochs_decay > 0 and n_epochs >= epochs:
        print(f"warning: {key}: the LR stays constant for {n_epochs} epochs and the run trains {epochs} "
              f"(loop.epochs), so its decay never starts; set {key}.n_epochs and n_epochs_decay to null to fit "
              "the schedule to the run", file=sys.stderr)


def warn_if_schedule_ends_early(schedule: Any, epochs: int, key: str, say: bool) -> None:
    """One warning when a pix2pix_linear schedule of explicit lengths reaches a learning rate of 0 before the run's
    last epoch (a resume that raised loop.epochs, say): the epochs after it change nothing."""
    if not isinstance(schedule, Pix2PixLinear) or not say:
        return
    n_epochs, decay = schedule.n_epochs, schedule.n_epochs_decay
    if not (isinstance(n_epochs, int) and isinstance(decay, int) and decay > 0):
        return
    end = n_epochs + decay + 1 - schedule.epoch_count  # the last epoch with a learning rate above 0
    if end < epochs:
        print(f"warning: {key}: the LR reaches 0 after epoch {end} ({key}.n_epochs {n_epochs} + n_epochs_decay "
              f"{decay}) and the run trains {epochs} (loop.epochs): epochs {end + 1} to {epochs} change nothing; "
              f"lengthen the schedule, or set both to null to fit it to the run", file=sys.stderr)


def check_sync_batchnorm(trainer: Trainer) -> None:
    """Refuse synchronised batch norm with train-mode validation in a distributed run (it would hang).

    The processes validate different numbers of images, so a synchronised
    BatchNorm in training mode would wait forever for the others' statistics.
    """
    cfg = trainer.config
    if trainer.dist.enabled and cfg.distributed.sync_batchnorm and not cfg.validation.eval_mode:
        raise ConfigError("distributed.sync_batchnorm with validation.eval_mode=false: the processes validate "
                          "different numbers of images, so synchronised batch norm in training mode would wait "
                          "forever; set validation.eval_mode=true")


def follows_run(choice: Any, registry: Any) -> bool:
    """Whether the schedule ``choice`` takes its length from the run (the default ``pix2pix_linear`` with null
    lengths): built without a run length, such a schedule is refused."""
    from nectargan_core import ConfigError as NeedsLength

    try:
        build_schedule(choice.model_dump(), registry, epochs=None)
    except NeedsLength:
        return True
    return False


def run_schedule(trainer: Trainer, choice: Any) -> Any:
    """The schedule ``choice`` (an ``optim.lr_schedule``-style ``{name, options}``) for this run.

    A schedule that follows the run's length is fitted to ``loop.schedule_epochs``
    when set (a resume with ``--keep-schedule``) or else ``loop.epochs``; when the
    run trains longer than it was fitted to, an epoch-unit schedule holds its
    value of the last fitted epoch. A schedule of explicit lengths is as given.
    """
    loop = trainer.config.loop
    if not follows_run(choice, trainer.registry):
        return build_schedule(choice.model_dump(), trainer.registry, epochs=loop.epochs)
    fitted = loop.fitted_epochs
    schedule = build_schedule(choice.model_dump(), trainer.registry, epochs=fitted)
    if fitted < loop.epochs and schedule.unit == "epoch":
        return schedule.held_after(fitted - 1)
    return schedule


def warn_if_fitted_beyond_the_run(trainer: Trainer, key: str) -> None:
    """One warning when ``loop.schedule_epochs`` is more than ``loop.epochs``: a schedule fitted to it is cut off."""
    loop = trainer.config.loop
    if trainer.is_main and loop.fitted_epochs > loop.epochs:
        print(f"warning: loop.schedule_epochs {loop.fitted_epochs} is more than loop.epochs {loop.epochs}: {key}, "
              f"fitted to {loop.fitted_epochs} epochs, stops {loop.fitted_epochs - loop.epochs} epoch(s) before its "
              "end; set loop.schedule_epochs to loop.epochs or null to fit it to the run", file=sys.stderr)


def lr_at(scheduler: Any, position: int) -> float:
    """The learning rate of ``scheduler``'s first parameter group at ``position`` (an epoch or step count)."""
    return scheduler.base_lrs[0] * scheduler.lr_lambdas[0](position)


def make_lr_schedulers(trainer: Trainer, opt_g: torch.optim.Optimizer, opt_d: torch.optim.Optimizer,
                       names: tuple[str, str]) -> tuple[Any, Any, tuple[str, str]]:
    """G's and D's LR schedulers, tracked under ``names``, and their units (``"epoch"`` or ``"step"``).

    G's follows ``optim.lr_schedule``; D's ``optim.lr_schedule_d``, or G's
    schedule when that is null. Schedules that follow the run's length (the
    default one does) are fitted to ``loop.epochs`` (or ``loop.schedule_epochs``,
    see :func:`run_schedule`). Give each scheduler to its kit update with its
    unit (``scheduler_unit=``).
    """
    optim, loop = trainer.config.optim, trainer.config.loop
    schedule_g = run_schedule(trainer, optim.lr_schedule)
    schedule_d = run_schedule(trainer, optim.lr_schedule_d) if optim.lr_schedule_d is not None else schedule_g
    if follows_run(optim.lr_schedule, trainer.registry):
        warn_if_fitted_beyond_the_run(trainer, "optim.lr_schedule")
    else:  # explicit lengths: what they mean for this run's epochs
        warn_if_decay_never_starts(schedule_g, loop.epochs, "optim.lr_schedule", trainer.is_main)
        warn_if_schedule_ends_early(schedule_g, loop.epochs, "optim.lr_schedule", trainer.is_main)
    sched_g = trainer.track(names[0], lr_scheduler(opt_g, schedule_g))
    sched_d = trainer.track(names[1], lr_scheduler(opt_d, schedule_d))
    return sched_g, sched_d, (schedule_g.unit, schedule_d.unit)


def write_epoch_examples(trainer: Any, epoch: int) -> None:
    """The example grid ``examples/epochNNNN.png`` after every ``examples.every_epochs``-th epoch (main process)."""
    every = trainer.config.examples.every_epochs
    if every and (epoch + 1) % every == 0 and trainer.is_main:
        trainer.write_examples(trainer.run_dir.examples / f"epoch{epoch + 1:04d}.png")


class EarlyStopping:
    """Counts validations without improvement; its state travels in checkpoints."""

    def __init__(self) -> None:
        self.best: float | None = None
        self.bad = 0

    def update(self, value: float, metric: str, mode: str, min_delta: float, registry: Any = None) -> None:
        """Count one validation: ``value`` of ``metric`` improves on the best by more than ``min_delta``, or not."""
        if metric_improved(value, self.best, metric, mode, min_delta, registry):
            self.best, self.bad = value, 0
        else:
            self.bad += 1

    def state_dict(self) -> dict[str, Any]:
        """The best value so far and the validations since, for checkpoints."""
        return {"best": self.best, "bad": self.bad}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` saved."""
        self.best, self.bad = state["best"], state["bad"]
