"""Image metrics for validation and ``nectargan test``: L1, PSNR and SSIM.

Images arrive in the model's [-1, 1] range and are compared in [0, 1]
(so L1 is the mean absolute pixel error on a 0..1 scale and PSNR uses a data
range of 1). Per-image values stay on the device until :meth:`compute`.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterable, Iterator

import torch

# torchmetrics is imported where a metric is computed: importing it costs ~2 s here (scipy), and
# `nectargan predict` / export import this module only for to_unit and evaluation_mode.

METRICS = ("l1", "psnr", "ssim")
#: Which way each metric improves.
HIGHER_IS_BETTER = {"l1": False, "psnr": True, "ssim": True}


def to_unit(images: torch.Tensor) -> torch.Tensor:
    return ((images.float() + 1) / 2).clamp(0, 1)


def per_image(fake: torch.Tensor, real: torch.Tensor, names: Iterable[str] = METRICS) -> dict[str, torch.Tensor]:
    """Each metric for each image of the batch: ``{name: tensor of shape [B]}``."""
    from torchmetrics.functional.image import peak_signal_noise_ratio, structural_similarity_index_measure

    fake, real = to_unit(fake), to_unit(real)
    out: dict[str, torch.Tensor] = {}
    for name in names:
        if name == "l1":
            out[name] = (fake - real).abs().flatten(1).mean(dim=1)
        elif name == "psnr":
            out[name] = peak_signal_noise_ratio(fake, real, data_range=1.0, reduction="none", dim=(1, 2, 3))
        elif name == "ssim":
            out[name] = structural_similarity_index_measure(fake, real, data_range=1.0, reduction="none")
        else:
            raise ValueError(f"unknown metric {name!r}; known: {', '.join(METRICS)}")
    return out


class MetricAccumulator:
    """Sums per-image metrics on the device; one host transfer in :meth:`compute`."""

    def __init__(self, names: Iterable[str] = METRICS) -> None:
        self.names = list(names)
        self.sums: dict[str, torch.Tensor] = {}
        self.count = 0

    def update(self, fake: torch.Tensor, real: torch.Tensor) -> dict[str, torch.Tensor]:
        values = per_image(fake, real, self.names)
        for name, value in values.items():
            total = value.double().sum()
            self.sums[name] = self.sums[name] + total if name in self.sums else total
        self.count += fake.shape[0]
        return values

    def reduce(self, dist: Any, device: torch.device) -> None:
        """Sum the sums and counts of every process of a distributed run (one all-reduce)."""
        if not dist.enabled:
            return
        zero = torch.zeros((), dtype=torch.float64, device=device)
        totals = torch.stack([self.sums.get(n, zero).to(device) for n in self.names]
                             + [torch.tensor(float(self.count), dtype=torch.float64, device=device)])
        totals = dist.all_sum(totals)
        self.sums = dict(zip(self.names, totals[:-1].unbind()))
        self.count = int(totals[-1].item())

    def compute(self) -> dict[str, float]:
        if not self.count:
            return {}
        means = torch.stack([self.sums[n] for n in self.names]).cpu().tolist()
        return {name: value / self.count for name, value in zip(self.names, means)}


@contextlib.contextmanager
def evaluation_mode(module: torch.nn.Module, eval_mode: bool) -> Iterator[None]:
    """G in eval mode, or (``eval_mode=False``) in train mode with its BN running statistics restored after."""
    was_training = module.training
    saved = None
    if eval_mode:
        module.eval()
    else:
        module.train()
        saved = {name: buffer.clone() for name, buffer in module.named_buffers()}
    try:
        with torch.no_grad():
            yield
    finally:
        if saved is not None:
            for name, buffer in module.named_buffers():
                buffer.copy_(saved[name])
        module.train(was_training)
