"""Weight and learning-rate schedules: a value as a pure function of position.

A schedule reads one position, the epoch (counted from 0) or the global
optimisation step, chosen by its ``unit``. Being pure, it needs no state of
its own in checkpoints: the trainer's restored epoch and step give the same
value after a resume. Each term builds its own instance, so nothing is shared.

For learning rates, :func:`lr_scheduler` wraps a schedule in torch's
``LambdaLR``; the scheduler's own state_dict (its step count) is what resume
restores.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Callable, Mapping

from .options import check_exponential

if TYPE_CHECKING:  # pragma: no cover
    import torch

    from nectargan_core import Registry


class Schedule:
    """Base class: subclasses implement :meth:`value` (and need not call ``super().__init__``)."""

    unit: str = "epoch"
    """What :meth:`value`'s position counts: ``"epoch"`` or ``"step"`` (anything else is refused
    when the schedule is built). Set it as a class attribute or in ``__init__``."""

    def value(self, t: float) -> float:
        """The value at position ``t`` (an epoch or a step, per ``unit``)."""
        raise NotImplementedError

    def at(self, epoch: int, step: int) -> float:
        """The value for the current training position."""
        return self.value(epoch if self.unit == "epoch" else step)

    def for_run(self, epochs: int | None) -> "Schedule":
        """This schedule with what it leaves to the run's length filled in (``epochs``: ``loop.epochs``).

        Most schedules are given in absolute positions and return themselves.
        Raises ValueError when the schedule needs the run's length and ``epochs`` is None.
        """
        return self

    def held_after(self, last: float) -> "Schedule":
        """This schedule up to position ``last``, then its value there for good.

        A resume with ``--keep-schedule`` that trains past the epochs a schedule was
        fitted to gets this: the saved plan runs as planned, then its last value holds.
        """
        return HeldAfter(self, last)


class HeldAfter(Schedule):
    """``schedule`` until position ``last``, then ``schedule.value(last)``."""

    def __init__(self, schedule: Schedule, last: float) -> None:
        self.schedule, self.last, self.unit = schedule, last, schedule.unit

    def value(self, t: float) -> float:
        return self.schedule.value(min(t, self.last))

    def __repr__(self) -> str:
        return f"{self.schedule!r} held after {self.unit} {self.last:g}"


class Constant(Schedule):
    """The same ``value`` at every position."""
    def __init__(self, value: float = 1.0, *, unit: str = "epoch") -> None:
        self.constant = float(value)
        self.unit = unit

    def value(self, t: float) -> float:
        return self.constant

    def __repr__(self) -> str:
        return f"Constant({self.constant:g})"


class Ramp(Schedule):
    """``start_value`` up to ``start``, ``end_value`` from ``end`` on, interpolated between.

    Both ends are returned exactly (not recomputed), so a ramp to 0 reaches 0.
    """

    def __init__(self, *, start_value: float = 1.0, end_value: float = 0.0, start: float = 0.0,
                 end: float, unit: str = "epoch") -> None:
        if end <= start:
            raise ValueError(f"end ({end:g}) must be greater than start ({start:g})")
        self.start_value, self.end_value = float(start_value), float(end_value)
        self.start, self.end = float(start), float(end)
        self.unit = unit

    def value(self, t: float) -> float:
        if t <= self.start:
            return self.start_value
        if t >= self.end:
            return self.end_value
        return self.interpolate((t - self.start) / (self.end - self.start))

    def interpolate(self, fraction: float) -> float:
        """The value at ``fraction`` (0 to 1, exclusive) of the way from ``start`` to ``end``; subclasses define the curve."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({self.start_value:g}->{self.end_value:g} "
                f"over {self.unit}s {self.start:g}..{self.end:g})")


class Linear(Ramp):
    """A straight line from ``start_value`` to ``end_value``."""
    def interpolate(self, fraction: float) -> float:
        return self.start_value + (self.end_value - self.start_value) * fraction


class Exponential(Ramp):
    """Geometric interpolation: equal ratios per unit of position."""

    def __init__(self, *, start_value: float = 1.0, end_value: float = 0.01, start: float = 0.0,
                 end: float, unit: str = "epoch") -> None:
        check_exponential(start_value, end_value)
        super().__init__(start_value=start_value, end_value=end_value, start=start, end=end, unit=unit)

    def interpolate(self, fraction: float) -> float:
        return self.start_value * (self.end_value / self.start_value) ** fraction


class Cosine(Ramp):
    """Half a cosine from start_value to end_value (flat at both ends)."""

    def interpolate(self, fraction: float) -> float:
        return self.end_value + (self.start_value - self.end_value) * 0.5 * (1.0 + math.cos(math.pi * fraction))


class Warmup(Linear):
    """Linear warm-up to ``end_value``, then constant or another schedule.

    ``then`` is read at the same position from ``end`` on; give it points in
    the same unit (its value at ``end`` should match ``end_value``).
    """

    def __init__(self, *, start_value: float = 0.0, end_value: float = 1.0, start: float = 0.0,
                 end: float = 5.0, then: "Schedule | Mapping[str, Any] | None" = None,
                 unit: str = "epoch") -> None:
        super().__init__(start_value=start_value, end_value=end_value, start=start, end=end, unit=unit)
        self.then = build_schedule(then) if isinstance(then, Mapping) else then

    def value(self, t: float) -> float:
        if self.then is not None and t >= self.end:
            return self.then.value(t)
        return super().value(t)

    def for_run(self, epochs: int | None) -> "Schedule":
        if self.then is not None:
            self.then = self.then.for_run(epochs)
        return self


class Pix2PixLinear(Schedule):
    """The pix2pix reference's ``linear`` LR policy, as a multiplier of the initial LR.

    ``k`` counts the LambdaLR steps taken, one per finished epoch:
    ``1 - max(0, k + epoch_count - n_epochs) / (n_epochs_decay + 1)``, exactly
    the reference's rule. It is clamped at 0 so that training past
    ``n_epochs + n_epochs_decay`` epochs never gives a negative LR (the
    reference never gets there).

    ``n_epochs`` and ``n_epochs_decay`` may be left to the run (None): they
    then split ``loop.epochs`` (see :meth:`for_run`), so the decay ends with
    the run however long it is: 10 epochs are 5 + 5, 200 are the
    reference's 100 + 100.
    """

    unit = "epoch"

    def __init__(self, n_epochs: int | None = 100, n_epochs_decay: int | None = 100, epoch_count: int = 1) -> None:
        self.n_epochs, self.n_epochs_decay, self.epoch_count = n_epochs, n_epochs_decay, epoch_count

    def for_run(self, epochs: int | None) -> "Pix2PixLinear":
        """Fill in a null ``n_epochs`` (the first half, rounded up) and ``n_epochs_decay`` (the rest) from ``epochs``."""
        if self.n_epochs is not None and self.n_epochs_decay is not None:
            return self
        if epochs is None:
            raise ValueError("pix2pix_linear with n_epochs or n_epochs_decay null takes them from the run's "
                             "loop.epochs, which is not known here; give both numbers")
        n_epochs = self.n_epochs if self.n_epochs is not None else (
            max(epochs - self.n_epochs_decay, 0) if self.n_epochs_decay is not None else (epochs + 1) // 2)
        decay = self.n_epochs_decay if self.n_epochs_decay is not None else max(epochs - n_epochs, 0)
        return Pix2PixLinear(n_epochs, decay, self.epoch_count)

    def value(self, t: float) -> float:
        if self.n_epochs is None or self.n_epochs_decay is None:
            raise ValueError("pix2pix_linear: n_epochs and n_epochs_decay must be resolved with for_run(epochs)")
        factor = 1.0 - max(0, t + self.epoch_count - self.n_epochs) / float(self.n_epochs_decay + 1)
        return max(0.0, factor)

    def __repr__(self) -> str:
        return f"Pix2PixLinear(n_epochs={self.n_epochs}, n_epochs_decay={self.n_epochs_decay})"


def build_schedule(spec: "Mapping[str, Any] | float", registry: "Registry | None" = None, *,
                   epochs: int | None = None) -> Schedule:
    """A schedule from ``{name: ..., **options}`` (looked up in the registry), or a constant from a number.

    ``epochs`` is the run's ``loop.epochs``, for schedules given relative to
    the run's length (``pix2pix_linear`` with null epochs); without it such a
    schedule is a :class:`~nectargan_core.errors.ConfigError`.
    """
    if isinstance(spec, (int, float)):
        return Constant(spec)
    if registry is None:
        from nectargan_core import get_plugins

        registry = get_plugins().registry
    options = {k: v for k, v in spec.items() if k != "name"}
    if isinstance(options.get("then"), Mapping):
        options["then"] = build_schedule(options["then"], registry, epochs=epochs)
    component = registry.get("schedule", spec["name"], key="schedule")
    schedule = component.load()(**options)
    if not isinstance(schedule, Schedule):
        from nectargan_core import PluginError

        raise PluginError(f"schedule '{component.name}' ({component.provided_by}) built a {type(schedule).__name__}, "
                          "not a nectargan_losses.schedules.Schedule; its author must subclass Schedule (see "
                          "docs/plugins/contracts.md)")
    if schedule.unit not in ("epoch", "step"):
        from nectargan_core import PluginError

        raise PluginError(f"schedule '{component.name}' ({component.provided_by}) has unit {schedule.unit!r}; "
                          "a schedule's unit is 'epoch' or 'step'")
    try:
        return schedule.for_run(epochs)
    except ValueError as exc:
        from nectargan_core import ConfigError

        raise ConfigError(f"schedule '{spec['name']}': {exc}") from None


def lr_lambda(schedule: Schedule) -> Callable[[int], float]:
    """A ``LambdaLR`` multiplier reading ``schedule`` at the scheduler's step count.

    A plain function on purpose: LambdaLR stores the ``__dict__`` of callable
    objects in its state_dict, which would put schedule objects in checkpoints
    that must load with ``weights_only=True``.
    """

    def multiplier(k: int) -> float:
        return schedule.value(k)

    return multiplier


def lr_scheduler(optimizer: "torch.optim.Optimizer", schedule: Schedule) -> "torch.optim.lr_scheduler.LambdaLR":
    """``LambdaLR`` driven by ``schedule``: call ``.step()`` once per epoch or per
    optimisation step, as ``schedule.unit`` says; track it for resume."""
    from torch.optim.lr_scheduler import LambdaLR

    return LambdaLR(optimizer, lr_lambda=lr_lambda(schedule))


def refresh_lr(scheduler: "torch.optim.lr_scheduler.LambdaLR") -> None:
    """Set each param group's LR to what the schedule gives at the scheduler's position now.

    Call it after restoring a scheduler (and its optimizer) from a checkpoint:
    a schedule that follows the run's length (``pix2pix_linear`` with null
    epochs) may have changed with a resume's ``--set loop.epochs=...``, and the
    saved LR was computed from the old one. For an unchanged schedule this sets
    the same value the checkpoint holds.
    """
    lrs = [base * multiplier(scheduler.last_epoch)
           for multiplier, base in zip(scheduler.lr_lambdas, scheduler.base_lrs)]
    for group, lr in zip(scheduler.optimizer.param_groups, lrs):
        group["lr"] = lr
    scheduler._last_lr = lrs  # what get_last_lr() reports
