"""Every pair loss on inputs small enough to work out by hand."""

from __future__ import annotations

import math

import pytest
import torch

from nectargan_losses.losses import Charbonnier, Laplacian, Sobel, SSIMLoss
from losses_fixtures import images_fixture, registry_fixture  # noqa: F401 - pytest fixtures


def build(registry, name, **options):
    return registry.get("loss", name).load()(**options)


def step_edge():
    """4x4 image, left half 0, right half 1: a vertical edge between columns 1 and 2."""
    image = torch.zeros(1, 1, 4, 4)
    image[..., 2:] = 1.0
    return image


def test_l1_l2_smooth_l1_by_hand(registry):
    prediction = torch.tensor([[0.0, 0.5, 2.0, -1.0]])
    target = torch.zeros(1, 4)
    assert build(registry, "l1")(prediction, target).item() == pytest.approx((0 + 0.5 + 2 + 1) / 4)
    assert build(registry, "l2")(prediction, target).item() == pytest.approx((0 + 0.25 + 4 + 1) / 4)
    # beta 1: 0.5 * d^2 below 1, d - 0.5 above.
    expected = (0 + 0.125 + 1.5 + 0.5) / 4
    assert build(registry, "smooth_l1", beta=1.0)(prediction, target).item() == pytest.approx(expected)


def test_charbonnier_by_hand(registry):
    loss = build(registry, "charbonnier", eps=1e-3)
    value = loss(torch.tensor([0.0, 1.0]), torch.zeros(2)).item()
    assert value == pytest.approx((1e-3 + math.sqrt(1 + 1e-6)) / 2, rel=1e-6)
    assert isinstance(loss, Charbonnier)


def test_sobel_magnitude_of_a_step_edge(registry):
    # Each row is [0, 0, 1, 1]; replicate-padded Sobel-x is 4 * (x[j+1] - x[j-1]) = [0, 4, 4, 0],
    # Sobel-y is 0: magnitudes 0, 4, 4, 0 in every row -> mean 2 against a flat target.
    loss = build(registry, "sobel", eps=0.0)
    assert loss(step_edge(), torch.zeros(1, 1, 4, 4)).item() == pytest.approx(2.0)
    assert loss(step_edge(), step_edge()).item() == 0.0


def test_sobel_gradients_mode_sees_direction():
    edge = step_edge()
    flipped = edge.flip(-1)  # same magnitudes, opposite x gradient
    assert Sobel(mode="magnitude", eps=0.0)(edge, flipped).item() == 0.0
    # |gx - gx'| = 8 at the two edge columns of each row (0 elsewhere), gy = 0 -> mean 16 / 4 = 4.
    assert Sobel(mode="gradients")(edge, flipped).item() == pytest.approx(4.0)


def test_sobel_is_per_channel_not_grayscale():
    # Red edge one way, green edge the other: a grayscale mean would cancel them.
    image = torch.cat([step_edge(), step_edge().flip(-1)], dim=1)
    assert Sobel(eps=0.0)(image, torch.zeros_like(image)).item() == pytest.approx(2.0)


def test_sobel_has_finite_gradients_on_flat_images():
    flat = torch.zeros(1, 3, 8, 8, requires_grad=True)
    Sobel()(flat, torch.zeros(1, 3, 8, 8)).backward()
    assert torch.isfinite(flat.grad).all()


def test_laplacian_of_a_single_bright_pixel(registry):
    image = torch.zeros(1, 1, 3, 3)
    image[0, 0, 1, 1] = 1.0
    # Laplacian: -4 at the centre, 1 at its 4 neighbours, 0 at the corners -> mean |.| = 8 / 9.
    loss = build(registry, "laplacian")
    assert isinstance(loss, Laplacian)
    assert loss(image, torch.zeros_like(image)).item() == pytest.approx(8 / 9)


def test_ssim_of_flat_images_by_hand(registry):
    # Flat images have no variance, so SSIM is the luminance term alone:
    # (2 a b + C1) / (a^2 + b^2 + C1) with a = 1, b = 0.5 after mapping [-1, 1] -> [0, 1], C1 = 0.01^2.
    # float64: in float32 the window's E[x^2] - E[x]^2 leaves ~1e-7 of variance, which moves SSIM by 1e-4.
    loss = build(registry, "ssim", gaussian=False, kernel_size=5)
    prediction = torch.ones(1, 3, 16, 16, dtype=torch.float64)
    target = torch.zeros(1, 3, 16, 16, dtype=torch.float64)
    c1 = 0.01**2
    expected = 1 - (2 * 1.0 * 0.5 + c1) / (1.0 + 0.25 + c1)
    assert loss(prediction, target).item() == pytest.approx(expected, rel=1e-12)


def test_ssim_is_zero_for_identical_images_and_differentiable(images):
    fake, real = images
    loss = SSIMLoss()
    assert loss(real, real).item() == pytest.approx(0.0, abs=1e-6)
    value = loss(fake, real)
    value.backward()
    assert 0 < value.item() <= 2 and fake.grad.abs().sum() > 0


def test_options_are_validated_with_the_key_named(registry):
    from nectargan_losses.config import validated_options

    with pytest.raises(ValueError, match=r"add.s.options.kernel_size: must be odd"):
        validated_options(registry, "loss", "ssim", {"kernel_size": 4}, "add.s", ".options")
    with pytest.raises(ValueError, match=r"takes no options"):
        validated_options(registry, "loss", "l1", {"eps": 1}, "add.x", ".options")


@pytest.mark.parametrize("name", ["l1", "l2", "smooth_l1", "charbonnier", "sobel", "laplacian", "ssim"])
def test_a_bfloat16_prediction_against_a_float32_target(registry, name):
    # What a generator run under bf16 autocast hands to the losses.
    generator = torch.Generator().manual_seed(3)
    target = torch.rand(1, 3, 16, 16, generator=generator) * 2 - 1
    prediction = (target + 0.1 * torch.randn(1, 3, 16, 16, generator=generator)).to(torch.bfloat16)
    value = build(registry, name)(prediction, target)
    reference = build(registry, name)(prediction.float(), target)
    assert value.dim() == 0 and value.item() == pytest.approx(reference.item(), rel=2e-2)
