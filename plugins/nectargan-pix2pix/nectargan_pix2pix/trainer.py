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
schedules) are the core's trainer kit (:mod:`nectargan_core.kit`), declared
here as ``kit = TrainerKit()``.
"""

from __future__ import annotations

import contextlib
import sys
from functools import cached_property
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import DataLoader

from nectargan_core import ResumableSampler, Trainer, TrainerKit, hookimpl, optimizer_step
from nectargan_core.errors import ConfigError
from nectargan_core.generators import GeneratorSpec
from nectargan_losses.manager import LossManager
from nectargan_losses.schedules import refresh_lr
from nectargan_translate.compilation import compile_for_training
from nectargan_translate.contracts import batch_size_of, check_dataset_item, is_conditional
from nectargan_translate.evaluation import MetricAccumulator, evaluation_mode
from nectargan_translate.examples import save_grid, spread_indices, train_view
from nectargan_translate.networks import build_discriminator, build_generator
from nectargan_translate.options import data_channels
from nectargan_translate.precision import Precision
from nectargan_translate.preflight import check_config
from nectargan_translate.training import (EarlyStopping, check_sync_batchnorm, make_adam, make_lr_schedulers,
                                          write_epoch_examples)

from .options import Pix2pixOptions
from .summary import pix2pix_rows


class Pix2pixTrainer(Trainer):
    """Paired image-to-image translation with a conditional GAN (Isola et al., 2017)."""

    options = Pix2pixOptions
    #: What ``nectargan export --format reference`` writes: the reference's network name -> (tracked network,
    #: config key of its model); and the reference's ``--model`` that loads them.
    reference_networks = {"G": ("generator", "models.generator")}
    reference_model = "pix2pix"
    #: Every process validates its share of the val split; the sums are reduced.
    distributed_validation = True
    #: The two updates' mechanics (and with them ``loop.nonfinite: skip``).
    kit = TrainerKit()
    #: For test, predict and export: one generator, from the training input to the target (data.direction
    #: decides which side of the data that is).
    generators = {"AtoB": "generator"}

    @classmethod
    def generator_spec(cls, config: Any, direction: str) -> GeneratorSpec:
        return GeneratorSpec(config.models.generator, *data_channels(config))

    # -- set-up ------------------------------------------------------------
    def setup(self) -> None:
        cfg = self.config
        data = cfg.data
        if data.name == "paired" and not data.options.get("root"):
            raise ConfigError("data.root: no dataset folder given; set data.root (make a synthetic one with: "
                              "nectargan data synth data/synth)")
        self.train_set = self._dataset("train")
        self.val_set = self._optional_split("val")
        self.memory_format = torch.channels_last if cfg.precision.channels_last else torch.contiguous_format
        check_sync_batchnorm(self)

        generator = build_generator(self.registry, cfg).to(self.device, memory_format=self.memory_format)
        discriminator = build_discriminator(self.registry, cfg).to(self.device, memory_format=self.memory_format)
        self.generator = self.track("generator", generator)
        self.discriminator = self.track("discriminator", discriminator)
        #: What train_step calls: the tracked modules, or compiled wrappers sharing their parameters,
        #: inside DistributedDataParallel in a distributed run. G's update judges with ``_d_judge``
        #: (no DDP: D gets no gradients then, so there is nothing to synchronise).
        self._g_train = self.parallel(
            compile_for_training(generator, cfg.precision.compile, cfg.precision.compile_backend))
        self._d_judge = compile_for_training(discriminator, cfg.precision.compile, cfg.precision.compile_backend)
        self._d_train = self.parallel(self._d_judge)
        #: A conditional D (the pix2pix default) judges cat(A, B); an unconditional one B alone.
        choice = self.registry.get("model", cfg.models.discriminator.name)
        self.conditional = is_conditional(discriminator, choice.name, choice.provided_by)

        optim = cfg.optim
        self.opt_g = self.track("opt_g", make_adam(generator.parameters(), optim.lr_g, optim, self.device))
        self.opt_d = self.track("opt_d", make_adam(discriminator.parameters(), optim.lr_d, optim, self.device))
        self.sched_g, self.sched_d, self.lr_units = make_lr_schedulers(self, self.opt_g, self.opt_d,
                                                                       ("sched_g", "sched_d"))

        self.precision = Precision.for_trainer(self)
        self.scaler_g = self.track("scaler_g", self.precision.scaler())
        self.scaler_d = self.track("scaler_d", self.precision.scaler())
        self.losses = self.track("losses", LossManager(
            cfg.loss, registry=self.registry, device=self.device, history_every=None))  # the engine logs loss means
        self.early_stopping = self.track("early_stopping", EarlyStopping())
        self._examples: dict[str, torch.Tensor] | None = None

        # D's update trains _d_train; G's trains _g_train (D frozen meanwhile). Step-unit schedules step
        # with their optimizer; epoch-unit ones in on_epoch_end.
        self.kit.accumulate = optim.gradient_accumulation
        self.update_d = self.kit.update(self._d_train, self.opt_d, scaler=self.scaler_d, clip=optim.grad_clip,
                                        scheduler=self.sched_d, scheduler_unit=self.lr_units[1])
        self.update_g = self.kit.update(self._g_train, self.opt_g, scaler=self.scaler_g, clip=optim.grad_clip,
                                        scheduler=self.sched_g, scheduler_unit=self.lr_units[0])

    def _optional_split(self, split: str) -> Any:
        """The val/test dataset, or None (with one warning) when the dataset has no such folder."""
        data = self.config.data
        if data.name == "paired":
            folder = Path(data.options["root"]) / (data.options.get(split) or {}).get("folder", split)
            if not folder.is_dir():
                print(f"warning: {folder}: no {split} split; "
                      + ("validation is skipped" if split == "val" else "using train images"), file=sys.stderr)
                return None
        return self._dataset(split)

    def _dataset(self, split: str) -> Any:
        """The dataset of ``split``; another plugin's is checked against pix2pix's contract on its first item."""
        data = self.config.data
        dataset = self.build("dataset", data, split=split, seed=self.config.run.seed)
        if data.name != "paired":
            component = self.registry.get("dataset", data.name)
            check_dataset_item(dataset, component.name, component.provided_by, split, data_channels(self.config))
        return dataset

    def train_dataloader(self) -> DataLoader:
        from nectargan_translate.data.paired import PairedDataset
        from nectargan_translate.data.loader import build_dataloader

        if isinstance(self.train_set, PairedDataset):
            return build_dataloader(self.train_set, device=self.device)
        batch_size = batch_size_of(self.config.data.options, "train")  # declared: see DatasetChoice
        sampler = ResumableSampler(len(self.train_set), seed=self.config.run.seed)
        return DataLoader(self.train_set, batch_size=batch_size, sampler=sampler)

    def eval_loader(self, dataset: Any, max_batches: int | None = None, split: str = "val") -> DataLoader:
        """The samples of ``dataset`` (the ``split`` split) in order (the first ``max_batches`` batches' worth, or all).

        In a distributed run, only this rank's share: every ``world_size``-th sample from ``rank`` on.
        """
        from nectargan_translate.data.paired import PairedDataset
        from nectargan_translate.data.loader import build_dataloader

        paired = isinstance(dataset, PairedDataset)
        split = dataset.split if paired else split
        batch_size = batch_size_of(self.config.data.options, split)  # declared: see DatasetChoice
        total = len(dataset) if max_batches is None else min(len(dataset), max_batches * batch_size)
        indices = range(self.dist.rank, total, self.dist.world_size)
        if paired:
            return build_dataloader(dataset, device=self.device, indices=indices)
        return DataLoader(dataset, batch_size=batch_size, sampler=list(indices))

    # -- the step ------------------------------------------------------------
    def _to_device(self, images: torch.Tensor) -> torch.Tensor:
        return images.to(self.device, non_blocking=True).contiguous(memory_format=self.memory_format)

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
        optim, step = self.config.optim, self.global_step
        return (step % optim.d_every == 0, step % optim.g_every == 0, tuple(self.losses.weights().items()))

    @hookimpl
    def train_step(self, batch: dict[str, Any], batch_idx: int) -> dict[str, Any]:
        optim, losses, autocast = self.config.optim, self.losses, self.precision.autocast
        real_a, real_b = self._to_device(batch["A"]), self._to_device(batch["B"])
        losses.set_position(self.epoch, self.global_step)
        logs: dict[str, Any] = {}
        update_g = self.global_step % optim.g_every == 0
        with self.kit.step(batch_idx):
            # fake_B = G(A), once. A DDP forward must be followed by its backward: when G is not
            # updated this step, run the bare module without gradients.
            with autocast(), contextlib.nullcontext() if update_g else torch.no_grad():
                fake_b = (self._g_train if update_g else self.generator)(real_a)

            if self.global_step % optim.d_every == 0:
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
        check_config(config, registry)

    def describe(self) -> dict[str, str]:
        """Networks with parameter counts, data per split, precision, loss, optimizer and examples."""
        return pix2pix_rows(self, super().describe())

    # -- epochs, validation, examples ---------------------------------------
    #: The columns of an example grid.
    example_columns = ("input", "output", "target")

    @hookimpl
    def on_load_checkpoint(self) -> None:
        """After a resume, the LR the (possibly re-fitted) schedule gives now, not the one saved with the old."""
        refresh_lr(self.sched_g)
        refresh_lr(self.sched_d)

    @hookimpl
    def on_epoch_end(self, epoch: int) -> None:
        self.kit.step_epoch_schedulers()
        write_epoch_examples(self, epoch)

    @cached_property
    def example_source(self) -> tuple[Any, list[int], str]:
        """The examples' dataset, the indices of their images in it, and the split's name.

        The images are spread over the split (:func:`spread_indices`, seeded by
        ``run.seed``), the same ones every epoch and after every resume.
        """
        cfg = self.config.examples
        dataset, split = (self.val_set if cfg.split == "val" else None), cfg.split
        if cfg.split == "test":
            dataset = self._optional_split("test")
        if dataset is None or not len(dataset):
            dataset, split = train_view(self, "paired"), "train"
        return dataset, spread_indices(len(dataset), cfg.count, self.config.run.seed), split

    def example_batch(self) -> dict[str, torch.Tensor] | None:
        """The same example images every time (so progress is visible), spread over their split."""
        if self._examples is None:
            dataset, indices, _ = self.example_source
            items = [dataset[i] for i in indices]
            if not items:
                return None
            self._examples = {key: torch.stack([item[key] for item in items]) for key in ("A", "B")}
        return self._examples

    def write_examples(self, path: Any) -> Any:
        batch = self.example_batch()
        if batch is None:
            return None
        with evaluation_mode(self.generator, self.config.validation.eval_mode), self.precision.autocast():
            fake = self.generator(self._to_device(batch["A"]))
        return save_grid(path, batch["A"], fake, batch["B"])

    @hookimpl
    def validate(self, epoch: int) -> dict[str, float] | None:
        if self.val_set is None or not len(self.val_set):
            return None
        cfg = self.config.validation
        accumulator = MetricAccumulator(cfg.metrics, self.registry)
        with evaluation_mode(self.generator, cfg.eval_mode):
            for batch in self.eval_loader(self.val_set, cfg.max_batches):
                with self.precision.autocast():
                    fake = self.generator(self._to_device(batch["A"]))
                accumulator.update(fake, self._to_device(batch["B"]))
        accumulator.reduce(self.dist, self.device)  # the whole split's sums, in every process
        metrics = accumulator.compute()
        if cfg.early_stop_metric is not None:
            key = cfg.early_stop_metric.removeprefix("val/")
            self.early_stopping.update(metrics[key], key, cfg.early_stop_mode, cfg.early_stop_min_delta,
                                       self.registry)
            if self.early_stopping.bad >= cfg.early_stop_patience:
                self.request_stop(f"early stopping: val/{key} did not improve for {cfg.early_stop_patience} "
                                  f"validations (best {self.early_stopping.best:.4g})")
        return metrics
