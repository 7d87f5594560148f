"""Device selection, seeding, determinism and RNG state capture."""

from __future__ import annotations

import os
import random
from typing import Any

import torch

from .errors import NectarGANError


def resolve_device(spec: str) -> torch.device:
    """``auto`` picks cuda, then mps, then cpu; an unavailable device is a clear error."""
    if spec == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        mps = getattr(torch.backends, "mps", None)
        if mps is not None and mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    device = torch.device(spec)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise NectarGANError(f"run.device: '{spec}' requested but CUDA is not available; use run.device=cpu")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise NectarGANError(
                f"run.device: '{spec}' does not exist; this machine has {torch.cuda.device_count()} CUDA device(s)"
            )
    if device.type == "mps":
        mps = getattr(torch.backends, "mps", None)
        if mps is None or not mps.is_available():
            raise NectarGANError(f"run.device: '{spec}' requested but MPS is not available; use run.device=cpu")
    return device


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy (when installed) and torch (all devices)."""
    random.seed(seed)
    try:
        import numpy as np

        np.random.seed(seed % 2**32)
    except ImportError:  # pragma: no cover - numpy ships with torchvision
        pass
    torch.manual_seed(seed)


def set_deterministic(enabled: bool, benchmark: bool | None = None) -> None:
    """Deterministic algorithms (bit-exact CPU resume); errors if an op has none.

    Otherwise the fast paths of NVIDIA cards: cuDNN picks the fastest
    convolution for each shape by timing them (``cudnn.benchmark``; ``benchmark``
    False keeps its heuristics, None: on unless deterministic), and fp32
    convolutions and matrix products use TF32 tensor cores where the card has
    them (Ampere and later). TF32 convolutions are torch's default already (the
    reference trains with them); TF32 matrix products are not.
    """
    if enabled:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(enabled, warn_only=False)
    if torch.backends.cudnn.is_available():
        torch.backends.cudnn.deterministic = enabled
        torch.backends.cudnn.benchmark = not enabled if benchmark is None else benchmark
        torch.backends.cudnn.allow_tf32 = not enabled
    torch.backends.cuda.matmul.allow_tf32 = not enabled


def cudnn_benchmark(config: Any) -> bool | None:
    """``precision.cudnn_benchmark`` as :func:`set_deterministic` takes it (None for auto or no such key; the
    config refuses ``on`` with ``run.deterministic``)."""
    mode = getattr(getattr(config, "precision", None), "cudnn_benchmark", "auto")
    return None if mode == "auto" else mode == "on"


def rng_state() -> dict[str, Any]:
    """Every RNG's state, as tensors and plain values (loadable with weights_only=True)."""
    version, internal, gauss = random.getstate()
    state: dict[str, Any] = {
        "python": {"version": version, "state": list(internal), "gauss": gauss},
        "torch": torch.get_rng_state(),
    }
    try:
        import numpy as np

        name, keys, pos, has_gauss, cached = np.random.get_state()
        state["numpy"] = {
            "name": name,
            "keys": torch.from_numpy(keys.astype("int64")),
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "cached": float(cached),
        }
    except ImportError:  # pragma: no cover
        pass
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore what :func:`rng_state` saved; a wrong entry is reported by its name (``rng.numpy``), see ``entry``."""
    from .checkpoint import entry

    if not isinstance(state, dict):
        raise TypeError(f"not a mapping of generator states but {type(state).__name__}")
    with entry("python"):
        py = state["python"]
        if py["gauss"] is not None and not isinstance(py["gauss"], float):  # random.setstate takes anything here
            raise TypeError(f"gauss: not a number or null but {type(py['gauss']).__name__}")
        random.setstate((py["version"], tuple(py["state"]), py["gauss"]))
    with entry("torch"):
        torch.set_rng_state(state["torch"])
    if "numpy" in state:
        import numpy as np

        with entry("numpy"):
            np_state = state["numpy"]
            np.random.set_state(
                (
                    np_state["name"],
                    np_state["keys"].numpy().astype("uint32"),
                    np_state["pos"],
                    np_state["has_gauss"],
                    np_state["cached"],
                )
            )
    if "cuda" in state and torch.cuda.is_available():
        with entry("cuda"):
            torch.cuda.set_rng_state_all(state["cuda"])
