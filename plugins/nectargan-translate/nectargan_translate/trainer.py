"""``TranslationTrainer``: the base of an image-to-image translation trainer, on the core's trainer kit.

pix2pix and CycleGAN set themselves up the same way around their own networks
and step: a memory format and device transfer, Adam for the generators and
for the discriminators with LR schedules fitted to the run, the precision
policy with a scaler per side, the kit's two updates, a val or test split that
may be missing, a training loader, fixed example images, the LR refreshed
after a resume and the epoch-end schedules and example grids. This class holds
that once, so a third trainer (a pix2pixHD, a UNIT) writes only its networks,
its ``train_step`` and its options.
"""

from __future__ import annotations

import sys
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar, Iterable, Mapping, Sequence

import torch
from torch.utils.data import DataLoader

from nectargan_core import ConfigError, ResumableSampler, Trainer, TrainerKit, hookimpl
from nectargan_losses import HeldAfter, refresh_lr

from .compilation import compile_for_training
from .contracts import batch_size_of, check_dataset_item
from .evaluation import MetricAccumulator, evaluation_mode
from .examples import save_grid, spread_indices, train_view
from .generators import GeneratorSpec
from .options import ValidationSection, data_channels
from .training import (EarlyStopping, check_sync_batchnorm, lr_at, make_adam, make_lr_schedulers, run_schedule,
                       write_epoch_examples)

class DatasetEpochSampler(ResumableSampler):
    """The training sampler of another plugin's dataset: also tells the dataset the epoch (``set_epoch``), if it
    has one, so per-epoch randomness (crops, flips) can follow it, a resumed epoch included."""

    def __init__(self, dataset: Any, *, seed: int) -> None:
        super().__init__(len(dataset), seed=seed)
        self.dataset = dataset

    def set_epoch(self, epoch: int) -> None:
        super().set_epoch(epoch)
        set_epoch = getattr(self.dataset, "set_epoch", None)
        if callable(set_epoch):
            set_epoch(epoch)


class TranslationTrainer(Trainer):
    """Base class of an image-to-image translation trainer: declare the generators, build the networks, write the step.

    A subclass is registered with an options model holding the shared
    sections (``data``, ``models``, ``optim``, ``precision``, ``validation``,
    ``examples``; ``UnpairedDataChoice`` for ``data`` when it trains on two
    domains) and sets ``generators`` (direction -> tracked generator, which
    gives it the data tools, ``nectargan test``, ``predict``, ``export`` and
    results pages) and ``paired`` (``generator_spec`` has a default). Its ``setup`` calls
    :meth:`setup_data`, builds and tracks the networks (moved to
    :attr:`memory_format`), then calls :meth:`setup_updates`; its
    ``train_step`` runs inside ``with self.kit.step(batch_idx):`` and trains
    with ``self.update_d`` and ``self.update_g``. The rest is here; the names
    in :attr:`reserved` are this class's.
    """

    kit = TrainerKit()
    reserved = frozenset({
        # what the set-up below assigns
        "train_set", "val_set", "opt_g", "opt_d", "sched_g", "sched_d", "scaler_g", "scaler_d", "update_g",
        "update_d", "lr_units", "precision", "early_stopping",
        # what a subclass calls, never redefines
        "setup_data", "dataset", "optional_split", "builtin_dataset", "memory_format", "to_device", "compiled",
        "setup_updates", "translator", "eval_loader", "example_source", "updates_due",
        # the base's own hooks (a subclass's on_epoch_end and on_load_checkpoint run beside them)
        "finish_epoch", "refresh_after_resume",
        # the example images, cached by example_batch
        "_examples",
    })
    """This class's state and helpers: a subclass that defines one of these names, or assigns one, is refused in
    one line. A subclass may override ``check_config``, ``generator_spec``, ``describe``, ``train_dataloader``,
    ``example_indices``, ``example_batch``, ``write_examples`` and ``validate``, and may implement any hook,
    ``on_epoch_end`` and ``on_load_checkpoint`` included: the base's epoch-end work (epoch-unit LR schedules, the
    example grid) and its LR refresh after a resume are hooks of their own, which run whether or not a subclass
    calls ``super()``."""
    validation_metrics: ClassVar[tuple[str, ...]] = ()
    """Metrics an overridden ``validate`` returns besides ``validation.metrics`` (without ``val/``), which
    ``checkpoint.best_metric`` may then name; checked before the run directory exists."""
    #: Every process validates its share of the val split; the sums are reduced.
    distributed_validation = True
    #: The columns of a paired trainer's example grids.
    example_columns = ("input", "output", "target")
    generators: ClassVar[Mapping[str, str]] = {}
    """For the inference commands (test, predict, export): each direction (``AtoB``, ``BtoA``) this trainer's
    checkpoints can run, and the tracked name of the generator that translates that way, the default first
    (pix2pix: ``{"AtoB": "generator"}``). Empty: the commands refuse its checkpoints."""
    paired: ClassVar[bool] = True
    """Aligned pairs (the ``paired`` dataset, ``root/<split>/``) or two domains (False: the ``unpaired`` dataset,
    ``root/<split>A/`` and ``root/<split>B/``): the built-in dataset, its folders, and the item check."""

    @classmethod
    def generator_spec(cls, config: Any, direction: str) -> GeneratorSpec:
        """How the generator of ``direction`` is rebuilt from a checkpoint's stored config.

        By default ``models.generator`` with the data's channels, swapped for
        ``BtoA`` (CycleGAN's two generators share one choice); a trainer whose
        generators differ overrides this.
        """
        a, b = data_channels(config)
        return GeneratorSpec(config.models.generator, *((a, b) if direction == "AtoB" else (b, a)))

    @classmethod
    def check_config(cls, config: Any, registry: Any) -> None:
        """Before the run directory exists (after the engine's checks, precision on this device among them):
        ``check_translation_config``: the kind of data, ``optim.d_every``/``g_every`` (for a trainer without the
        ``update_ratio`` capability), ``best_metric``, the built-in dataset's folder and train split (listed, not
        read), the networks (built on the meta device) and the image size they can take."""
        from .preflight import check_config as check_translation_config

        check_translation_config(config, registry)

    # -- set-up ------------------------------------------------------------
    def setup_data(self) -> None:
        """The train set and the val set (None when the data have no val split), as ``train_set`` and ``val_set``.

        Refuses first what cannot run (``check_sync_batchnorm``).
        """
        from .preflight import check_data_kind

        check_sync_batchnorm(self)
        check_data_kind(self.config, type(self))
        self.train_set = self.dataset("train")
        self.val_set = self.optional_split("val")
        if isinstance(self.config.validation, ValidationSection):  # its early_stop_* options
            self.early_stopping = self.track("early_stopping", EarlyStopping())

    @property
    def builtin_dataset(self) -> str:
        """This layer's dataset for the trainer's kind of data: ``paired`` or ``unpaired``."""
        return "paired" if self.paired else "unpaired"

    def dataset(self, split: str) -> Any:
        """The configured dataset's ``split``; another plugin's paired dataset is checked on its first item."""
        data = self.config.data
        dataset = self.build("dataset", data, split=split, seed=self.config.run.seed)
        if self.paired and data.name != self.builtin_dataset:
            component = self.registry.get("dataset", data.name)
            check_dataset_item(dataset, component.name, component.provided_by, split, data_channels(self.config))
        return dataset

    def optional_split(self, split: str) -> Any:
        """The val or test dataset, or None (with one warning) when the built-in dataset has no such folder."""
        data = self.config.data
        if data.name == self.builtin_dataset:
            root = Path(data.options["root"])
            folder = (data.options.get(split) or {}).get("folder", split)
            if self.paired:
                missing = not (root / folder).is_dir()
                problem = f"{root / folder}: no {split} split"
            else:
                missing = not any((root / f"{folder}{domain}").is_dir() for domain in "AB")
                problem = f"{root}: no {folder}A/ or {folder}B/ folder"
            if missing:
                print(f"warning: {problem}; " + ("validation is skipped" if split == "val" else "using train images"),
                      file=sys.stderr)
                return None
        return self.dataset(split)

    @cached_property
    def memory_format(self) -> torch.memory_format:
        """channels_last when ``precision.channels_last`` is set: networks and batches are moved to it."""
        return torch.channels_last if self.config.precision.channels_last else torch.contiguous_format

    def to_device(self, images: torch.Tensor) -> torch.Tensor:
        """A batch of images on the run's device, in :attr:`memory_format` (without waiting for the copy)."""
        return images.to(self.device, non_blocking=True).contiguous(memory_format=self.memory_format)

    def compiled(self, module: torch.nn.Module) -> Any:
        """``module`` compiled as ``precision.compile`` asks (sharing its parameters), or ``module`` itself."""
        precision = self.config.precision
        return compile_for_training(module, precision.compile, precision.compile_backend)

    def setup_updates(self, g_networks: torch.nn.Module | Sequence[torch.nn.Module],
                      g_params: Iterable[torch.nn.Parameter], d_networks: torch.nn.Module | Sequence[torch.nn.Module],
                      d_params: Iterable[torch.nn.Parameter], *, names: tuple[str, str] = ("g", "d")) -> None:
        """The generators' and the discriminators' Adam, LR schedules, scalers and kit updates.

        ``g_networks``/``d_networks`` are what each update trains (the
        wrappers ``train_step`` calls: compiled, in DDP); ``g_params`` and
        ``d_params`` the parameters each optimizer steps. Sets ``opt_g``,
        ``opt_d``, ``sched_g``, ``sched_d``, ``scaler_g``, ``scaler_d``,
        ``update_g``, ``update_d``, ``lr_units`` and ``precision``; the state
        is tracked (checkpointed) as ``opt_<g>``, ``sched_<g>``, ``scaler_<g>``
        and the same with ``d``, ``names`` giving ``<g>`` and ``<d>``. Step-unit
        schedules step with their optimizer; epoch-unit ones at the epoch's end.
        """
        g, d = names
        optim = self.config.optim
        self.opt_g = self.track(f"opt_{g}", make_adam(g_params, optim.lr_g, optim, self.device))
        self.opt_d = self.track(f"opt_{d}", make_adam(d_params, optim.lr_d, optim, self.device))
        self.sched_g, self.sched_d, self.lr_units = make_lr_schedulers(self, self.opt_g, self.opt_d,
                                                                       (f"sched_{g}", f"sched_{d}"))
        self.kit.accumulate = optim.gradient_accumulation
        self.precision = self.kit.precision
        self.scaler_g = self.track(f"scaler_{g}", self.kit.scaler())
        self.scaler_d = self.track(f"scaler_{d}", self.kit.scaler())
        self.update_d = self.kit.update(d_networks, self.opt_d, scaler=self.scaler_d, clip=optim.grad_clip,
                                        scheduler=self.sched_d, scheduler_unit=self.lr_units[1])
        self.update_g = self.kit.update(g_networks, self.opt_g, scaler=self.scaler_g, clip=optim.grad_clip,
                                        scheduler=self.sched_g, scheduler_unit=self.lr_units[0])

    def translator(self, direction: str = "AtoB") -> torch.nn.Module:
        """The tracked generator of ``direction`` (see ``generators``): what validation and the examples run."""
        return self.stateful[self.generators[direction]]

    # -- what defines the run --------------------------------------------------
    def describe(self) -> dict[str, str]:
        """The engine's rows with the translation ones: precision, every tracked network with its parameter
        count, the data per split, the optimizers and LR schedule, and the example images.

        pix2pix adds its own, richer rows (its loss spec, the discriminator's receptive field).
        """
        base = super().describe()
        section = self.config.precision
        precision = f"{self.precision.name} (precision.amp: {section.amp})"
        if section.channels_last:
            precision += ", channels_last"
        if section.compile != "off":
            precision += f", torch.compile {section.compile} ({section.compile_backend})"
        networks = "; ".join(f"{name} {sum(p.numel() for p in module.parameters()):,} parameters"
                             for name, module in self.stateful.items() if isinstance(module, torch.nn.Module))
        models = self.config.models
        data = self.config.data
        def size(dataset: Any) -> str:  # two domains: images of each (pairs are drawn up to the larger)
            domains = getattr(dataset, "paths", None) if dataset is not None else None
            if isinstance(domains, dict) and set(domains) == {"A", "B"}:
                return f"{len(domains['A'])} A + {len(domains['B'])} B"
            return str(len(dataset)) if dataset is not None else "no"

        sizes = " / ".join(f"{size(dataset)} {split}"
                           for split, dataset in (("train", self.train_set), ("val", self.val_set)))
        optim = self.config.optim
        defaults = self.opt_g.defaults
        kernel = "fused" if defaults.get("fused") else "foreach" if defaults.get("foreach") else "single"
        schedule = run_schedule(self, optim.lr_schedule)
        rows = {"trainer": base["trainer"], "device": base["device"], "precision": precision,
                "networks": f"{networks} (generator {models.generator.name}, discriminator "
                            f"{models.discriminator.name})",
                "data": f"{data.name} {data.options.get('root') or ''}: {sizes}".replace(" :", ":"),
                "optimizer": f"Adam ({kernel}), lr G {optim.lr_g:g}, D {optim.lr_d:g}, "
                             f"betas ({optim.beta1:g}, {optim.beta2:g})",
                "lr schedule": f"{optim.lr_schedule.name}: {schedule!r}, stepped per {self.lr_units[0]}",
                "schedule": base["schedule"]}
        if self.config.examples.every_epochs:
            dataset, indices, split = self.example_source
            rows["examples"] = (f"{len(indices)} {split} images of {len(dataset)}, every "
                                f"{self.config.examples.every_epochs} epoch(s)")
        rows.update({key: value for key, value in base.items() if key not in rows})
        return rows

    # -- loading -------------------------------------------------------------
    def train_dataloader(self) -> DataLoader:
        """The built-in dataset's resumable loader; another plugin's dataset in a plain DataLoader, resumable too."""
        from .data.loader import build_dataloader
        from .data.paired import PairedDataset
        from .data.unpaired import UnpairedDataset

        if isinstance(self.train_set, (PairedDataset, UnpairedDataset)):
            return build_dataloader(self.train_set, device=self.device)
        batch_size = int(batch_size_of(self.config.data.options, "train") or getattr(self.train_set, "batch_size", 1))
        sampler = DatasetEpochSampler(self.train_set, seed=self.config.run.seed)
        return DataLoader(self.train_set, batch_size=batch_size, sampler=sampler)

    def updates_due(self) -> tuple[bool, bool]:
        """Whether D and whether G update at this step: ``optim.d_every`` and ``optim.g_every`` of the global step.

        A trainer that follows it in ``train_step`` (entering ``update_d`` only
        when D is due, ``update_g`` only when G is) declares the capability
        ``UPDATE_RATIO``, and its users may set the two keys; it also adds the
        pair to its ``graph_key``, as pix2pix does.
        """
        optim = self.config.optim
        return self.global_step % optim.d_every == 0, self.global_step % optim.g_every == 0

    # -- epochs and examples ---------------------------------------------------
    # The base's own hooks are registered under names of their own (pluggy's ``specname``), so a subclass that
    # defines on_load_checkpoint or on_epoch_end adds its code and cannot switch the base's off by not calling
    # super(). Both are reserved.
    @hookimpl(specname="on_load_checkpoint")
    def refresh_after_resume(self) -> None:
        """After a resume, the LR the (possibly re-fitted) schedule gives now, not the one saved with the old.

        A change is said in one line with the LR now and at the next epoch (a schedule fitted to
        ``loop.epochs`` changes when a resume raises it), pointing at ``--keep-schedule``; a schedule kept
        that way says which epochs hold its last LR."""
        changes = []
        for label, scheduler, unit in (("G", self.sched_g, self.lr_units[0]), ("D", self.sched_d, self.lr_units[1])):
            saved = [group["lr"] for group in scheduler.optimizer.param_groups]
            refresh_lr(scheduler)
            now = [group["lr"] for group in scheduler.optimizer.param_groups]
            if any(abs(a - b) > 1e-3 * max(abs(a), abs(b), 1e-12) for a, b in zip(saved, now)):
                later = (f", {lr_at(scheduler, scheduler.last_epoch + 1):.3g} at epoch {self.epochs_done + 2}"
                         if unit == "epoch" and self.epochs_done + 1 < self.config.loop.epochs else "")
                changes.append(f"{label} {saved[0]:.3g} -> {now[0]:.3g} now{later}")
        if not self.is_main:
            return
        loop = self.config.loop
        held = isinstance(run_schedule(self, self.config.optim.lr_schedule), HeldAfter)
        if held and self.epochs_done < loop.epochs:  # the plan's end reached: its last LR holds (not a change)
            print(f"note: the LR schedule keeps its plan of {loop.fitted_epochs} epochs (loop.schedule_epochs, "
                  f"--keep-schedule): epochs {loop.fitted_epochs + 1} to {loop.epochs} hold its last LR "
                  f"(G {lr_at(self.sched_g, loop.fitted_epochs - 1):.3g})", file=sys.stderr)
        elif changes and not held:
            fitted_to = "loop.schedule_epochs" if loop.schedule_epochs is not None else "loop.epochs"
            print(f"warning: the learning rate changed on resume at epoch {self.epochs_done + 1} of {loop.epochs} "
                  f"({'; '.join(changes)}): optim.lr_schedule is fitted to {fitted_to}, which this resume changed; "
                  "to finish the saved plan instead and then hold its last LR, resume with --keep-schedule "
                  "(or give the schedule its own lengths: optim.lr_schedule: {name: pix2pix_linear, n_epochs: N, "
                  "n_epochs_decay: M})", file=sys.stderr)

    @hookimpl(specname="on_epoch_end", tryfirst=True)
    def finish_epoch(self, epoch: int) -> None:
        """Epoch-unit LR schedules step; the epoch's example grid is written (``examples.every``). Runs before
        a subclass's on_epoch_end, which sees the next epoch's learning rate."""
        self.kit.step_epoch_schedulers()
        write_epoch_examples(self, epoch)

    def on_load_checkpoint(self) -> None:
        """Nothing: the base refreshes the LR in a hook of its own. A subclass may define this hook
        (``@hookimpl``); calling ``super()`` is harmless and not needed."""

    def on_epoch_end(self, epoch: int) -> None:
        """Nothing: the base's epoch-end work runs in a hook of its own (before a subclass's). A subclass may
        define this hook (``@hookimpl``); calling ``super()`` is harmless and not needed."""

    def example_indices(self, total: int, count: int) -> list[int]:
        """Which of the example split's ``total`` images the grids show: ``count`` spread over it by ``run.seed``."""
        return spread_indices(total, count, self.config.run.seed)

    @cached_property
    def example_source(self) -> tuple[Any, list[int], str]:
        """The examples' dataset, the indices of their images in it, and the split's name.

        The split is ``examples.split``; one that is missing or empty falls
        back to the train images without augmentation. The same images come
        every epoch and after every resume.
        """
        cfg = self.config.examples
        dataset, split = (self.val_set if cfg.split == "val" else None), cfg.split
        if cfg.split == "test":
            dataset = self.optional_split("test")
        if dataset is None or not len(dataset):
            dataset, split = train_view(self, self.builtin_dataset), "train"
        return dataset, self.example_indices(len(dataset), cfg.count), split

    def example_batch(self) -> dict[str, torch.Tensor] | None:
        """The example images as one batch of ``A`` and ``B`` (on the host), or None when there are none."""
        if getattr(self, "_examples", None) is None:
            dataset, indices, _ = self.example_source
            items = [dataset[i] for i in indices]
            if not items:
                return None
            self._examples = {key: torch.stack([item[key] for item in items]) for key in ("A", "B")}
        return self._examples

    def write_examples(self, path: Any) -> Any:
        """A paired trainer's grid: the example inputs, the generator's outputs and the targets, one row each."""
        batch = self.example_batch()
        if batch is None:
            return None
        generator = self.translator()
        with evaluation_mode(generator, self.config.validation.eval_mode), self.kit.autocast():
            fake = generator(self.to_device(batch["A"]))
        return save_grid(path, batch["A"], fake, batch["B"], columns=self.example_columns)

    # -- validation ------------------------------------------------------------
    def eval_loader(self, dataset: Any, max_batches: int | None = None, split: str = "val") -> DataLoader:
        """The samples of ``dataset`` (the ``split`` split) in order (the first ``max_batches`` batches' worth, or all).

        In a distributed run, only this rank's share: every ``world_size``-th sample from ``rank`` on.
        """
        from .data.loader import build_dataloader
        from .data.paired import PairedDataset

        paired = isinstance(dataset, PairedDataset)
        split = dataset.split if paired else split
        batch_size = batch_size_of(self.config.data.options, split)  # declared: see DatasetChoice
        total = len(dataset) if max_batches is None else min(len(dataset), max_batches * batch_size)
        indices = range(self.dist.rank, total, self.dist.world_size)
        if paired:
            return build_dataloader(dataset, device=self.device, indices=indices)
        return DataLoader(dataset, batch_size=batch_size, sampler=list(indices))

    @hookimpl
    def validate(self, epoch: int) -> dict[str, float] | None:
        """A paired trainer's validation: ``validation.metrics`` of the generator's outputs against the targets.

        Over the val split (``validation.max_batches`` of it), each process its
        share, summed across processes; then early stopping, if configured.
        An unpaired trainer has no targets: it overrides this (CycleGAN scores
        its cycle reconstructions).
        """
        if not self.paired:
            raise NotImplementedError(f"{type(self).__qualname__}: an unpaired trainer validates in a validate "
                                      "hook of its own (there are no targets to compare with)")
        if self.val_set is None or not len(self.val_set):
            return None
        cfg = self.config.validation
        generator = self.translator()
        accumulator = MetricAccumulator(cfg.metrics, self.registry)
        with evaluation_mode(generator, cfg.eval_mode):
            for batch in self.batches(self.eval_loader(self.val_set, cfg.max_batches)):
                with self.kit.autocast():
                    fake = generator(self.to_device(batch["A"]))
                accumulator.update(fake, self.to_device(batch["B"]))
        accumulator.reduce(self.dist, self.device)  # the whole split's sums, in every process
        metrics = accumulator.compute()
        if isinstance(cfg, ValidationSection) and cfg.early_stop_metric is not None:
            key = cfg.early_stop_metric.removeprefix("val/")
            self.early_stopping.update(metrics[key], key, cfg.early_stop_mode, cfg.early_stop_min_delta,
                                       self.registry)
            if self.early_stopping.bad >= cfg.early_stop_patience:
                self.request_stop(f"early stopping: val/{key} did not improve for {cfg.early_stop_patience} "
                                  f"validations (best {self.early_stopping.best:.4g})")
        return metrics
