"""GAN objectives on known logits, and the gradient penalty on critics with a known gradient."""

from __future__ import annotations

import math

import pytest
import torch

from nectargan_losses.gan import LSGAN, WGANGP, HingeGAN, VanillaGAN, gradient_penalty
from losses_fixtures import registry_fixture  # noqa: F401 - pytest fixtures

REAL = torch.tensor([2.0, 0.5]).view(2, 1, 1, 1).expand(2, 1, 2, 2)  # a 2x2 patch map per sample
FAKE = torch.tensor([-2.0, 0.5]).view(2, 1, 1, 1).expand(2, 1, 2, 2)


def softplus(x: float) -> float:
    return math.log1p(math.exp(x))


def test_vanilla_is_bce_with_logits_against_expanded_labels(registry):
    objective = registry.get("loss", "vanilla").load()()
    real, fake = objective.discriminator_terms(REAL, FAKE)
    # BCE(x, 1) = softplus(-x); BCE(x, 0) = softplus(x); averaged over samples and patches.
    assert real.item() == pytest.approx((softplus(-2.0) + softplus(-0.5)) / 2)
    assert fake.item() == pytest.approx((softplus(-2.0) + softplus(0.5)) / 2)
    assert objective.discriminator_loss(REAL, FAKE).item() == pytest.approx(real.item() + fake.item())
    assert objective.generator_loss(FAKE).item() == pytest.approx((softplus(2.0) + softplus(-0.5)) / 2)
    assert real.dim() == 0 and not objective.needs_gradient_penalty


def test_vanilla_label_smoothing():
    objective = VanillaGAN(real_label=0.9)
    logits = torch.full((1, 1, 3, 3), 2.0)
    p = 1 / (1 + math.exp(-2.0))
    expected = -(0.9 * math.log(p) + 0.1 * math.log(1 - p))
    assert objective.generator_loss(logits).item() == pytest.approx(expected)


def test_lsgan_is_mse_to_the_labels():
    real, fake = LSGAN().discriminator_terms(REAL, FAKE)
    assert real.item() == pytest.approx(((2 - 1) ** 2 + (0.5 - 1) ** 2) / 2)
    assert fake.item() == pytest.approx((4 + 0.25) / 2)
    assert LSGAN().generator_loss(FAKE).item() == pytest.approx((9 + 0.25) / 2)


def test_hinge():
    real, fake = HingeGAN().discriminator_terms(REAL, FAKE)
    assert real.item() == pytest.approx((0.0 + 0.5) / 2)  # relu(1 - real)
    assert fake.item() == pytest.approx((0.0 + 1.5) / 2)  # relu(1 + fake)
    assert HingeGAN().generator_loss(FAKE).item() == pytest.approx(0.75)  # -mean(fake)


def test_wgan_critic_and_generator():
    objective = WGANGP()
    real, fake = objective.discriminator_terms(REAL, FAKE)
    assert (real + fake).item() == pytest.approx(-0.75 - 1.25)  # mean(fake) - mean(real)
    assert objective.generator_loss(FAKE).item() == pytest.approx(0.75)
    assert objective.needs_gradient_penalty and objective.gp_weight == 10.0


def linear_critic(weight: torch.Tensor):
    """critic(x) = <weight, x> per sample: its gradient is ``weight`` everywhere."""
    return lambda x: (x * weight).flatten(1).sum(dim=1)


def test_gradient_penalty_of_a_linear_critic_is_exact():
    weight = torch.full((3, 4, 4), 3.0 / math.sqrt(48))  # ||weight|| = 3
    real, fake = torch.randn(5, 3, 4, 4), torch.randn(5, 3, 4, 4)
    penalty = gradient_penalty(linear_critic(weight), real, fake, weight=10.0)
    assert penalty.item() == pytest.approx(10.0 * (3.0 - 1.0) ** 2, rel=1e-5)


def test_gradient_penalty_differentiates_the_image_not_the_condition():
    weight = torch.empty(6, 4, 4)
    weight[:3] = 7.0  # condition channels: large, must not count
    weight[3:] = 0.5 / math.sqrt(48)  # image channels: norm 0.5
    real, fake, condition = torch.randn(2, 3, 4, 4), torch.randn(2, 3, 4, 4), torch.randn(2, 3, 4, 4)
    penalty = WGANGP(gp_weight=10.0).gradient_penalty(linear_critic(weight), real, fake, condition=condition)
    assert penalty.item() == pytest.approx(10.0 * 0.25, rel=1e-5)


def test_gradient_penalty_on_a_patch_map_critic_and_it_trains_the_critic():
    critic = torch.nn.Conv2d(3, 1, kernel_size=1, bias=False)
    with torch.no_grad():
        critic.weight.copy_(torch.tensor([0.1, 0.2, 0.2]).view(1, 3, 1, 1))
    # The summed 4x4 map has gradient w_c at every pixel: norm sqrt(16 * 0.09) = 1.2.
    penalty = gradient_penalty(critic, torch.randn(3, 3, 4, 4), torch.randn(3, 3, 4, 4), weight=10.0)
    assert penalty.item() == pytest.approx(10.0 * 0.2**2, rel=1e-5)
    penalty.backward()
    assert critic.weight.grad is not None and critic.weight.grad.abs().sum() > 0


@pytest.mark.parametrize("objective", [VanillaGAN(), LSGAN(), HingeGAN(), WGANGP()], ids=repr)
def test_a_list_of_logit_maps_adds_the_losses_of_the_scales(objective):
    """A multi-scale discriminator's output: each objective adds its per-scale losses (pix2pixHD)."""
    coarse_real, coarse_fake = REAL[..., :1, :1] * 3, FAKE[..., :1, :1] - 1
    real, fake = objective.discriminator_terms([REAL, coarse_real], [FAKE, coarse_fake])
    real_0, fake_0 = objective.discriminator_terms(REAL, FAKE)
    real_1, fake_1 = objective.discriminator_terms(coarse_real, coarse_fake)
    assert real.item() == pytest.approx(real_0.item() + real_1.item())
    assert fake.item() == pytest.approx(fake_0.item() + fake_1.item())
    assert objective.generator_loss([FAKE, coarse_fake]).item() == pytest.approx(
        objective.generator_loss(FAKE).item() + objective.generator_loss(coarse_fake).item())
    with pytest.raises(ValueError, match="empty list"):
        objective.generator_loss([])


def test_the_gradient_penalty_of_a_multiscale_critic_is_that_of_the_sum_of_its_maps():
    real, fake = torch.randn(3, 2, 4, 4), torch.randn(3, 2, 4, 4)

    def two_maps(x):
        return [2 * x, x[..., ::2, ::2] * 3]

    def summed(x):
        return (2 * x).sum(dim=(1, 2, 3)) + (x[..., ::2, ::2] * 3).sum(dim=(1, 2, 3))

    torch.manual_seed(0)
    listed = gradient_penalty(two_maps, real, fake)
    torch.manual_seed(0)
    single = gradient_penalty(summed, real, fake)
    assert listed.item() == pytest.approx(single.item())
