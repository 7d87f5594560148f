"""VGG19 perceptual loss with weights from a local file only.

Nothing is downloaded: the architecture comes from torchvision, the weights
from ``weights`` (a torchvision ``vgg19`` state_dict, whole or features-only,
or just the leading layers the chosen outputs need).
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from nectargan_core import ConfigError

from .options import VGG19_LAYERS, VGG_DEFAULT_LAYERS, VGG_WEIGHTS_HELP

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def vgg19_features() -> tuple[nn.Sequential, dict[str, int]]:
    """torchvision's VGG19 feature extractor (random init) and the index of each ReLU by name."""
    from torchvision.models.vgg import cfgs, make_layers

    features = make_layers(cfgs["E"], batch_norm=False)
    names: dict[str, int] = {}
    block, conv = 1, 0
    for index, module in enumerate(features):
        if isinstance(module, nn.MaxPool2d):
            block, conv = block + 1, 0
        elif isinstance(module, nn.ReLU):
            conv += 1
            names[f"relu{block}_{conv}"] = index
    assert tuple(names) == VGG19_LAYERS
    return features, names


def load_weights(features: nn.Sequential, path: str) -> None:
    """Load ``features`` from ``path``; ConfigError naming the file on any mismatch."""
    file = Path(path).expanduser()
    if not file.is_file():
        raise ConfigError(f"loss 'vgg': weights file '{file}' not found. {VGG_WEIGHTS_HELP}")
    try:
        state = torch.load(file, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - any unreadable file is the user's to fix
        raise ConfigError(f"loss 'vgg': cannot read weights file '{file}': {type(exc).__name__}: {exc}") from None
    if not isinstance(state, dict):
        raise ConfigError(f"loss 'vgg': '{file}' does not hold a state_dict (got {type(state).__name__})")
    if any(key.startswith("features.") for key in state):
        state = {key[len("features."):]: value for key, value in state.items() if key.startswith("features.")}
    expected = features.state_dict()
    missing = [key for key in expected if key not in state]
    if missing:
        raise ConfigError(
            f"loss 'vgg': '{file}' is not a VGG19 state_dict covering the chosen layers "
            f"(missing {missing[0]} and {len(missing) - 1} more keys)"
        )
    for key, tensor in expected.items():
        if state[key].shape != tensor.shape:
            raise ConfigError(
                f"loss 'vgg': '{file}': {key} has shape {tuple(state[key].shape)}, "
                f"VGG19 needs {tuple(tensor.shape)}"
            )
    features.load_state_dict({key: state[key] for key in expected})


class VGGPerceptualLoss(nn.Module):
    """Weighted distance between VGG19 feature maps of prediction and target.

    Inputs in [-1, 1] are mapped to [0, 1] and normalised with the ImageNet
    mean and std the weights were trained with. The network is frozen and
    stays in eval mode even when the loss is put in train mode. The target's
    features are computed without a graph: only the prediction needs gradients.
    """

    def __init__(
        self,
        weights: str | None = None,
        layers: Sequence[str] = tuple(VGG_DEFAULT_LAYERS),
        layer_weights: Sequence[float] | None = None,
        criterion: str = "l1",
    ) -> None:
        super().__init__()
        if not weights:
            raise ConfigError(VGG_WEIGHTS_HELP)
        features, index = vgg19_features()
        if not layers or len(set(layers)) != len(layers) or not set(layers) <= set(index):
            raise ConfigError(f"loss 'vgg': layers must be distinct names among {', '.join(VGG19_LAYERS)} "
                              f"(got {', '.join(layers) or 'none'})")
        if layer_weights is not None and len(layer_weights) != len(layers):
            raise ConfigError(f"loss 'vgg': layer_weights has {len(layer_weights)} values for {len(layers)} layers")
        if criterion not in ("l1", "l2"):
            raise ConfigError(f"loss 'vgg': criterion must be 'l1' or 'l2' (got {criterion!r})")
        self.taps = sorted(index[name] for name in layers)
        self.features = features[: self.taps[-1] + 1]
        load_weights(self.features, weights)
        self.features.requires_grad_(False).eval()
        weight_of = dict(zip(layers, layer_weights or [1.0] * len(layers)))
        self.tap_weights = [weight_of[name] for name in sorted(layers, key=index.__getitem__)]
        self.distance = F.l1_loss if criterion == "l1" else F.mse_loss
        self.register_buffer("mean", torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1), persistent=False)
        self.register_buffer("std", torch.tensor(IMAGENET_STD).view(1, 3, 1, 1), persistent=False)

    def train(self, mode: bool = True) -> "VGGPerceptualLoss":
        super().train(mode)
        self.features.eval()
        return self

    def normalize(self, images: torch.Tensor) -> torch.Tensor:
        """[-1, 1] images (1 or 3 channels) to ImageNet-normalised RGB."""
        if images.shape[1] == 1:
            images = images.expand(-1, 3, -1, -1)
        elif images.shape[1] != 3:
            raise ValueError(f"loss 'vgg' needs 1- or 3-channel images (got {images.shape[1]} channels)")
        images = images.to(self.mean.dtype)  # the network's dtype; autocast still applies inside
        return ((images + 1) / 2 - self.mean) / self.std

    def feature_maps(self, images: torch.Tensor) -> list[torch.Tensor]:
        """The chosen ReLU outputs, in network order."""
        maps, x = [], self.normalize(images)
        taps = iter(self.taps)
        tap = next(taps)
        for index, layer in enumerate(self.features):
            x = layer(x)
            if index == tap:
                maps.append(x)
                tap = next(taps, -1)
        return maps

    def forward(self, prediction: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            targets = self.feature_maps(target)
        predictions = self.feature_maps(prediction)
        total = prediction.new_zeros(())
        for weight, p, t in zip(self.tap_weights, predictions, targets):
            total = total + weight * self.distance(p, t)
        return total
