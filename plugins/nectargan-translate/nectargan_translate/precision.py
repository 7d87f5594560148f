"""Autocast and gradient scaling that work on every device.

``amp: auto`` picks what is safe and fast per device: bf16 on CUDA devices
that support it (else fp16), and full precision on CPU and MPS. fp16 gets one
GradScaler per optimizer (G and D have independent loss scales); bf16 and
fp32 need none, so their scalers are disabled no-ops with the same interface.
"""

from __future__ import annotations

import contextlib
import sys
from typing import Any, ContextManager

import torch

from nectargan_core.errors import ConfigError


def resolve_amp(mode: str, device: torch.device) -> torch.dtype | None:
    """The autocast dtype for ``mode`` on ``device``, or None for full precision."""
    if mode == "off":
        return None
    if mode == "auto":
        if device.type == "cuda":
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return None
    dtype = torch.bfloat16 if mode == "bf16" else torch.float16
    if dtype is torch.float16 and device.type == "cpu":
        raise ConfigError("precision.amp: fp16 autocast is not supported for training on CPU; use bf16 or off")
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
    """Autocast contexts and a GradScaler factory for one device and mode."""

    def __init__(self, mode: str, device: torch.device) -> None:
        self.device = device
        self.dtype = resolve_amp(mode, device)

    @property
    def name(self) -> str:
        return {None: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}[self.dtype]

    def autocast(self) -> ContextManager[Any]:
        if self.dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=self.dtype)

    def scaler(self) -> torch.amp.GradScaler:
        """A new GradScaler: active only for fp16."""
        return torch.amp.GradScaler(self.device.type, enabled=self.dtype is torch.float16)
