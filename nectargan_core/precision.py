"""The kit's precision policy: autocast and gradient scaling that work on every device.

A trainer on the kit runs its forward passes in ``with self.kit.autocast():``
and gives each optimizer ``self.kit.scaler()``; the policy is read from the
config's ``precision.amp`` (a trainer whose config has no ``precision``
section trains at full precision).

``amp: auto`` picks what is safe and never the slower choice: on CUDA, bf16
(fp16 on cards without bf16) when the engine replays the step as a CUDA graph,
and fp32 when it runs eagerly. Measured on an H200 (docs/performance.md,
"GPU levers"): replayed, bf16 took 0.94x the time of fp32 at 256x1 and 0.73x
at 256x16; eager, bf16 took 1.23x and 1.11x, because an eager step at these
sizes is bound by kernel launches and autocast adds casts (an earlier H100
run measured eager bf16 faster at 256x16, 0.74x: eager bf16 is not reliably
the faster choice, so ``auto`` does not take it). Full precision on CPU and
MPS. fp16 gets one GradScaler per optimizer (G and D have independent loss
scales); bf16 and fp32 need none, so their scalers are disabled no-ops with
the same interface.
"""

from __future__ import annotations

import contextlib
import sys
from typing import Any, ContextManager

import torch

from .config.sections import AMP_MODES, amp_mode, check_amp
from .errors import ConfigError


def resolve_amp(mode: str, device: torch.device, *, graphs: bool = False) -> torch.dtype | None:
    """The autocast dtype for ``mode`` on ``device``, or None for full precision.

    ``graphs``: the step is replayed as a CUDA graph (decides ``auto`` on CUDA).
    """
    if mode == "off":
        return None
    if mode == "auto":
        if device.type != "cuda" or not graphs:
            return None  # an eager step: autocast's casts cost more than its faster kernels save
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    if mode not in AMP_MODES:
        raise ConfigError(f"precision.amp: {mode!r} is not one of {', '.join(AMP_MODES)}")
    check_amp(mode, device.type)
    dtype = torch.bfloat16 if mode == "bf16" else torch.float16
    if dtype is torch.bfloat16 and device.type == "cpu" and not cpu_has_fast_bf16():
        print("warning: precision.amp: this CPU has no bf16 instructions that oneDNN uses (AVX-512 BF16/AMX); "
              "bf16 convolutions fall back to slow generic kernels (measured 5-36x slower than fp32 here); "
              "use precision.amp=off", file=sys.stderr)
    return dtype


def cpu_has_fast_bf16() -> bool:
    """Whether oneDNN has native bf16 kernels on this CPU."""
    check = getattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", None)
    try:
        return bool(check()) if check is not None else True
    except RuntimeError:
        return True


class Precision:
    """Autocast contexts and a GradScaler factory for one device and mode (a trainer reads its run's as
    ``self.kit.precision``)."""

    def __init__(self, mode: str, device: torch.device, *, graphs: bool = False) -> None:
        self.device = device
        self.mode = mode
        self.dtype = resolve_amp(mode, device, graphs=graphs)

    @classmethod
    def for_trainer(cls, trainer: Any, *, accumulate: int = 1) -> "Precision":
        """The precision of ``trainer``'s run: ``precision.amp`` (``off`` when its config has no such key), with
        ``auto`` decided by whether the engine will replay the step as a CUDA graph
        (:func:`nectargan_core.step_graphs_planned`). ``accumulate``: batches per optimizer step, when the
        config has no ``optim.gradient_accumulation``."""
        from .graphmode import planned

        config = trainer.config
        mode = amp_mode(config)
        optim = getattr(config, "optim", None)
        accumulate = getattr(optim, "gradient_accumulation", accumulate)
        graphs = planned(config, trainer.device.type, trainer.dist.world_size, accumulate)
        # What the engine will refuse to capture once the trainer is set up (see nectargan_core.stepgraph):
        # a non-fused Adam under loop.nonfinite: skip, and what the trainer itself declares.
        fused = getattr(optim, "implementation", "auto") in ("auto", "fused")
        if config.loop.nonfinite == "skip" and not fused or trainer.graph_blocker():
            graphs = False
        return cls(mode, trainer.device, graphs=graphs)

    @property
    def name(self) -> str:
        """The precision in effect, for logs and summaries: ``fp32``, ``bf16`` or ``fp16``."""
        return {None: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}[self.dtype]

    def autocast(self) -> ContextManager[Any]:
        """A context to run forward passes in: autocast to ``dtype``, or a no-op at full precision.

        Autocast's weight cache is off while a CUDA graph is being captured.
        """
        if self.dtype is None:
            return contextlib.nullcontext()
        # Autocast's cache of cast weights must not outlive a CUDA graph capture (torch's graph docs).
        capturing = self.device.type == "cuda" and torch.cuda.is_current_stream_capturing()
        return torch.autocast(device_type=self.device.type, dtype=self.dtype, cache_enabled=not capturing)

    def scaler(self) -> torch.amp.GradScaler:
        """A new GradScaler: active only for fp16."""
        return torch.amp.GradScaler(self.device.type, enabled=self.dtype is torch.float16)
