"""The CycleGAN trainer: the reference training step, on the core's loop and trainer kit.

One step, as the reference's ``optimize_parameters`` (junyanz/pytorch-CycleGAN-and-pix2pix):

1. ``fake_B = G_A(A)``, ``rec_A = G_B(fake_B)``, ``fake_A = G_B(B)``, ``rec_B = G_A(fake_A)``.
2. G update (G_A and G_B under one Adam) with D_A and D_B frozen:
   ``GAN(D_A(fake_B)) + GAN(D_B(fake_A)) + λ_A·|rec_A - A| + λ_B·|rec_B - B|``
   ``+ λ_id·λ_B·|G_A(B) - B| + λ_id·λ_A·|G_B(A) - A|``.
3. D update (D_A and D_B under one Adam): D_A on B against ``pool_B(fake_B)``,
   D_B on A against ``pool_A(fake_A)``, each ``0.5·(real + fake)``.

The mechanics of the two updates (accumulation, DDP ``no_sync``, the
scalers, clipping, freezing, the non-finite skip, step-unit schedules) are
the core's trainer kit, and the set-up every translation trainer shares
(optimizers, schedules, scalers, loaders, examples) is
``nectargan_translate.TranslationTrainer``'s; the image pools (:mod:`.pool`)
and their random state are tracked, so resume is exact.
"""

from __future__ import annotations

import contextlib
import itertools
from typing import Any, Iterator

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader

from nectargan_core import ConfigError, hookimpl, leave_stopping_to_main
from nectargan_losses import GANObjective
from nectargan_translate import (MetricAccumulator, TranslationTrainer, build_network, data_channels, evaluation_mode,
                                 save_grid)

from .options import CycleGANOptions
from .pool import ImagePool, PoolRandom


class CycleGANTrainer(TranslationTrainer):
    """Unpaired image-to-image translation with cycle consistency (Zhu et al., 2017)."""

    options = CycleGANOptions
    #: What ``nectargan export --format reference`` writes: the reference's network name -> (tracked network,
    #: config key of its model); and the reference's ``--model`` that loads them.
    reference_networks = {"G_A": ("G_A", "models.generator"), "G_B": ("G_B", "models.generator")}
    reference_model = "cycle_gan"
    #: The columns of the example grid: each row is an image, its translation and its translation back.
    example_columns = ("real", "translated", "reconstructed")
    #: Two unpaired domains (trainA/ and trainB/), not aligned pairs.
    paired = False
    #: For test, predict and export: G_A translates A to B, G_B B to A.
    generators = {"AtoB": "G_A", "BtoA": "G_B"}

    # -- set-up ------------------------------------------------------------
    def setup(self) -> None:
        cfg = self.config
        data = cfg.data
        if data.name == "unpaired" and not data.options.get("root"):
            raise ConfigError("data.root: no dataset folder given; set data.root to a folder holding trainA/ and "
                              "trainB/ (make a synthetic one with: nectargan data synth --unpaired data/synth)")
        a, b = data_channels(cfg)
        loss = cfg.loss
        if loss.lambda_identity > 0 and a != b:
            raise ConfigError(f"loss.lambda_identity: the identity losses feed domain B images ({b} channels) to "
                              f"G_A, which reads {a}; set loss.lambda_identity=0, or give both domains the same "
                              "channels (data.in_channels, data.out_channels)")
        self.setup_data()

        def network(choice: Any, **channels: int) -> torch.nn.Module:
            built = build_network(self.registry, choice, **channels)
            return built.to(self.device, memory_format=self.memory_format)

        models = cfg.models
        self.G_A = self.track("G_A", network(models.generator, in_channels=a, out_channels=b))
        self.G_B = self.track("G_B", network(models.generator, in_channels=b, out_channels=a))
        self.D_A = self.track("D_A", network(models.discriminator, input_channels=b, target_channels=b))
        self.D_B = self.track("D_B", network(models.discriminator, input_channels=a, target_channels=a))
        if any(getattr(d, "conditional", False) for d in (self.D_A, self.D_B)):
            raise ConfigError(f"models.discriminator: '{models.discriminator.name}' judges image pairs; CycleGAN's "
                              "discriminators judge one image: choose an unconditional one (conditional: false)")

        # What train_step calls: the tracked modules, or compiled wrappers sharing their parameters, inside
        # DistributedDataParallel in a distributed run. G's update judges with the bare D_A and D_B.
        self._g_a, self._g_b = self.parallel(self.compiled(self.G_A)), self.parallel(self.compiled(self.G_B))
        self._d_a_judge, self._d_b_judge = self.compiled(self.D_A), self.compiled(self.D_B)
        self._d_a, self._d_b = self.parallel(self._d_a_judge), self.parallel(self._d_b_judge)

        # G's update trains G_A and G_B together (D_A, D_B frozen); D's trains D_A and D_B together.
        generators = itertools.chain(self.G_A.parameters(), self.G_B.parameters())
        discriminators = itertools.chain(self.D_A.parameters(), self.D_B.parameters())
        self.setup_updates([self._g_a, self._g_b], generators, [self._d_a, self._d_b], discriminators,
                           names=("G", "D"))
        objective = self.registry.get("loss", loss.gan_mode).load()(**loss.gan_options)
        if not isinstance(objective, GANObjective):
            raise ConfigError(f"loss.gan_mode: '{loss.gan_mode}' did not build a GANObjective "
                              f"(got {type(objective).__name__})")
        self.objective = objective

        # The pools share one random stream, as the reference's share Python's random module.
        self.pool_random = self.track("pool_random", PoolRandom(cfg.run.seed))
        self.fake_A_pool = self.track("fake_A_pool", ImagePool(cfg.pool.size, self.pool_random, self.device))
        self.fake_B_pool = self.track("fake_B_pool", ImagePool(cfg.pool.size, self.pool_random, self.device))
        self._pools_planned, self._pools_before = False, None

    def describe(self) -> dict[str, str]:
        """The translation rows with CycleGAN's objective and image pools after the networks."""
        rows = super().describe()
        loss, pool = self.config.loss, self.config.pool.size
        objective = (f"{loss.gan_mode} both ways, cycle {loss.lambda_A:g}|rec_A - A| + {loss.lambda_B:g}|rec_B - B|"
                     + (f", identity {loss.lambda_identity:g} x the cycle weights" if loss.lambda_identity else ""))
        pools = f"D judges fakes from pools of {pool} images" if pool else "no image pools (D judges the current fakes)"
        ordered = {}
        for key, value in rows.items():
            ordered[key] = value
            if key == "data":
                ordered["loss"] = f"{objective}; {pools}"
        return ordered

    # -- the step ------------------------------------------------------------
    def discriminator_loss(self, train: Any, judge: torch.nn.Module, real: torch.Tensor,
                           fake: torch.Tensor) -> torch.Tensor:
        """``0.5 * (GAN(D(real), real) + GAN(D(fake), fake))`` (plus the objective's gradient penalty, if any)."""
        real_part, fake_part = self.objective.discriminator_terms(train(real), train(fake))
        loss = 0.5 * (real_part + fake_part)
        if self.objective.needs_gradient_penalty:
            loss = loss + self.objective.gradient_penalty(judge, real, fake)
        return loss

    def prepare_step(self, batch: dict[str, Any], batch_idx: int) -> None:
        """The pools' draws for this batch, on the host before the step (so a captured step replays them)."""
        self._plan_pools(batch)
        self._pools_planned = True

    def _plan_pools(self, batch: dict[str, Any]) -> None:
        """Plan both pools' queries for ``batch`` in the order the step makes them: ``fake_B``'s, then ``fake_A``'s.

        A pool sees the whole batch's fakes (every process's, see ImagePool.query); the batch at hand gives the
        count, as an epoch's last batch may be smaller. Under ``loop.nonfinite: skip`` the pools and their random
        state are saved first, so that a bad batch takes back its draws too.
        """
        self._pools_before = self._pool_state() if self.config.loop.nonfinite == "skip" else None
        world = self.dist.world_size if self.dist.enabled else 1
        self.fake_B_pool.plan(len(batch["A"]) * world)
        self.fake_A_pool.plan(len(batch["B"]) * world)

    def _pool_state(self) -> tuple[Any, Any, Any]:
        """What a step may change in the pools (their images and count, and the random state), for ``skip``."""
        return self.fake_A_pool.snapshot(), self.fake_B_pool.snapshot(), self.pool_random.getstate()

    def _restore_pools(self, state: tuple[Any, Any, Any]) -> None:
        self.fake_A_pool.restore(state[0])
        self.fake_B_pool.restore(state[1])
        self.pool_random.setstate(state[2])

    def graph_blocker(self) -> str | None:
        """Under ``loop.nonfinite: skip`` a bad step restores the pools after reading its flag on the host."""
        if self.config.loop.nonfinite == "skip":
            return "loop.nonfinite: skip restores the CycleGAN image pools after reading a flag on the host"
        return None

    @hookimpl
    def train_step(self, batch: dict[str, Any], batch_idx: int) -> dict[str, Any]:
        cfg, autocast, gan = self.config.loss, self.kit.autocast, self.objective
        real_a, real_b = self.to_device(batch["A"]), self.to_device(batch["B"])
        if not self._pools_planned:  # called on its own (a test, a benchmark), not by the engine
            self._plan_pools(batch)
        self._pools_planned = False
        with self.kit.step(batch_idx) as step:
            pools = self._pools_before if step.skip else None
            with autocast():
                fake_b = self._g_a(real_a)
                rec_a = self._g_b(fake_b)
                fake_a = self._g_b(real_b)
                rec_b = self._g_a(fake_a)

            with self.update_g:  # G_A and G_B; D_A and D_B are frozen and judge as bare modules
                with autocast():
                    if cfg.lambda_identity > 0:
                        loss_idt_a = F.l1_loss(self._g_a(real_b), real_b) * cfg.lambda_B * cfg.lambda_identity
                        loss_idt_b = F.l1_loss(self._g_b(real_a), real_a) * cfg.lambda_A * cfg.lambda_identity
                    else:
                        loss_idt_a = loss_idt_b = torch.zeros((), device=self.device)
                    loss_g_a = gan.generator_loss(self._d_a_judge(fake_b))
                    loss_g_b = gan.generator_loss(self._d_b_judge(fake_a))
                    loss_cycle_a = F.l1_loss(rec_a, real_a) * cfg.lambda_A
                    loss_cycle_b = F.l1_loss(rec_b, real_b) * cfg.lambda_B
                    loss_g = loss_g_a + loss_g_b + loss_cycle_a + loss_cycle_b + loss_idt_a + loss_idt_b
                self.update_g.backward(loss_g)

            with self.update_d:  # D_A on B against pooled fake_B, D_B on A against pooled fake_A
                with autocast():
                    loss_d_a = self.discriminator_loss(self._d_a, self._d_a_judge, real_b,
                                                       self.fake_B_pool.query(fake_b, self.dist))
                    loss_d_b = self.discriminator_loss(self._d_b, self._d_b_judge, real_a,
                                                       self.fake_A_pool.query(fake_a, self.dist))
                    loss_d = loss_d_a + loss_d_b
                self.update_d.backward(loss_d)
        # A host read of the flags: under loop.nonfinite: skip this step cannot be captured in a CUDA graph, and
        # the engine runs it eagerly.
        if pools is not None and step.flags and bool(self.dist.any_on_device(torch.stack(step.flags).any())):
            self._restore_pools(pools)  # the kit left the updates out; the pools forget the batch's fakes too
        losses = {"G/G_A": loss_g_a, "G/G_B": loss_g_b, "G/cycle_A": loss_cycle_a, "G/cycle_B": loss_cycle_b,
                  "G/idt_A": loss_idt_a, "G/idt_B": loss_idt_b, "G/total": loss_g,
                  "D/D_A": loss_d_a, "D/D_B": loss_d_b, "D/total": loss_d}
        return {key: value.detach() for key, value in losses.items()}

    # -- epochs, validation, examples ---------------------------------------
    @contextlib.contextmanager
    def _evaluating(self, eval_mode: bool) -> Iterator[None]:
        """Both generators in eval mode (or train mode with their statistics restored), without gradients."""
        with evaluation_mode(self.G_A, eval_mode), evaluation_mode(self.G_B, eval_mode):
            yield

    def example_indices(self, total: int, count: int) -> list[int]:
        """The first ``count`` images of the examples split, as the reference shows its first batches."""
        return list(range(min(count, total)))

    def translate(self, real_a: torch.Tensor, real_b: torch.Tensor) -> dict[str, torch.Tensor]:
        """fake_B, rec_A, fake_A and rec_B of a batch (call under :meth:`_evaluating`)."""
        with self.kit.autocast():
            fake_b = self.G_A(real_a)
            fake_a = self.G_B(real_b)
            return {"fake_B": fake_b, "rec_A": self.G_B(fake_b), "fake_A": fake_a, "rec_B": self.G_A(fake_a)}

    def write_examples(self, path: Any) -> Any:
        """One grid, both directions: rows real_A | fake_B | rec_A, then rows real_B | fake_A | rec_B, the columns
        labelled real | translated | reconstructed and each row by its direction (``A to B``, ``B to A``)."""
        batch = self.example_batch()
        if batch is None:
            return None
        real_a, real_b = batch["A"], batch["B"]
        with self._evaluating(self.config.validation.eval_mode):
            out = self.translate(self.to_device(real_a), self.to_device(real_b))
        return save_grid(path, torch.cat([real_a, real_b]), torch.cat([out["fake_B"].cpu(), out["fake_A"].cpu()]),
                         torch.cat([out["rec_A"].cpu(), out["rec_B"].cpu()]), columns=self.example_columns,
                         rows=["A to B"] * len(real_a) + ["B to A"] * len(real_b))

    def _domain_loader(self, domain: str, max_batches: int | None) -> DataLoader:
        """This rank's share of the val split's ``domain`` images, in order."""
        images = self.val_set.domain(domain)
        total = len(images) if max_batches is None else min(len(images), max_batches * images.batch_size)
        options = self.val_set.options
        return leave_stopping_to_main(DataLoader(images, batch_size=images.batch_size,
                                                 sampler=list(range(self.dist.rank, total, self.dist.world_size)),
                                                 num_workers=options.num_workers,
                                                 pin_memory=self.device.type == "cuda"))

    @hookimpl
    def validate(self, epoch: int) -> dict[str, float] | None:
        if self.val_set is None or not len(self.val_set) or not hasattr(self.val_set, "domain"):
            return None
        cfg = self.config.validation
        there_and_back = {"A": (self.G_A, self.G_B), "B": (self.G_B, self.G_A)}
        metrics: dict[str, float] = {}
        with self._evaluating(cfg.eval_mode):
            for domain, (forth, back) in there_and_back.items():
                accumulator = MetricAccumulator(cfg.metrics, self.registry)
                for batch in self.batches(self._domain_loader(domain, cfg.max_batches)):
                    real = self.to_device(batch["image"])
                    with self.kit.autocast():
                        reconstructed = back(forth(real))
                    accumulator.update(reconstructed, real)
                accumulator.reduce(self.dist, self.device)  # the whole split's sums, in every process
                metrics.update({f"cycle_{domain}_{name}": value for name, value in accumulator.compute().items()})
        for name in cfg.metrics:
            values = [metrics[f"cycle_{domain}_{name}"] for domain in "AB" if f"cycle_{domain}_{name}" in metrics]
            if values:
                metrics[f"cycle_{name}"] = sum(values) / len(values)
        return metrics
