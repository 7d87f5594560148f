"""``precision.compile``: torch.compile for the training step only.

The trainer tracks, checkpoints, validates and exports the original
``nn.Module`` objects; only the forward calls inside ``train_step`` go
through the compiled wrappers, which share the same parameters and buffers.
State dict keys therefore never get the ``_orig_mod.`` prefix that a
compiled module's ``state_dict()`` carries, and a checkpoint written with
compile on loads with it off (and the other way round).

Measured on the 2-core CPU VM (docs/performance.md, section 4): compiling
took 47 s (cold cache) and the compiled 128x1 step was 1.28x slower than
eager there, so the default is ``off``. The gradient penalty's critic call
stays eager (compiled double backward is not supported).
"""

from __future__ import annotations

from typing import Any

import torch

from nectargan_core import ConfigError


def compile_for_training(module: torch.nn.Module, mode: str, backend: str = "inductor") -> Any:
    """``module`` itself when ``mode`` is ``off``, else a compiled callable sharing its parameters.

    Compilation is lazy: the first training step pays for it (and a later
    change of ``requires_grad`` or of the input shape compiles once more).
    """
    if mode == "off":
        return module
    if not hasattr(torch, "compile"):
        raise ConfigError(f"precision.compile: {mode}: this torch ({torch.__version__}) has no torch.compile")
    return torch.compile(module, mode=None if mode == "default" else mode, backend=backend)
