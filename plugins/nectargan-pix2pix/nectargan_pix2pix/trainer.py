"""The pix2pix trainer: the reference training step, on the core's loop.

One step, as in the reference (junyanz/pytorch-CycleGAN-and-pix2pix):

1. ``fake_B = G(A)``, once.
2. D update on ``(A, fake_B.detach())`` and ``(A, B)``.
3. G update with D frozen (no gradients reach D's parameters), on the GAN
   term ``D(A, fake_B)`` and the loss spec's other terms (``100 * L1`` in the
   reference ``basic`` spec).

On top of that: any loss spec from nectargan-losses, separate (or shared) LR
schedules, gradient accumulation, gradient clipping, a D:G update ratio,
autocast on any device with one GradScaler per network, channels_last, and
validation (L1/PSNR/SSIM) with example grids of fixed images.

The mechanics of the two updates (accumulation, DDP ``no_sync``, the scalers,
clipping, freezing D during G's update, the non-finite skip, step-unit
schedules) are the core's trainer kit, and the set-up every translation
trainer shares (optimizers, schedules, scalers, loaders, examples) is
``nectargan_translate.TranslationTrainer``'s: this module holds the networks'
wiring and the step.
"""

from __future__ import annotations

import contextlib
from typing import Any

import torch

from nectargan_core import ConfigError, Trainer, hookimpl, optimizer_step
from nectargan_losses import LossManager
from nectargan_translate import (UPDATE_RATIO, TranslationTrainer, build_discriminator, build_generator,
                                 check_translation_config, is_conditional)

from .options import Pix2pixOptions
from .summary import pix2pix_rows


class Pix2pixTrainer(TranslationTrainer):
    """Paired image-to-image translation with a conditional GAN (Isola et al., 2017)."""

    options = Pix2pixOptions
    #: Its step updates D every optim.d_every steps and G every optim.g_every (updates_due).
    capabilities = TranslationTrainer.capabilities | {UPDATE_RATIO}
    #: What ``nectargan export --format reference`` writes: the reference's network name -> (tracked network,
    #: config key of its model); and the reference's ``--model`` that loads them.
    reference_networks = {"G": ("generator", "models.generator")}
    reference_model = "pix2pix"
    #: For test, predict and export: one generator, from the training input to the target (data.direction
    #: decides which side of the data that is).
    generators = {"AtoB": "generator"}

    # -- set-up ------------------------------------------------------------
    def setup(self) -> None:
        cfg = self.config
        if cfg.data.name == "paired" and not cfg.data.options.get("root"):
            raise ConfigError("data.root: no dataset folder given; set data.root (make a synthetic one with: "
                              "nectargan data synth data/synth)")
        self.setup_data()

        generator = build_generator(self.registry, cfg).to(self.device, memory_format=self.memory_format)
        discriminator = build_discriminator(self.registry, cfg).to(self.device, memory_format=self.memory_format)
        self.generator = self.track("generator", generator)
        self.discriminator = self.track("discriminator", discriminator)
        #: What train_step calls: the tracked modules, or compiled wrappers sharing their parameters,
        #: inside DistributedDataParallel in a distributed run. G's update judges with ``_d_judge``
        #: (no DDP: D gets no gradients then, so there is nothing to synchronise).
        self._g_train = self.parallel(self.compiled(generator))
        self._d_judge = self.compiled(discriminator)
        self._d_train = self.parallel(self._d_judge)
        #: A conditional D (the pix2pix default) judges cat(A, B); an unconditional one B alone.
        choice = self.registry.get("model", cfg.models.discriminator.name)
        self.conditional = is_conditional(discriminator, choice.name, choice.provided_by)

        # D's update trains _d_train; G's trains _g_train (D frozen meanwhile).
        self.setup_updates(self._g_train, generator.parameters(), self._d_train, discriminator.parameters())
        self.losses = self.track("losses", LossManager(
            cfg.loss, registry=self.registry, device=self.device, history_every=None))  # the engine logs loss means

    # -- the step ------------------------------------------------------------
    def _optimizer_step(self, optimizer: torch.optim.Optimizer, scaler: torch.amp.GradScaler,
                        module: torch.nn.Module, bad: torch.Tensor | None = None) -> None:
        """One network's optimizer step as the kit makes it (clip, non-finite skip with ``bad``, scaler)."""
        optimizer_step(optimizer, module.parameters(), scaler=scaler, clip=self.config.optim.grad_clip, bad=bad,
                       dist=self.dist)

    def judge(self, a: torch.Tensor, b: torch.Tensor, *, training_d: bool = False) -> torch.Tensor:
        """D's logits for the pair (a, b); ``training_d`` for D's own update (gradients synchronised)."""
        net = self._d_train if training_d else self._d_judge
        return net(a, b) if self.conditional else net(b)

    def critic(self, a: torch.Tensor) -> Any:
        """D as a function of B alone, given ``a`` (for the gradient penalty): called as ``judge`` calls it."""
        d = self.discriminator
        return (lambda b: d(a, b)) if self.conditional else d

    def prepare_step(self, batch: dict[str, Any], batch_idx: int) -> None:
        self.losses.set_position(self.epoch, self.global_step)  # scheduled loss weights read it

    def graph_key(self, batch_idx: int) -> Any:
        """What the step's Python decides: which networks update (d_every, g_every) and the loss weights."""
        return (*self.updates_due(), tuple(self.losses.weights().items()))

    @hookimpl
    def train_step(self, batch: dict[str, Any], batch_idx: int) -> dict[str, Any]:
        losses, autocast = self.losses, self.kit.autocast
        real_a, real_b = self.to_device(batch["A"]), self.to_device(batch["B"])
        losses.set_position(self.epoch, self.global_step)
        logs: dict[str, Any] = {}
        update_d, update_g = self.updates_due()
        with self.kit.step(batch_idx):
            # fake_B = G(A), once. A DDP forward must be followed by its backward: when G is not
            # updated this step, run the bare module without gradients.
            with autocast(), contextlib.nullcontext() if update_g else torch.no_grad():
                fake_b = (self._g_train if update_g else self.generator)(real_a)

            if update_d:
                with self.update_d:  # D on (A, fake_B) and (A, B)
                    with autocast():
                        fake = fake_b.detach()
                        fake_logits = self.judge(real_a, fake, training_d=True)  # fake first, as the reference
                        real_logits = self.judge(real_a, real_b, training_d=True)
                        d = losses.discriminator_losses(real_logits, fake_logits, critic=self.critic(real_a),
                                                        real=real_b, fake=fake)
                    self.update_d.backward(d.total)
                logs.update(d.logs())

            if update_g:
                with self.update_g:  # G on D(A, fake_B) and the spec's other terms; D is frozen
                    with autocast():
                        g = losses.generator_losses(fake_b, real_b, fake_logits=lambda: self.judge(real_a, fake_b))
                    self.update_g.backward(g.total)
                logs.update(g.logs())
        return logs

    # -- before the run directory, and what defines the run ------------------
    @classmethod
    def check_config(cls, config: Any, registry: Any) -> None:
        """Data folder, network options and image size, checked before a run directory is made."""
        check_translation_config(config, registry)

    def describe(self) -> dict[str, str]:
        """Networks with parameter counts, data per split, precision, loss, optimizer and examples."""
        return pix2pix_rows(self, Trainer.describe(self))  # the engine's rows; pix2pix's replace the base's
