"""Which way a validation metric improves: as its plugin registered it, else told from its name.

``checkpoint.best_mode`` and early stopping used fixed defaults (``min`` for
best.pt, ``max`` for early stopping), so naming ``val/psnr`` for best.pt, or
``l1`` for early stopping, silently kept the worst checkpoint or stopped a run
that was improving. ``auto`` (the default) takes the direction a plugin
registered for the metric (``register_metrics``), else the one its name
implies, and refuses, at config time, a name that says neither.
"""

from __future__ import annotations

import re
from typing import Any

#: Name parts of metrics where a higher value is better.
HIGHER_IS_BETTER = frozenset({"psnr", "ssim", "msssim", "accuracy", "acc", "iou", "miou", "dice", "f1",
                              "precision", "recall", "auc", "score"})
#: Name parts of metrics where a lower value is better.
LOWER_IS_BETTER = frozenset({"l1", "l2", "mae", "mse", "rmse", "loss", "lpips", "fid", "kid", "nll", "error",
                             "distance"})


def direction(metric: str, mode: str = "auto", registry: Any = None) -> str:
    """``"min"`` or ``"max"``: ``mode`` itself, or for ``auto`` the direction of ``metric``.

    The name's last ``/`` part, split at every character that is not a
    letter or digit (``val/cycle_A_psnr`` -> ``cycle``, ``a``, ``psnr``), is
    looked up among the metrics registered in ``registry`` (compared the same
    way, in lower case): the longest registered name that ends it, else a
    registered name among its parts. Without a registered match, the parts
    are looked up in :data:`HIGHER_IS_BETTER` and :data:`LOWER_IS_BETTER`.
    Raises ``ValueError`` when they name neither or both directions.
    """
    if mode in ("min", "max"):
        return mode
    name = metric.rsplit("/", 1)[-1].lower()
    tokens = [t for t in re.split(r"[^0-9a-z]+", name) if t]
    registered = registered_directions(registry)
    # the longest registered name that ends the key (cycle_A_psnr_drop: psnr_drop before psnr), else any part
    for start in range(len(tokens)):
        if "_".join(tokens[start:]) in registered:
            return registered["_".join(tokens[start:])]
    found = {registered[t] for t in tokens if t in registered}
    if len(found) == 1:
        return found.pop()
    parts = set(tokens)
    higher, lower = parts & HIGHER_IS_BETTER, parts & LOWER_IS_BETTER
    if not found and bool(higher) != bool(lower):
        return "max" if higher else "min"
    raise ValueError(f"cannot tell from the name '{metric}' whether higher or lower is better")


def registered_directions(registry: Any) -> dict[str, str]:
    """Each registered metric's name (lowercase) and direction; none without a registry."""
    if registry is None:
        return {}
    return {"_".join(t for t in re.split(r"[^0-9a-z]+", component.name.lower()) if t): component.meta["direction"]
            for component in registry.all("metric")}


def improved(value: float, best: float | None, metric: str, mode: str = "auto", min_delta: float = 0.0,
             registry: Any = None) -> bool:
    """Whether ``value`` beats ``best`` (None: nothing yet) by more than ``min_delta``."""
    if best is None:
        return True
    if direction(metric, mode, registry) == "min":
        return value < best - min_delta
    return value > best + min_delta
