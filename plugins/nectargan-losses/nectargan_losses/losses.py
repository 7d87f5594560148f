"""Pixel, gradient and structure losses: ``loss(prediction, target)`` -> 0-dim tensor.

Images are (N, C, H, W) in [-1, 1]. The gradient losses filter each channel
separately (no grayscale conversion, so colour edges count) with replicate
padding, so a flat border produces no false edges.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

_SOBEL_X = [[-1.0, 0.0, 1.0], [-2.0, 0.0, 2.0], [-1.0, 0.0, 1.0]]
_LAPLACIAN = [[0.0, 1.0, 0.0], [1.0, -4.0, 1.0], [0.0, 1.0, 0.0]]


class Charbonnier(nn.Module):
    """``mean(sqrt((x - y)^2 + eps^2))``: L1 that is smooth at zero error."""

    def __init__(self, eps: float = 1e-3) -> None:
        super().__init__()
        self.eps = eps

    def forward(self, prediction: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return torch.sqrt((prediction - target).square() + self.eps**2).mean()


class _PerChannelFilter(nn.Module):
    """Applies fixed 3x3 kernels to every channel (depthwise), replicate-padded."""

    def __init__(self, kernels: list[list[list[float]]]) -> None:
        super().__init__()
        self.register_buffer("kernels", torch.tensor(kernels).unsqueeze(1), persistent=False)

    def responses(self, images: torch.Tensor) -> torch.Tensor:
        """(N, C, K, H, W): the K kernel responses of each channel."""
        n, c, h, w = images.shape
        k = self.kernels.shape[0]
        weight = self.kernels.to(images.dtype).repeat(c, 1, 1, 1)
        out = F.conv2d(F.pad(images, (1, 1, 1, 1), mode="replicate"), weight, groups=c)
        return out.view(n, c, k, h, w)


class Sobel(_PerChannelFilter):
    """L1 between Sobel gradients of prediction and target.

    ``magnitude``: ``mean |m(x) - m(y)|`` with ``m = sqrt(gx^2 + gy^2 + eps)``
    (edge strength, blind to direction). ``gradients``: ``mean(|dgx| + |dgy|)``
    over the x and y gradient differences (direction counts too).
    """

    def __init__(self, mode: str = "magnitude", eps: float = 1e-6) -> None:
        sobel_y = [list(row) for row in zip(*_SOBEL_X)]
        super().__init__([_SOBEL_X, sobel_y])
        if mode not in ("magnitude", "gradients"):
            raise ValueError(f"sobel mode must be 'magnitude' or 'gradients' (got {mode!r})")
        self.mode, self.eps = mode, eps

    def _features(self, images: torch.Tensor) -> torch.Tensor:
        grads = self.responses(images)
        if self.mode == "magnitude":
            return torch.sqrt(grads.square().sum(dim=2) + self.eps)
        return grads

    def forward(self, prediction: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        diff = (self._features(prediction) - self._features(target)).abs()
        if self.mode == "gradients":
            return diff.sum(dim=2).mean()
        return diff.mean()


class Laplacian(_PerChannelFilter):
    """L1 between 4-neighbour Laplacians: fine texture and sharp edges."""

    def __init__(self) -> None:
        super().__init__([_LAPLACIAN])

    def forward(self, prediction: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return F.l1_loss(self.responses(prediction), self.responses(target))


class SSIMLoss(nn.Module):
    """``1 - SSIM`` on images in [-1, 1], mapped to [0, 1] with ``data_range=1``.

    SSIM's luminance term depends on absolute intensity, so the mapping (not
    just a data_range of 2) is what makes the constants C1, C2 match the
    standard definition.
    """

    def __init__(self, kernel_size: int = 11, sigma: float = 1.5, gaussian: bool = True) -> None:
        super().__init__()
        from torchmetrics.functional.image import structural_similarity_index_measure

        self._ssim = structural_similarity_index_measure
        self.kernel_size, self.sigma, self.gaussian = kernel_size, sigma, gaussian

    def forward(self, prediction: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        # float32 at least: SSIM's variances are differences of close numbers.
        dtype = torch.promote_types(torch.promote_types(prediction.dtype, target.dtype), torch.float32)
        ssim = self._ssim(
            (prediction.to(dtype) + 1) / 2, (target.to(dtype) + 1) / 2, gaussian_kernel=self.gaussian,
            sigma=self.sigma, kernel_size=self.kernel_size, data_range=1.0,
        )
        return 1.0 - ssim
