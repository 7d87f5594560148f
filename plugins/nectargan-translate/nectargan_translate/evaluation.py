"""Image metrics for validation and ``nectargan test``: L1, PSNR, SSIM, and any a plugin registers.

Images arrive in the model's [-1, 1] range and are compared in [0, 1]
(so L1 is the mean absolute pixel error on a 0..1 scale and PSNR uses a data
range of 1). A metric is a function ``metric(fake, real) -> Tensor[batch]``
of one value per image, registered with ``register_metrics`` and the way it
improves; a split's score is the mean of its images' values. Per-image
values stay on the device until :meth:`MetricAccumulator.compute`.
"""

from __future__ import annotations

import contextlib
import functools
from typing import Any, Callable, Iterable, Iterator

import torch

from nectargan_core import PluginError

# torchmetrics is imported where a metric is computed: importing it costs ~2 s here (scipy), and
# `nectargan predict` / export import this module only for to_unit and evaluation_mode.

#: The metrics every translation run is scored with (registered by this plugin, with their directions).
METRICS = ("l1", "psnr", "ssim")


def to_unit(images: torch.Tensor) -> torch.Tensor:
    return ((images.float() + 1) / 2).clamp(0, 1)


def l1(fake: torch.Tensor, real: torch.Tensor) -> torch.Tensor:
    """Mean absolute pixel error of each image, on the 0..1 scale (lower is better)."""
    return (fake - real).abs().flatten(1).mean(dim=1)


def psnr(fake: torch.Tensor, real: torch.Tensor) -> torch.Tensor:
    """Peak signal-to-noise ratio of each image in dB, data range 1 (higher is better)."""
    from torchmetrics.functional.image import peak_signal_noise_ratio

    return peak_signal_noise_ratio(fake, real, data_range=1.0, reduction="none", dim=(1, 2, 3))


#: SSIM's Gaussian window: 11 pixels, sigma 1.5 (Wang et al., 2004).
SSIM_WINDOW, SSIM_SIGMA = 11, 1.5
#: Larger images are scored in bands of rows of about this many pixels: SSIM's intermediate maps take about
#: 700 bytes a pixel, 4 GB for a 6-megapixel photograph scored at once.
SSIM_BAND_PIXELS = 2 ** 19


def ssim(fake: torch.Tensor, real: torch.Tensor) -> torch.Tensor:
    """Structural similarity of each image, data range 1 (higher is better): torchmetrics' SSIM.

    The standard Gaussian window (11 pixels, sigma 1.5). Images of more than
    ``SSIM_BAND_PIXELS`` are scored in bands of rows, each band with the rows
    around it as context, so the scores are the same as scored whole and the
    memory is bounded by the band. An image narrower or shorter than the
    window (a strip of a photograph, a 1-pixel line) is scored with the
    largest odd window that fits, its sigma scaled alike, rather than not at all.
    """
    height, width = fake.shape[-2:]
    side = min(height, width)
    window = SSIM_WINDOW if side >= SSIM_WINDOW else max(1, side - (1 - side % 2))
    sigma = SSIM_SIGMA * window / SSIM_WINDOW
    pad = (window - 1) // 2
    rows = max(SSIM_BAND_PIXELS // max(width, 1), 4 * pad + 1)
    if height * width <= SSIM_BAND_PIXELS or rows >= height or not pad:
        return _ssim_maps(fake, real, sigma, window)[0]
    import torch.nn.functional as nnf

    whole_map = _ssim_averages_whole_map()
    padded = [nnf.pad(image, (pad, pad, pad, pad), mode="reflect") for image in (fake, real)]
    total = torch.zeros(fake.shape[0], dtype=torch.float64, device=fake.device)
    count = 0
    for start in range(0, height, rows):
        end = min(start + rows, height)
        # the band's map at the image's own positions, each computed from its real neighbourhood
        band = _ssim_maps(*(image[..., start:end + 2 * pad, :] for image in padded), sigma, window)[1]
        band = band[..., pad:pad + end - start, pad:pad + width]
        if not whole_map:  # torchmetrics versions that average only where the window lies inside the image
            band = band[..., max(pad - start, 0):band.shape[-2] - max(end - (height - pad), 0), pad:width - pad]
        total += band.double().sum(dim=(1, 2, 3))
        count += band[0].numel()
    return (total / count).to(fake.dtype)


def _ssim_maps(fake: torch.Tensor, real: torch.Tensor, sigma: float,
               window: int) -> tuple[torch.Tensor, torch.Tensor]:
    """torchmetrics' SSIM per image and its full map (``[B, C, H, W]``)."""
    from torchmetrics.functional.image import structural_similarity_index_measure

    return structural_similarity_index_measure(fake, real, data_range=1.0, reduction="none", sigma=sigma,
                                               kernel_size=window, return_full_image=True)


@functools.lru_cache(maxsize=1)
def _ssim_averages_whole_map() -> bool:
    """Whether this torchmetrics averages SSIM over its whole map (1.x, recent) or only where the window lies
    inside the image (older releases); banded scoring averages the same positions."""
    a = torch.linspace(0, 1, 24 * 24).reshape(1, 1, 24, 24)
    value, full = _ssim_maps(a, a.flip(-1), SSIM_SIGMA, SSIM_WINDOW)
    return bool(torch.isclose(value[0], full.mean(), rtol=0, atol=1e-6))


BUILTIN: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {"l1": l1, "psnr": psnr, "ssim": ssim}


def metric_functions(names: Iterable[str], registry: Any = None) -> dict[str, tuple[Callable[..., torch.Tensor], str]]:
    """The function of each metric in ``names``, and its label for messages: this plugin's own, else the registered one.

    L1, PSNR and SSIM are always this plugin's (another plugin's metric of the
    same name is reached by its qualified name, ``dist:l1``), so a run's
    scores never change meaning because a plugin was installed.
    """
    functions = {}
    for name in names:
        if name in BUILTIN:
            functions[name] = BUILTIN[name], f"metric '{name}'"
        elif registry is not None:
            component = registry.get("metric", name)
            functions[name] = component.load(), f"metric '{name}' ({component.provided_by})"
        else:
            raise ValueError(f"unknown metric {name!r}; known: {', '.join(METRICS)}")
    return functions


def per_image(fake: torch.Tensor, real: torch.Tensor, names: Iterable[str] = METRICS,
              registry: Any = None) -> dict[str, torch.Tensor]:
    """Each metric for each image of the batch: ``{name: tensor of shape [B]}``."""
    fake, real = to_unit(fake), to_unit(real)
    out: dict[str, torch.Tensor] = {}
    for name, (function, label) in metric_functions(names, registry).items():
        value = function(fake, real)
        if not isinstance(value, torch.Tensor) or value.shape != (fake.shape[0],):
            shown = tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
            raise PluginError(f"{label}: returned {shown} for a batch of {fake.shape[0]} images; a metric "
                              f"returns one value per image, a tensor of shape [{fake.shape[0]}] (see "
                              "docs/hooks.md#register_metrics)")
        out[name] = value
    return out


class MetricAccumulator:
    """Sums per-image metrics on the device; one host transfer in :meth:`compute`."""

    def __init__(self, names: Iterable[str] = METRICS, registry: Any = None) -> None:
        self.names = list(names)
        self.registry = registry
        self.sums: dict[str, torch.Tensor] = {}
        self.count = 0

    def update(self, fake: torch.Tensor, real: torch.Tensor) -> dict[str, torch.Tensor]:
        """Add a batch (images in [-1, 1]); returns its per-image values, by metric."""
        values = per_image(fake, real, self.names, self.registry)
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
        """The mean of each metric over every image added (one host transfer); ``{}`` before any."""
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
