"""GAN objectives: what the discriminator and the generator minimise, given D's logits.

Every objective has the same interface, so a trainer never branches on the
mode::

    d_real, d_fake = objective.discriminator_terms(D(A, B), D(A, fake.detach()))
    d_loss = 0.5 * (d_real + d_fake)          # the pix2pix weighting
    if objective.needs_gradient_penalty:
        d_loss = d_loss + objective.gradient_penalty(D, B, fake, condition=A)
    g_loss = objective.generator_loss(D(A, fake))

Logits are raw (no sigmoid); a PatchGAN map is fine: targets are expanded to
its shape and every reduction is a mean. A multi-scale discriminator returns
a list of logit maps; every objective then adds the losses of the scales
(pix2pixHD's sum), and the gradient penalty differentiates their sum.
"""

from __future__ import annotations

from typing import Callable, Sequence, Union

import torch
import torch.nn.functional as F

#: D's output: one logit map, or one per scale (a multi-scale discriminator).
Logits = Union[torch.Tensor, Sequence[torch.Tensor]]


def per_scale(loss: Callable[[torch.Tensor], torch.Tensor], logits: Logits) -> torch.Tensor:
    """``loss(logits)``, or for a list of logit maps the sum of ``loss`` over them."""
    if isinstance(logits, torch.Tensor):
        return loss(logits)
    if not logits:
        raise ValueError("the discriminator returned an empty list of logit maps")
    total = loss(logits[0])
    for scale in logits[1:]:
        total = total + loss(scale)
    return total


def gradient_penalty(
    critic: Callable[[torch.Tensor], torch.Tensor],
    real: torch.Tensor,
    fake: torch.Tensor,
    condition: torch.Tensor | None = None,
    weight: float = 10.0,
) -> torch.Tensor:
    """WGAN-GP penalty ``weight * mean((||grad_x critic(x)|| - 1)^2)`` (Gulrajani et al. 2017).

    ``x`` is a random per-sample mix of ``real`` and ``fake`` (both detached);
    a conditional critic sees ``cat([condition, x], 1)`` and the gradient is
    taken with respect to ``x`` only. The graph is kept (``create_graph``) so
    the penalty trains the critic.
    """
    alpha = torch.rand((real.shape[0],) + (1,) * (real.dim() - 1), device=real.device, dtype=real.dtype)
    mixed = (alpha * real.detach() + (1 - alpha) * fake.detach()).requires_grad_(True)
    inputs = mixed if condition is None else torch.cat([condition.detach(), mixed], dim=1)
    scores = critic(inputs)
    if isinstance(scores, torch.Tensor):
        (grad,) = torch.autograd.grad(scores, mixed, grad_outputs=torch.ones_like(scores), create_graph=True)
    else:  # one map per scale: the gradient of their sum
        (grad,) = torch.autograd.grad(per_scale(torch.sum, scores), mixed, create_graph=True)
    norm = torch.sqrt(grad.flatten(1).square().sum(dim=1) + 1e-12)
    return weight * (norm - 1.0).square().mean()


class GANObjective:
    """Base class. Subclasses define :meth:`discriminator_terms` and :meth:`generator_loss`."""

    def __init__(self, gp_weight: float = 0.0) -> None:
        self.gp_weight = float(gp_weight)

    @property
    def needs_gradient_penalty(self) -> bool:
        """Whether the discriminator's loss gets a gradient penalty (``gp_weight`` > 0)."""
        return self.gp_weight > 0

    def discriminator_terms(self, real_logits: torch.Tensor, fake_logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The (real, fake) parts of the discriminator's loss, each a 0-dim tensor."""
        raise NotImplementedError

    def discriminator_loss(self, real_logits: torch.Tensor, fake_logits: torch.Tensor) -> torch.Tensor:
        """``real + fake`` parts, unweighted (pix2pix weights this sum by 0.5)."""
        real, fake = self.discriminator_terms(real_logits, fake_logits)
        return real + fake

    def generator_loss(self, fake_logits: torch.Tensor) -> torch.Tensor:
        """The generator's loss, a 0-dim tensor, from D's logits on generated images."""
        raise NotImplementedError

    def gradient_penalty(self, critic: Callable[[torch.Tensor], torch.Tensor], real: torch.Tensor,
                         fake: torch.Tensor, condition: torch.Tensor | None = None) -> torch.Tensor:
        """:func:`gradient_penalty` with this objective's ``gp_weight``."""
        return gradient_penalty(critic, real, fake, condition, weight=self.gp_weight)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(gp_weight={self.gp_weight:g})"


class _LabelledObjective(GANObjective):
    """Regresses logits onto constant real/fake targets expanded to the patch map."""

    def __init__(self, real_label: float = 1.0, fake_label: float = 0.0, gp_weight: float = 0.0) -> None:
        super().__init__(gp_weight)
        self.real_label, self.fake_label = float(real_label), float(fake_label)

    def criterion(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def _against(self, logits: Logits, label: float) -> torch.Tensor:
        return per_scale(lambda scale: self.criterion(scale, torch.full_like(scale, label)), logits)

    def discriminator_terms(self, real_logits: torch.Tensor, fake_logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self._against(real_logits, self.real_label), self._against(fake_logits, self.fake_label)

    def generator_loss(self, fake_logits: torch.Tensor) -> torch.Tensor:
        return self._against(fake_logits, self.real_label)


class VanillaGAN(_LabelledObjective):
    """Binary cross-entropy on logits (the pix2pix default)."""

    def criterion(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """Mean binary cross-entropy of raw logits against a target map of constant labels."""
        return F.binary_cross_entropy_with_logits(logits, target)


class LSGAN(_LabelledObjective):
    """Least squares (Mao et al. 2017): mean squared error to the labels."""

    def criterion(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """Mean squared error of raw logits against a target map of constant labels."""
        return F.mse_loss(logits, target)


class HingeGAN(GANObjective):
    """Hinge: D ``relu(1 - real) + relu(1 + fake)``, G ``-fake``."""

    def discriminator_terms(self, real_logits: Logits, fake_logits: Logits) -> tuple[torch.Tensor, torch.Tensor]:
        return (per_scale(lambda x: F.relu(1.0 - x).mean(), real_logits),
                per_scale(lambda x: F.relu(1.0 + x).mean(), fake_logits))

    def generator_loss(self, fake_logits: Logits) -> torch.Tensor:
        return per_scale(lambda x: -x.mean(), fake_logits)


class WGANGP(GANObjective):
    """Wasserstein critic ``fake - real``, G ``-fake``, plus the gradient penalty."""

    def __init__(self, gp_weight: float = 10.0) -> None:
        super().__init__(gp_weight)

    def discriminator_terms(self, real_logits: Logits, fake_logits: Logits) -> tuple[torch.Tensor, torch.Tensor]:
        return per_scale(lambda x: -x.mean(), real_logits), per_scale(torch.mean, fake_logits)

    def generator_loss(self, fake_logits: Logits) -> torch.Tensor:
        return per_scale(lambda x: -x.mean(), fake_logits)
