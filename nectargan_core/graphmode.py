"""Whether a run replays its training step as a CUDA graph: ``precision.cuda_graphs`` decided, no torch needed.

The decision is read before the trainer exists (the precision policy's
``auto`` depends on it: bf16 pays off for a replayed step, not an eager one)
and again by the step runner (:mod:`nectargan_core.stepgraph`) with what only
the set-up trainer knows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .errors import ConfigError

#: The values of ``precision.cuda_graphs``.
MODES = ("auto", "on", "off")
#: Eager steps of a batch shape before its first capture: optimizer state, cuDNN autotuning and lazily made
#: buffers (the image pools) exist by then, so the capture records steady-state work only.
WARMUP_STEPS = 3

@dataclass(frozen=True)
class GraphDecision:
    """Whether the step is captured, and why (the start summary prints ``text``)."""

    enabled: bool
    reason: str

    @property
    def text(self) -> str:
        return ("on: " if self.enabled else "off: ") + self.reason


def configured_mode(config: Any) -> str:
    """``precision.cuda_graphs`` of ``config``; ``auto`` for a trainer whose config has no such key."""
    mode = getattr(getattr(config, "precision", None), "cuda_graphs", "auto")
    return mode if mode in MODES else "auto"


def compiled(config: Any) -> bool:
    """Whether ``config`` asks torch.compile for the step (``precision.compile`` other than off)."""
    return getattr(getattr(config, "precision", None), "compile", "off") not in ("off", None)


def decide(mode: str, *, device_type: str, distributed: bool, accumulate: int, on_kit: bool,
           compiled: bool = False, other: tuple[str, ...] = ()) -> GraphDecision:
    """The capture mode of a run: ``auto`` captures where it is safe; ``on`` refuses what is not.

    ``on_kit``: the trainer declares a TrainerKit (the kit defers LR schedules
    to after each replay and makes its optimizers capturable). ``other``: more
    reasons the step cannot be captured (its optimizers, a host read the
    trainer declares), known once the trainer is set up.
    """
    if mode not in MODES:
        raise ConfigError(f"precision.cuda_graphs: {mode!r} is not one of {', '.join(MODES)}")
    if mode == "off":
        return GraphDecision(False, "precision.cuda_graphs is off")
    blockers = []
    if device_type != "cuda":
        blockers.append(f"CUDA graphs need a CUDA device (this run trains on {device_type})")
    if distributed:
        blockers.append("a distributed run (DDP) synchronises gradients from Python hooks")
    if accumulate > 1:
        blockers.append("gradient accumulation carries gradients from one step to the next")
    if not on_kit:
        blockers.append("the trainer does not use the TrainerKit (its updates are not known to the engine)")
    if compiled:
        blockers.append("precision.compile is on (torch.compile manages its own graphs)")
    blockers += other
    if not blockers:
        return GraphDecision(True, f"the step is captured after {WARMUP_STEPS} warm-up steps and replayed")
    if mode == "on":
        raise ConfigError(f"precision.cuda_graphs=on: {blockers[0]}; use auto (captures where it can) or off")
    return GraphDecision(False, blockers[0])


def planned(config: Any, device_type: str, world_size: int = 1, accumulate: int = 1) -> bool:
    """Whether a run of ``config`` will capture its step (before the trainer is built; no errors).

    For choices that depend on it, such as ``precision.amp: auto`` (bf16
    pays off for a replayed step, not for an eager one at batch 1).
    """
    try:
        return decide(configured_mode(config), device_type=device_type, distributed=world_size > 1,
                      accumulate=accumulate, on_kit=True, compiled=compiled(config)).enabled
    except ConfigError:
        return False
