"""The trainer kit: multi-network, multi-optimizer GAN steps, right for every trainer.

A GAN step updates several networks with several optimizers, and doing that
correctly at scale takes more than ``loss.backward(); opt.step()``: gradient
accumulation groups (a short last group at the end of an epoch included), DDP
``no_sync`` while accumulating, one GradScaler per optimizer (fp16), gradient
clipping, freezing the networks not being updated, leaving out the update of
a batch whose loss is not finite without a host sync (restoring its BatchNorm
statistics), LR schedulers stepped per step or per epoch, and every process
of a distributed run agreeing. The kit does all of it, the same way for every
trainer, in the spirit of Accelerate's ``accumulate()``/``backward()`` and
Lightning's manual optimization (``toggle_optimizer``)::

    class MyTrainer(Trainer):
        kit = TrainerKit()                      # this trainer honours loop.nonfinite: skip

        def setup(self):
            ...
            self.kit.accumulate = cfg.accumulate
            self.update_d = self.kit.update(self.d_train, self.opt_d)
            self.update_g = self.kit.update(self.g_train, self.opt_g, scheduler=self.sched_g)

        @hookimpl
        def train_step(self, batch, batch_idx):
            with self.kit.step(batch_idx):
                fake = self.g_train(z)
                with self.update_d:
                    self.update_d.backward(d_loss(self.d_train(real), self.d_train(fake.detach())))
                with self.update_g:
                    self.update_g.backward(g_loss(self.d_judge(fake)))
            return {...}

Declaring ``kit = TrainerKit()`` on the class adds ``"nonfinite_skip"`` to
the trainer's ``capabilities`` (see :mod:`nectargan_core.capabilities`), so
the config may ask for ``loop.nonfinite: skip``; ``self.kit`` is then each
trainer object's own kit.
"""

from __future__ import annotations

import contextlib
import warnings
from typing import TYPE_CHECKING, Any, ClassVar, Sequence

import torch

from .accumulation import AccumulationGroup
from .capabilities import NONFINITE_SKIP
from .update import Update, unique_parameters

if TYPE_CHECKING:  # pragma: no cover
    from .precision import Precision
    from .trainer import Trainer

def reads_device_lr(optimizer: torch.optim.Optimizer, group: dict[str, Any]) -> bool:
    """Whether a captured step of ``optimizer`` reads ``group``'s learning rate from a device tensor.

    True for Adam and AdamW themselves (torch documents a tensor LR for them
    with ``capturable=True`` or ``fused=True``; a subclass may step otherwise)
    over parameters on a capture device, with a number as the LR (a tensor LR
    a trainer set is read on the device already). The kit then hands the step
    a device copy of the LR while capturing and refreshes it before each
    replay, so a schedule that changes it needs no new capture.
    """
    return (type(optimizer) in (torch.optim.Adam, torch.optim.AdamW) and "capturable" in group
            and not isinstance(group["lr"], torch.Tensor)
            and all(p.device.type != "cpu" for p in group["params"]))


class Step:
    """One training batch, as a context: ``with self.kit.step(batch_idx) as step:`` around ``train_step``'s body.

    Entering it: while the batch is not the last of its accumulation group,
    the DDP wrappers among the updates' networks stop synchronising gradients
    (``no_sync``); under ``loop.nonfinite: skip`` the networks' buffers
    (BatchNorm statistics) are saved. Leaving it: on a group's last batch, an
    update that has gradients of the group but was not entered in this batch
    steps; under ``skip``, when a loss of the batch was not finite in any
    process, the buffers are restored.
    """

    def __init__(self, kit: "TrainerKit", group: AccumulationGroup, skip: bool) -> None:
        self.kit = kit
        #: This batch's place in its accumulation group (``group.last``: the optimizers step).
        self.group = group
        #: Whether ``loop.nonfinite`` is ``skip``: losses are flagged and a bad batch is undone.
        self.skip = skip
        #: Device flags of this batch's losses (under ``skip``).
        self.flags: list[torch.Tensor] = []
        self._saved: list[tuple[torch.Tensor, torch.Tensor]] = []
        self._stack = contextlib.ExitStack()

    @property
    def last(self) -> bool:
        """Whether this batch ends its accumulation group (the optimizers step after it)."""
        return self.group.last

    def __enter__(self) -> "Step":
        kit = self.kit
        if kit._step is not None:
            raise RuntimeError("TrainerKit.step: steps do not nest")
        if self.skip:
            self._saved = [(b, b.clone()) for b in kit._buffers()]
        if not self.group.last:
            for wrapper in kit._wrappers():
                self._stack.enter_context(wrapper.no_sync())
        kit._step = self
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        kit = self.kit
        try:
            if exc_type is None and self.group.last:
                for update in kit.updates:
                    if update.pending:
                        update.step()
        finally:
            kit._step = None
            self._stack.close()
        if exc_type is None and self.flags:
            bad = kit._bound("end a step").dist.any_on_device(torch.stack(self.flags).any())
            for buffer, copy in self._saved:
                buffer.copy_(torch.where(bad, copy, buffer))


class TrainerKit:
    """Declare as a class attribute of a Trainer (``kit = TrainerKit()``); use ``self.kit``.

    Read from a trainer object, the attribute is that trainer's own kit (made
    on first use); read from the class, it is the declaration.
    """

    capabilities: ClassVar[frozenset[str]] = frozenset({NONFINITE_SKIP})
    """What a trainer that declares the kit supports (added to its ``capabilities``)."""

    def __init__(self) -> None:
        #: The trainer this kit serves (None on the class-level declaration).
        self.trainer: "Trainer | None" = None
        self.updates: list[Update] = []
        self._accumulate = 1
        self._name: str | None = None
        self._step: Step | None = None
        self._active: Update | None = None
        self._params: list[torch.nn.Parameter] | None = None
        self._ddp: list[Any] | None = None
        #: While a step is captured as a CUDA graph: the Python work to redo after each replay
        #: (step-unit LR schedules), else None.
        self._deferred: list[Any] | None = None
        self._capturable: list[tuple[dict[str, Any], Any]] = []
        #: Device learning rates that captured steps read, by param group (see :func:`reads_device_lr`), each with
        #: the value last written to it (kept for the run: a graph reads its tensor's memory, not a reference);
        #: and the groups whose number LR is swapped out while capturing.
        self._device_lrs: dict[int, tuple[dict[str, Any], torch.Tensor, float]] = {}
        self._swapped_lrs: list[tuple[dict[str, Any], Any]] = []
        self._precision: "Precision | None" = None

    # -- the declaration -----------------------------------------------------
    def __set_name__(self, owner: type, name: str) -> None:
        self._name = name
        owner.capabilities = frozenset(getattr(owner, "capabilities", frozenset())) | self.capabilities

    def __get__(self, trainer: Any, owner: type | None = None) -> "TrainerKit":
        if trainer is None:
            return self
        if self._name is None:
            raise RuntimeError("TrainerKit: declare it in the Trainer class body (kit = TrainerKit())")
        kit = TrainerKit()
        kit.trainer = trainer
        trainer.__dict__[self._name] = kit  # stored on the object: later reads find it there
        return kit

    # -- set-up ---------------------------------------------------------------
    @property
    def accumulate(self) -> int:
        """Batches whose gradients are summed per optimizer step (default 1); set it in ``setup``."""
        return self._accumulate

    @accumulate.setter
    def accumulate(self, every: int) -> None:
        if isinstance(every, bool) or not isinstance(every, int) or every < 1:
            raise ValueError(f"TrainerKit.accumulate must be an int >= 1 (got {every!r})")
        self._accumulate = every

    # -- precision --------------------------------------------------------------
    @property
    def precision(self) -> "Precision":
        """The run's precision policy (:class:`nectargan_core.Precision`), decided on first read.

        From the config's ``precision.amp`` (a config without it: full
        precision); ``auto`` takes bf16 on CUDA only where the engine will
        replay the step as a CUDA graph. Read it in ``setup`` after setting
        :attr:`accumulate` and before making the optimizers' scalers.
        """
        if self._precision is None:
            from .precision import Precision

            self._precision = Precision.for_trainer(self._bound("read the precision"), accumulate=self._accumulate)
        return self._precision

    def autocast(self) -> Any:
        """A context to run forward passes in: autocast to the run's mixed-precision dtype, or a no-op at fp32.

        ``with self.kit.autocast(): fake = self.g_train(a)``. Losses may be
        computed inside it; backward passes (``update.backward``) go outside.
        """
        return self.precision.autocast()

    def scaler(self) -> "torch.amp.GradScaler":
        """A new GradScaler for one optimizer: active under fp16 (each optimizer needs its own loss scale), a
        no-op with the same interface otherwise. Track it (``self.track``) and pass it to :meth:`update`."""
        return self.precision.scaler()

    def update(self, networks: torch.nn.Module | Sequence[torch.nn.Module], optimizer: torch.optim.Optimizer, *,
               scaler: "torch.amp.GradScaler | None" = None, scheduler: Any = None,
               scheduler_unit: str = "step", clip: float | None = None) -> Update:
        """Declare that ``optimizer`` updates ``networks``; returns the :class:`Update` to train with.

        ``networks`` is a module or a sequence of modules, as the trainer calls
        them in training: pass the DDP wrappers ``self.parallel`` returned, so
        the kit can skip their gradient synchronisation while accumulating.
        ``scaler`` is this update's own GradScaler (fp16; track it), or None.
        ``scheduler`` is this update's LR scheduler, or None; ``scheduler_unit``
        says when it steps: ``"step"``, after every optimizer step of this
        update; ``"epoch"``, at :meth:`step_epoch_schedulers`.
        ``clip`` is the largest norm of the networks' gradients, or None.
        """
        self._bound("declare an update")
        if scheduler_unit not in ("step", "epoch"):
            raise ValueError(f"TrainerKit.update: scheduler_unit must be 'step' or 'epoch' (got {scheduler_unit!r})")
        nets = [networks] if isinstance(networks, torch.nn.Module) else list(networks)
        if not nets or not all(isinstance(n, torch.nn.Module) for n in nets):
            raise TypeError("TrainerKit.update: networks must be a torch.nn.Module or a sequence of them")
        update = Update(self, nets, optimizer, scaler=scaler, scheduler=scheduler, scheduler_unit=scheduler_unit,
                        clip=clip)
        self.updates.append(update)
        self._params = self._ddp = None
        for other in self.updates:
            other._others = None
        return update

    # -- what the engine asks -------------------------------------------------
    @property
    def mid_group(self) -> bool:
        """Whether gradients of an unfinished accumulation group are waiting for their optimizer step.

        Gradients are not part of a checkpoint, so the engine writes one (and
        stops) only when this is false: at the end of a group.
        """
        return any(update.pending for update in self.updates)

    def take_skips(self) -> list[tuple[str, torch.Tensor]]:
        """The device counts of updates left out for non-finite gradients since the last call, by update.

        Under ``loop.nonfinite: skip`` only (else empty). The counts stay on
        the device; the engine reads them with the losses at its logging
        interval, so counting costs no host read.
        """
        counts = [(u.name, u.skipped.clone()) for u in self.updates if u.skipped is not None]
        for update in self.updates:
            if update.skipped is not None:
                update.skipped.zero_()  # in place: a captured step adds to this very tensor
        return counts

    def finish_group(self) -> None:
        """Step the updates whose gradients wait for a group that the epoch ended (the engine calls this).

        Only a train loader without a length can end an epoch inside a group
        (its groups all have ``accumulate`` batches): the short group's
        gradients, each batch weighted ``1/accumulate``, step at the epoch's end.
        """
        for update in self.updates:
            if update.pending:
                update.step()

    # -- what the trainer asks at an epoch's end ----------------------------------
    def step_epoch_schedulers(self) -> None:
        """Step the updates' epoch-unit schedulers (``scheduler_unit="epoch"``), once; call it in ``on_epoch_end``.

        The engine writes the epoch's checkpoint after that hook, so it holds
        the stepped schedulers. Step-unit schedulers are left alone: they step
        with their optimizer.
        """
        for update in self.updates:
            if update.scheduler is not None and update.scheduler_unit == "epoch":
                with warnings.catch_warnings():
                    # A resume that ends an epoch without a step in this process (an emergency checkpoint taken
                    # at the epoch's end, or --data-changed over fewer batches): the optimizer stepped before.
                    warnings.filterwarnings("ignore", message=r"Detected call of `lr_scheduler\.step\(\)` before")
                    update.scheduler.step()

    # -- the step -------------------------------------------------------------
    def step(self, batch_idx: int) -> Step:
        """The context of training batch ``batch_idx`` (the hook's argument): see :class:`Step`."""
        trainer = self._bound("start a step")
        group = AccumulationGroup.of(batch_idx, self._accumulate, trainer.num_batches())
        return Step(self, group, skip=trainer.config.loop.nonfinite == "skip")

    # -- what an Update asks of its kit -------------------------------------------------
    @property
    def current_step(self) -> Step | None:
        """The step being trained (inside ``with self.kit.step(...)``), or None."""
        return self._step

    def require_step(self, what: str) -> Step:
        """The step being trained; a RuntimeError saying that ``what`` needs one when there is none."""
        return self._current_step(what)

    @property
    def active(self) -> Update | None:
        """The update whose ``with`` block is open (the others' networks are frozen meanwhile), or None."""
        return self._active

    def activate(self, update: Update | None) -> None:
        """Mark ``update`` as the open update (None: none is)."""
        self._active = update

    def parameters(self) -> list[torch.nn.Parameter]:
        """Every parameter of every update's networks, each once."""
        return self._parameters()

    def run_or_defer(self, action: Any) -> None:
        """Call ``action`` now, or, while a step is being captured as a CUDA graph, after every replay of it.

        Python work a step does (stepping an LR scheduler) is not part of a
        graph; the runner redoes what was deferred after each replay.
        """
        if self._deferred is not None:
            self._deferred.append(action)
        else:
            action()

    # -- CUDA graph capture (nectargan_core.stepgraph) ------------------------------
    def begin_capture(self) -> None:
        """Prepare for capturing a step: capturable optimizers, gradients made inside the graph.

        Optimizers that have a capturable mode (Adam, AdamW, ...) take it while
        the step is captured; their step counts move to the device, where a
        captured step can advance them. Adam and AdamW read their learning
        rate from a device tensor in the graph (:meth:`load_learning_rates`
        keeps it current). Step-unit LR schedules are not stepped inside the
        graph (a replay would not step them): their steps are recorded and
        redone after every replay.
        """
        self._deferred = []
        self._capturable = []
        self._swapped_lrs = []
        trainer = self._bound("capture a step")
        for update in self.updates:
            if update.skipped is None and trainer.config.loop.nonfinite == "skip":
                update.skipped = torch.zeros((), device=trainer.device)  # made here: a capture would re-zero it

            optimizer = update.optimizer
            optimizer.zero_grad(set_to_none=True)
            for group in optimizer.param_groups:
                if reads_device_lr(optimizer, group):
                    self._swapped_lrs.append((group, group["lr"]))
                    group["lr"] = self._device_lr(group)
                if "capturable" in group and all(p.device.type != "cpu" for p in group["params"]):
                    self._capturable.append((group, group["capturable"]))
                    group["capturable"] = True
                    for param in group["params"]:
                        step = optimizer.state.get(param, {}).get("step")
                        if isinstance(step, torch.Tensor) and step.device != param.device:
                            optimizer.state[param]["step"] = step.to(param.device)

    def end_capture(self, failed: bool = False) -> list[Any]:
        """The Python work recorded while capturing (empty when ``failed``); the kit is ready for eager steps.

        After a failed capture nothing of the step ran: pending gradients,
        flags and the step's state are dropped, and the batch runs again eagerly.
        """
        deferred, self._deferred = self._deferred or [], None
        for group, flag in self._capturable:
            group["capturable"] = flag
        self._capturable = []
        for group, lr in self._swapped_lrs:  # schedulers, checkpoints and eager steps see the number again
            group["lr"] = lr
        self._swapped_lrs = []
        if failed:
            self._step = self._active = None
            for update in self.updates:
                update.pending, update._bad = False, None
                update._entered_in = None
                update.optimizer.zero_grad(set_to_none=True)
            return []
        return deferred

    def load_learning_rates(self) -> None:
        """Write the learning rates that changed since the last replay into the device tensors captured steps read.

        The engine calls this before every replay: a schedule (per epoch or
        per step) set a new number in the optimizer's param group; the fill
        is queued on the GPU, with no host sync.
        """
        for key, (group, tensor, written) in self._device_lrs.items():
            lr = group["lr"]
            if lr != written and not isinstance(lr, torch.Tensor):
                tensor.fill_(lr)
                self._device_lrs[key] = (group, tensor, lr)

    def _device_lr(self, group: dict[str, Any]) -> torch.Tensor:
        """The device tensor ``group``'s captured steps read its learning rate from (made on first use).

        Made before the capture (a tensor made inside it would live in the
        graph's memory pool); float32, as torch's fused kernels read it. A
        capture reads no value: :meth:`load_learning_rates` brings the tensor
        up to date before the replay that follows it.
        """
        known = self._device_lrs.get(id(group))
        if known is not None and known[0] is group:
            return known[1]
        lr = float(group["lr"])
        tensor = torch.tensor(lr, dtype=torch.float32, device=group["params"][0].device)
        self._device_lrs[id(group)] = (group, tensor, lr)
        return tensor

    # -- internals ------------------------------------------------------------
    def _bound(self, what: str) -> "Trainer":
        if self.trainer is None:
            raise RuntimeError(f"cannot {what} on the TrainerKit declaration; use it through the trainer "
                               "object (self.kit), with `kit = TrainerKit()` declared on the Trainer class")
        return self.trainer

    def _current_step(self, what: str) -> Step:
        if self._step is None:
            raise RuntimeError(f"cannot {what} outside `with self.kit.step(batch_idx):`")
        return self._step

    def _parameters(self) -> list[torch.nn.Parameter]:
        """Every parameter of every update's networks, each once."""
        if self._params is None:
            self._params = unique_parameters([n for u in self.updates for n in u.networks])
        return self._params

    def _buffers(self) -> list[torch.Tensor]:
        seen: set[int] = set()
        buffers = []
        for update in self.updates:
            for network in update.networks:
                for buffer in network.buffers():
                    if id(buffer) not in seen:
                        seen.add(id(buffer))
                        buffers.append(buffer)
        return buffers

    def _wrappers(self) -> list[Any]:
        """The DistributedDataParallel modules among (or inside) the updates' networks."""
        if self._ddp is None:
            from torch.nn.parallel import DistributedDataParallel

            seen: set[int] = set()
            self._ddp = []
            for update in self.updates:
                for network in update.networks:
                    for module in network.modules():
                        if isinstance(module, DistributedDataParallel) and id(module) not in seen:
                            seen.add(id(module))
                            self._ddp.append(module)
        return self._ddp


def kits_of(trainer: Any) -> list[TrainerKit]:
    """The kits a trainer object uses (those of its ``kit = TrainerKit()`` declarations already read)."""
    return [value for value in vars(trainer).values() if isinstance(value, TrainerKit)]
