"""VGG19 perceptual loss: weights from a local file only, ImageNet normalisation, frozen."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torchvision.models.vgg import cfgs, make_layers

from nectargan_core.errors import ConfigError
from nectargan_losses.perceptual import VGGPerceptualLoss
from losses_fixtures import registry_fixture  # noqa: F401 - pytest fixtures

TAPS = {"relu1_2": 3, "relu2_2": 8, "relu3_3": 15}  # indices in torchvision's vgg19().features


@pytest.fixture(scope="module")
def random_vgg(tmp_path_factory):
    """Random VGG19 features up to relu3_3, saved like a torchvision vgg19 state_dict ("features." keys)."""
    torch.manual_seed(0)
    features = make_layers(cfgs["E"])[:16].eval()
    path = tmp_path_factory.mktemp("weights") / "vgg19.pth"
    torch.save({f"features.{k}": v for k, v in features.state_dict().items()}, path)
    return features, str(path)


def expected_loss(features, prediction, target, layers, layer_weights):
    mean = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)
    total = 0.0
    for name, weight in zip(layers, layer_weights):
        net = features[: TAPS[name] + 1]
        p = net(((prediction + 1) / 2 - mean) / std)
        t = net(((target + 1) / 2 - mean) / std)
        total += weight * F.l1_loss(p, t).item()
    return total


def test_loss_matches_a_manual_computation_with_the_local_weights(registry, random_vgg):
    features, path = random_vgg
    loss = registry.get("loss", "vgg").load()(weights=path, layers=["relu2_2", "relu1_2"], layer_weights=[2.0, 0.5])
    generator = torch.Generator().manual_seed(1)
    prediction = (torch.rand(2, 3, 24, 24, generator=generator) * 2 - 1).requires_grad_(True)
    target = torch.rand(2, 3, 24, 24, generator=generator) * 2 - 1
    value = loss(prediction, target)
    with torch.no_grad():
        expected = expected_loss(features, prediction, target, ["relu2_2", "relu1_2"], [2.0, 0.5])
    assert value.item() == pytest.approx(expected, rel=1e-5)
    assert loss(target, target).item() == 0.0
    value.backward()
    assert prediction.grad.abs().sum() > 0


def test_network_is_frozen_truncated_and_stays_in_eval(random_vgg):
    _, path = random_vgg
    loss = VGGPerceptualLoss(weights=path)  # default layers: relu1_2, relu2_2, relu3_3
    assert len(loss.features) == TAPS["relu3_3"] + 1
    assert all(not p.requires_grad for p in loss.parameters())
    loss.train()
    assert loss.training and not loss.features.training


def test_grayscale_input_is_repeated_to_rgb(random_vgg):
    _, path = random_vgg
    loss = VGGPerceptualLoss(weights=path, layers=["relu1_2"])
    gray = torch.rand(1, 1, 16, 16) * 2 - 1
    assert loss(gray, torch.zeros_like(gray)).item() == pytest.approx(
        loss(gray.expand(-1, 3, -1, -1), torch.zeros(1, 3, 16, 16)).item())


def test_without_weights_the_error_says_how_to_get_them():
    with pytest.raises(ConfigError) as info:
        VGGPerceptualLoss()
    message = str(info.value)
    assert "\n" not in message and "nothing is downloaded" in message
    assert "vgg19(weights='IMAGENET1K_V1')" in message and "options.weights" in message


def test_missing_or_incomplete_weights_file(tmp_path, random_vgg):
    with pytest.raises(ConfigError, match="weights file '.*nope.pth' not found"):
        VGGPerceptualLoss(weights=str(tmp_path / "nope.pth"))
    _, path = random_vgg
    with pytest.raises(ConfigError, match=r"not a VGG19 state_dict covering the chosen layers \(missing 16.weight"):
        VGGPerceptualLoss(weights=path, layers=["relu4_1"])  # the file stops at relu3_3
    with pytest.raises(ConfigError, match="layers must be distinct names among relu1_1"):
        VGGPerceptualLoss(weights=path, layers=["relu3_4x"])


def test_vgg_spec_from_config(registry, random_vgg):
    from nectargan_losses.manager import LossManager

    _, path = random_vgg
    manager = LossManager({"spec": "basic+vgg", "terms": {"vgg": {"options": {"weights": path}}}}, registry=registry)
    fake, real = torch.rand(1, 3, 16, 16) * 2 - 1, torch.rand(1, 3, 16, 16) * 2 - 1
    result = manager.generator_losses(fake, real, fake_logits=torch.zeros(1, 1, 2, 2))
    assert result.weights["G/vgg"] == 10.0 and result.raw["G/vgg"].item() > 0


def test_bfloat16_prediction_and_autocast(random_vgg):
    _, path = random_vgg
    loss = VGGPerceptualLoss(weights=path, layers=["relu2_2"])
    target = torch.rand(1, 3, 16, 16) * 2 - 1
    prediction = target + 0.2 * torch.randn(1, 3, 16, 16)
    reference = loss(prediction, target).item()
    assert loss(prediction.bfloat16(), target).item() == pytest.approx(reference, rel=5e-2)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert loss(prediction, target).item() == pytest.approx(reference, rel=5e-2)
