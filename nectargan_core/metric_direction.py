"""Which way a validation metric improves, told from its name.

``checkpoint.best_mode`` and early stopping used fixed defaults (``min`` for
best.pt, ``max`` for early stopping), so naming ``val/psnr`` for best.pt, or
``l1`` for early stopping, silently kept the worst checkpoint or stopped a run
that was improving. ``auto`` (the default) takes the direction from the
metric's name and refuses, at config time, a name that does not say it.
"""

from __future__ import annotations

import re

#: Name parts of metrics where a higher value is better.
HIGHER_IS_BETTER = frozenset({"psnr", "ssim", "msssim", "accuracy", "acc", "iou", "miou", "dice", "f1",
                              "precision", "recall", "auc", "score"})
#: Name parts of metrics where a lower value is better.
LOWER_IS_BETTER = frozenset({"l1", "l2", "mae", "mse", "rmse", "loss", "lpips", "fid", "kid", "nll", "error",
                             "distance"})


def direction(metric: str, mode: str = "auto") -> str:
    """``"min"`` or ``"max"``: ``mode`` itself, or for ``auto`` the direction ``metric``'s name implies.

    The name's last ``/`` part is split at every character that is not a
    letter or digit (``val/cycle_psnr`` -> ``cycle``, ``psnr``); the parts
    are looked up in :data:`HIGHER_IS_BETTER` and :data:`LOWER_IS_BETTER`.
    Raises ``ValueError`` when they name neither or both directions.
    """
    if mode in ("min", "max"):
        return mode
    parts = set(re.split(r"[^0-9a-z]+", metric.rsplit("/", 1)[-1].lower())) - {""}
    higher, lower = parts & HIGHER_IS_BETTER, parts & LOWER_IS_BETTER
    if bool(higher) != bool(lower):
        return "max" if higher else "min"
    raise ValueError(f"cannot tell from the name '{metric}' whether higher or lower is better")


def improved(value: float, best: float | None, metric: str, mode: str = "auto", min_delta: float = 0.0) -> bool:
    """Whether ``value`` beats ``best`` (None: nothing yet) by more than ``min_delta``."""
    if best is None:
        return True
    if direction(metric, mode) == "min":
        return value < best - min_delta
    return value > best + min_delta
