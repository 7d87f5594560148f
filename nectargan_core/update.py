"""One optimizer update of a trainer: "this loss updates these networks with this optimizer".

An :class:`Update` is declared once, in ``Trainer.setup``, through the
trainer's kit (``self.kit.update(...)``, see :mod:`nectargan_core.kit`), and
used in every ``train_step``::

    with self.update_d:                  # D trainable, every other network frozen
        self.update_d.backward(loss_d)   # scaled for accumulation and fp16; flagged if not finite
                                         # leaving the block steps the optimizer on a group's last batch

:func:`optimizer_step` is the step itself (clip, non-finite skip, GradScaler,
zero the gradients), usable on its own by a trainer that runs its own update.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Sequence

import torch

if TYPE_CHECKING:  # pragma: no cover
    from .distributed import Distributed
    from .kit import TrainerKit


def optimizer_step(optimizer: torch.optim.Optimizer, parameters: Iterable[torch.nn.Parameter], *,
                   scaler: "torch.amp.GradScaler | None" = None, clip: float | None = None,
                   bad: torch.Tensor | None = None, dist: "Distributed | None" = None) -> torch.Tensor | None:
    """Clip, step and zero one optimizer, leaving the update out when ``bad`` says so.

    ``parameters`` are those whose gradients are clipped and checked (the
    update's networks). ``scaler`` is the update's GradScaler (fp16) or None.
    ``clip`` is the largest gradient norm (over all ``parameters`` together).

    ``bad`` (``loop.nonfinite: skip`` only) is a boolean device tensor: a loss
    of this update was not finite. Then the update is also left out when the
    gradients are not finite, and leaving it out is a true no-op (weights,
    optimizer moments and step count unchanged), without a host read on the
    default kernels: an enabled ``scaler`` gets the flag through a NaN in one
    gradient (it skips the step and lowers its scale, as for an fp16
    overflow); otherwise a fused optimizer takes it as ``found_inf``, as
    GradScaler passes it. Other kernels (foreach, single-tensor) have no such
    input, so the flag is read back once (one host sync, under ``skip`` only).
    With ``dist``, every process skips when any process's flag is set, so
    their weights stay equal (one all-reduce on the device).

    Returns, when ``bad`` was given and no enabled ``scaler`` took the flag,
    the device flag (a float 0-d tensor, 1.0: left out) of whether the update
    was left out, for a loss or a gradient that was not finite; else None.
    """
    params = list(parameters)
    if bad is not None and dist is not None:
        bad = dist.any_on_device(bad)
    if bad is not None and scaler is not None and scaler.is_enabled():
        grads = [p.grad for p in params if p.grad is not None]
        if grads:  # a NaN in one gradient: the scaler's own check then skips the step
            smallest = min(grads, key=torch.Tensor.numel)
            smallest.add_(torch.where(bad, float("nan"), 0.0).to(smallest.dtype))
        bad = None
    if bad is None:
        if clip is not None:
            if scaler is not None:
                scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(params, clip)
        if scaler is not None:
            scaler.step(optimizer)
            scaler.update()
        else:
            optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return None
    grads = [p.grad for p in params if p.grad is not None]
    if clip is not None:  # the norm that clipping computes anyway is non-finite with the gradients
        norm = torch.nn.utils.clip_grad_norm_(params, clip)
    else:
        norm = torch.nn.utils.get_total_norm(grads, norm_type=float("inf")) if grads else torch.zeros(())
    found_inf = (bad | ~torch.isfinite(norm.to(bad.device))).float()
    if optimizer.defaults.get("fused"):
        optimizer.found_inf = found_inf  # type: ignore[attr-defined]
        try:
            optimizer.step()
        finally:
            del optimizer.found_inf  # type: ignore[attr-defined]
    elif not found_inf.item():
        optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return found_inf


def unique_parameters(networks: Sequence[torch.nn.Module]) -> list[torch.nn.Parameter]:
    """The parameters of ``networks``, each once, in order (wrappers share their module's)."""
    seen: set[int] = set()
    params = []
    for network in networks:
        for param in network.parameters():
            if id(param) not in seen:
                seen.add(id(param))
                params.append(param)
    return params


class Update:
    """One optimizer's update of some networks, declared with ``TrainerKit.update``.

    Use it as a context manager around the losses that update those networks
    and call :meth:`backward` inside it. While the block runs, the parameters
    of every *other* network of the kit have ``requires_grad`` off, so no
    gradient reaches them; they are restored when it ends. On the last batch of
    an accumulation group, leaving the block steps the optimizer
    (:func:`optimizer_step`), then the scheduler, if it is a step-unit one.
    """

    def __init__(self, kit: "TrainerKit", networks: Sequence[torch.nn.Module], optimizer: torch.optim.Optimizer, *,
                 scaler: "torch.amp.GradScaler | None" = None, scheduler: Any = None,
                 scheduler_unit: str = "step", clip: float | None = None) -> None:
        self.kit = kit
        #: The modules this update trains, as the trainer calls them (DDP wrappers included).
        self.networks = tuple(networks)
        #: Their parameters, each once: what is clipped, checked and kept trainable.
        self.parameters = unique_parameters(self.networks)
        self.optimizer = optimizer
        self.scaler = scaler
        self.scheduler = scheduler
        #: When :attr:`scheduler` steps: ``"step"``, after each optimizer step; ``"epoch"``, at
        #: ``TrainerKit.step_epoch_schedulers`` (the trainer calls it in ``on_epoch_end``).
        self.scheduler_unit = scheduler_unit
        self.clip = clip
        #: Gradients of the current accumulation group are waiting for the optimizer step.
        self.pending = False
        #: Under ``loop.nonfinite: skip``: a device flag, set when a loss of the pending gradients was not finite.
        self._bad: torch.Tensor | None = None
        #: Under ``loop.nonfinite: skip``: a device count of the optimizer steps left out because the gradients
        #: were not finite while every loss was (read and reset by the engine at its logging interval).
        self.skipped: torch.Tensor | None = None
        self._others: list[torch.nn.Parameter] | None = None
        self._frozen: list[tuple[torch.nn.Parameter, bool]] = []
        self._entered_in: object = None

    @property
    def name(self) -> str:
        """The tracked names of the update's networks (``generator``), else their class names, joined by ``+``."""
        tracked = self.kit.trainer.stateful if self.kit.trainer is not None else {}
        names = []
        for network in self.networks:
            bare = getattr(network, "module", network)  # a DDP wrapper's module is the tracked one
            names.append(next((n for n, obj in tracked.items() if obj is bare or obj is network),
                              type(bare).__name__))
        return "+".join(names)

    def __repr__(self) -> str:
        names = ", ".join(type(n).__name__ for n in self.networks)
        return f"Update({names}; {type(self.optimizer).__name__})"

    # -- the block ---------------------------------------------------------
    def __enter__(self) -> "Update":
        step = self.kit.require_step("enter an update")
        if self.kit.active is not None:
            raise RuntimeError(f"{self!r}: another update ({self.kit.active!r}) is active; "
                               "updates do not nest: close its `with` block first")
        if self._entered_in is step:
            raise RuntimeError(f"{self!r}: entered twice in one step; put all of its losses in one `with` block "
                               "(its optimizer steps when the block ends)")
        self._entered_in = step
        if self._others is None:  # every other network's parameters (not shared with this update)
            own = {id(p) for p in self.parameters}
            self._others = [p for p in self.kit.parameters() if id(p) not in own]
        self._frozen = [(p, p.requires_grad) for p in self._others]
        for param, _ in self._frozen:
            param.requires_grad_(False)
        self.kit.activate(self)
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        try:
            step = self.kit.current_step
            if exc_type is None and self.pending and step is not None and step.last:
                self.step()
        finally:
            for param, flag in self._frozen:
                param.requires_grad_(flag)
            self._frozen = []
            self.kit.activate(None)

    # -- inside it ---------------------------------------------------------
    def backward(self, loss: torch.Tensor | None, *, retain_graph: bool = False) -> None:
        """Back-propagate ``loss`` into this update's networks (``None``: nothing to do).

        The loss is divided by the size of the batch's accumulation group and
        scaled by the GradScaler, if any. Under ``loop.nonfinite: skip`` a
        device-side flag notes whether it is finite (no host read). Call it
        inside the update's ``with`` block, once per loss or once for their sum.
        """
        if loss is None:
            return
        if self.kit.active is not self:
            raise RuntimeError(f"{self!r}: call backward() inside `with update:` (it freezes the other networks)")
        step = self.kit.current_step
        assert step is not None
        if step.skip:
            flag = ~torch.isfinite(loss.detach())
            self._bad = flag if self._bad is None else self._bad | flag
            step.flags.append(flag)
        if step.group.size != 1:
            loss = loss * step.group.scale
        if self.scaler is not None:
            loss = self.scaler.scale(loss)
        loss.backward(retain_graph=retain_graph)
        self.pending = True

    def step(self) -> None:
        """Step the optimizer on the pending gradients now, then a step-unit scheduler (the kit calls this)."""
        bad, self._bad, self.pending = self._bad, None, False
        dist = self.kit.trainer.dist
        if bad is not None and dist is not None:
            bad = dist.any_on_device(bad)
        left_out = optimizer_step(self.optimizer, self.parameters, scaler=self.scaler, clip=self.clip, bad=bad)
        if left_out is not None:  # only the gradients were not finite: counted, and the batch undone like a bad loss
            gradients_only = left_out * (~bad).float()
            if self.skipped is None:
                self.skipped = torch.zeros((), device=gradients_only.device)
            self.skipped.add_(gradients_only)  # in place, so that a captured step counts into the same tensor
            if self.kit.current_step is not None:
                self.kit.current_step.flags.append(left_out.bool())
        if self.scheduler is not None and self.scheduler_unit == "step":
            self.kit.run_or_defer(self.scheduler.step)  # while capturing a CUDA graph: after every replay
