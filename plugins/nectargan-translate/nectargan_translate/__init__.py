"""NectarGAN translate: what image-to-image translation trainers share, whatever their networks.

This package's ``__all__`` is the distribution's public API: what pix2pix,
CycleGAN and a third-party trainer import (``from nectargan_translate import
PairedDataset``) and may rely on (docs/plugins/compatibility.md). Its
submodules are internal. Importing the package does not import torch: the
names load on first access.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nectargan_core import lazy_exports

if TYPE_CHECKING:  # the public names, loaded on first access (nectargan_core.lazy_exports reads this block)
    # datasets: paired, unpaired, the contract any dataset meets, listing and caching
    from .data.errors import DatasetError, DownloadError
    from .data.options import PairedDataOptions
    from .data.unpaired_options import UnpairedDataOptions
    from .data.paired import PairedDataset, build_paired_dataset, collate
    from .data.unpaired import UnpairedDataset, build_unpaired_dataset
    from .data.augment import PairTransform, build_transform
    from .data.loader import build_dataloader
    from .data.sampler import EpochSampler
    from .data.listing import find_pairs, split_dir
    from .data.cache import cache_summary
    from .contracts import batch_size_of, check_dataset_item, is_conditional
    # option sections and presets shared by translation trainers
    from .options import (DISCRIMINATOR_CHANNELS, GENERATOR_CHANNELS, RUN_LENGTH_LR, UPDATE_RATIO, DataChoice,
                          ExamplesSection, ModelsSection, OptimSection, TestSection, UnpairedDataChoice,
                          ValidationSection, data_channels, registered_metrics)
    from .presets import reference_recipe
    from .preflight import check_config as check_translation_config
    from .preflight import training_size
    # the trainers' base, networks, compilation and the training helpers
    from .trainer import TranslationTrainer
    from .networks import build_discriminator, build_generator, build_network
    from .compilation import compile_for_training
    from .training import (EarlyStopping, check_sync_batchnorm, make_adam, make_lr_schedulers, run_schedule,
                           write_epoch_examples)
    # evaluation, example grids and trained generators
    from .evaluation import MetricAccumulator, evaluation_mode, per_image
    from .examples import save_grid, spread_indices, train_view
    from .generators import GeneratorSpec
    from .inference import LoadedGenerator, load_generator
    # test, predict and export from Python (what the commands run)
    from .tester import EvaluationReport, run_test
    from .predictor import PredictReport, predict
    from .export import ExportError, ExportReport, Parity, export_generator

__all__ = [
    "DatasetError", "DownloadError", "PairedDataOptions", "UnpairedDataOptions", "PairedDataset",
    "build_paired_dataset", "collate", "UnpairedDataset", "build_unpaired_dataset", "PairTransform",
    "build_transform", "build_dataloader", "EpochSampler", "find_pairs", "split_dir", "cache_summary",
    "batch_size_of", "check_dataset_item", "is_conditional",
    "DISCRIMINATOR_CHANNELS", "GENERATOR_CHANNELS", "RUN_LENGTH_LR", "UPDATE_RATIO", "DataChoice", "UnpairedDataChoice",
    "ExamplesSection", "ModelsSection",
    "OptimSection", "TestSection", "ValidationSection", "data_channels", "registered_metrics",
    "reference_recipe", "check_translation_config", "training_size",
    "TranslationTrainer", "build_discriminator", "build_generator", "build_network",
    "compile_for_training", "EarlyStopping",
    "check_sync_batchnorm", "make_adam", "make_lr_schedulers", "run_schedule", "write_epoch_examples",
    "MetricAccumulator", "evaluation_mode", "per_image", "save_grid", "spread_indices", "train_view",
    "GeneratorSpec", "LoadedGenerator", "load_generator", "EvaluationReport", "run_test", "PredictReport", "predict", "ExportError",
    "ExportReport", "Parity", "export_generator",
]

#: Names that moved away, kept for one release with a DeprecationWarning: name -> (object, new home).
_DEPRECATED = {
    "Precision": ("nectargan_core:Precision", "nectargan_core.Precision (a trainer on the kit: self.kit.precision)"),
    "PrecisionSection": ("nectargan_core:PrecisionSection", "nectargan_core.PrecisionSection"),
}
__getattr__, __dir__ = lazy_exports(__name__, __file__, moved=_DEPRECATED)
