"""Checks of a pix2pix config that need no training, made before a run directory exists.

A mistake found while the trainer sets up (no dataset folder, an image size
the generator cannot take, a discriminator too deep for the crop) used to
leave a ``failed`` run directory behind it. These checks find such mistakes
from the config alone, cheaply: the dataset is listed but not read, and the
networks are built on the meta device (no memory, no initialisation).
"""

from __future__ import annotations

from typing import Any, Optional

import torch

from nectargan_core import ConfigError, NectarGANError, Registry

from .data.check import inspect_split
from .data.listing import split_dir
from .data.options import parse_options
from .networks import build_discriminator, build_generator

#: Errors a network constructor raises for options it cannot build; anything else (a model that cannot
#: be built on the meta device, say) leaves the check to the real build.
BUILD_ERRORS = (ValueError, TypeError, NectarGANError)


def check_config(config: Any, registry: Registry) -> None:
    """Raise a one-line :class:`ConfigError` (or ``DatasetError``) for what the config gets wrong."""
    trainer = trainer_class(config, registry)
    if trainer is not None:
        check_data_kind(config, trainer)
        check_update_ratio(config, trainer)
    check_best_metric(config, registry)
    check_data(config)
    check_unpaired_data(config)
    generator = meta_network("generator", lambda: build_generator(registry, config), config)
    discriminator = meta_network("discriminator", lambda: build_discriminator(registry, config), config)
    size = training_size(config)
    if size is not None:
        check_size(size, generator, discriminator, config)


def check_data(config: Any) -> None:
    """The dataset folder and its train split exist and hold pairs (listed, not read)."""
    data = config.data
    if data.name != "paired":
        return
    if not data.options.get("root"):
        raise ConfigError("data.root: no dataset folder given; set data.root (make a synthetic one with: "
                          "nectargan data synth data/synth)")
    options = parse_options(data.options)
    folder = split_dir(options.root, options.folder("train"))
    report = inspect_split(folder, options.layout, verify="none")
    if report.problems:
        raise ConfigError(f"data.root: {report.problems[0]}")
    pairs = min(len(report.pairs), options.max_images or len(report.pairs))
    if options.drop_last and pairs < options.batch_size:
        raise ConfigError(f"data.batch_size: {options.batch_size} is more than the {pairs} training pairs of {folder} "
                          "and data.drop_last is true, so an epoch would have no batch; lower data.batch_size or "
                          "set data.drop_last: false")
    if options.cache in ("memory", "device"):
        check_cache_fits(config, options)


def trainer_class(config: Any, registry: Any) -> Optional[type]:
    """The class of the config's trainer, or None where the registry cannot give it (checks that need it skip)."""
    try:
        loaded = registry.get("trainer", config.trainer).load()
    except Exception:  # noqa: BLE001 - the engine reports an unknown or broken trainer itself
        return None
    return loaded if isinstance(loaded, type) else None


def check_data_kind(config: Any, trainer: type) -> None:
    """A paired trainer is not given the unpaired dataset, nor an unpaired trainer the paired one."""
    paired = getattr(trainer, "paired", True)
    other = "unpaired" if paired else "paired"
    if config.data.name == other:
        kind = "aligned pairs" if paired else "two unpaired domains"
        raise ConfigError(f"data.name: '{other}' is the wrong kind of data for trainer '{config.trainer}', which "
                          f"trains on {kind}; choose a dataset of {kind} (the built-in one: "
                          f"data.name={'paired' if paired else 'unpaired'})")


def check_update_ratio(config: Any, trainer: type) -> None:
    """``optim.d_every``/``g_every`` above 1 only for a trainer whose step honours them (its capabilities)."""
    from .options import UPDATE_RATIO

    optim = getattr(config, "optim", None)
    if UPDATE_RATIO in getattr(trainer, "capabilities", ()):
        return
    for key in ("d_every", "g_every"):
        value = getattr(optim, key, 1)
        if value != 1:
            raise ConfigError(f"optim.{key}: trainer '{config.trainer}' updates D and G at every step (it does not "
                              f"declare the capability '{UPDATE_RATIO}'); leave optim.{key} at 1, or, as the "
                              "trainer's author, follow TranslationTrainer.updates_due in train_step and declare "
                              "the capability")


def check_best_metric(config: Any, registry: Any = None) -> None:
    """``checkpoint.best_metric`` names one of the metrics validation computes (else best.pt would never be written).

    With ``registry``, the trainer's class is read: the names in its ``validation_metrics`` count too, and a
    trainer that overrides ``validate`` without declaring them is not checked here (the engine warns at the
    first validation that lacks the metric).
    """
    from .options import ValidationSection

    key, validation = config.checkpoint.best_metric, getattr(config, "validation", None)
    if not isinstance(validation, ValidationSection):  # another trainer's validation names its metrics its own way
        return
    trainer = trainer_class(config, registry) if registry is not None else None
    extra = list(getattr(trainer, "validation_metrics", ()))
    own_validate = getattr(getattr(trainer, "validate", None), "__qualname__", "") != "TranslationTrainer.validate"
    if trainer is not None and not extra and own_validate and getattr(trainer, "paired", False):
        return  # its own validate: what it returns is known only when it runs
    metrics = list(validation.metrics) + extra
    if not key or not metrics or key.removeprefix("val/") in metrics:
        return
    choices = ", ".join(f"val/{name}" for name in metrics)
    raise ConfigError(f"checkpoint.best_metric: '{key}' is not among the metrics validation computes ({choices}); "
                      f"choose one of them, or add it to validation.metrics")


def check_unpaired_data(config: Any) -> None:
    """The unpaired dataset's folder and its trainA/ and trainB/ exist and hold images (listed, not read)."""
    from .data.domains import inspect_domains
    from .data.unpaired_options import parse_unpaired

    data = config.data
    if data.name != "unpaired":
        return
    if not data.options.get("root"):
        raise ConfigError("data.root: no dataset folder given; set data.root to a folder holding trainA/ and "
                          "trainB/ (make a synthetic one with: nectargan data synth --unpaired data/synth)")
    options = parse_unpaired(data.options)
    report = inspect_domains(options.root, options.folder("train"), verify="none")
    if report.problems:
        raise ConfigError(f"data.root: {report.problems[0]}")


def check_cache_fits(config: Any, options: Any) -> None:
    """An explicit ``data.cache: memory|device`` that cannot fit is refused before the run directory exists.

    The size comes from the listing and the image headers (nothing is decoded), as the cache itself estimates it.
    """
    import os

    from nectargan_core import resolve_device

    from .data.cache import (available_host_memory, choose_cache, estimate_bytes, free_device_memory,
                             unsupported_augmentation)
    from .data.paired import PairedDataset

    device = resolve_device(config.run.device)
    cuda = device.type == "cuda"
    dataset = PairedDataset(options, "train", seed=config.run.seed)
    choose_cache(options.cache, estimate_bytes(dataset), cuda=cuda,
                 free_device=free_device_memory(device) if cuda else None, free_host=available_host_memory(),
                 unsupported=unsupported_augmentation(options),
                 host_copies=max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1"))))


def meta_network(role: str, build: Any, config: Any) -> Optional[torch.nn.Module]:
    """The network built on the meta device, or None when it cannot be built there for other reasons."""
    choice = getattr(config.models, role)
    try:
        with torch.device("meta"):
            return build()
    except ConfigError:  # already one line naming the key at fault (a channel count the model cannot take)
        raise
    except BUILD_ERRORS as exc:
        raise ConfigError(f"models.{role}: '{choice.name}' cannot be built with these options: {exc}") from None
    except Exception:  # noqa: BLE001 - not an options mistake: the real build will say what it is
        return None


def training_size(config: Any) -> Optional[int]:
    """The side of the square training images: ``crop_size``, else ``load_size`` (None: images keep theirs)."""
    options = config.data.options
    size = options.get("crop_size") or options.get("load_size")
    return int(size) if size else None


def check_size(size: int, generator: Optional[torch.nn.Module], discriminator: Optional[torch.nn.Module],
               config: Any) -> None:
    """The training size suits the generator's size multiple and the discriminator's depth."""
    key = "data.crop_size" if config.data.options.get("crop_size") else "data.load_size"
    multiple = getattr(generator, "size_multiple", None)
    if isinstance(multiple, int) and multiple > 0 and size % multiple:
        lower, upper = size // multiple * multiple, (size // multiple + 1) * multiple
        sizes = " or ".join(str(s) for s in (lower, upper) if s > 0)
        raise ConfigError(
            f"{key}: {size} is not a multiple of {multiple}, which models.generator "
            f"('{config.models.generator.name}') needs for its inputs; use {sizes}, or a generator with "
            "fewer downsamplings (depth)")
    check_input = getattr(generator, "check_input_size", None)
    if callable(check_input):  # e.g. a ResNet's reflection padding needs a minimum size
        try:
            check_input(size, size)
        except (ValueError, NectarGANError) as exc:
            raise ConfigError(f"{key}: {size}: {exc}; raise {key} or choose another models.generator") from None
    output_size = getattr(discriminator, "output_size", None)
    if callable(output_size):
        try:
            output_size(size)
        except ValueError as exc:
            raise ConfigError(f"{key}: {exc}; raise {key} or use fewer layers in models.discriminator "
                              "(n_layers)") from None
