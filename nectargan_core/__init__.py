"""NectarGAN core: the hook specifications, plugin loading, config, run engine and CLI.

This package's ``__all__`` is the core's public API: the names a plugin may
import (``from nectargan_core import Trainer``) and rely on across releases of
the same major version (docs/plugins/compatibility.md). Its submodules are
internal, except the pytest plugin ``nectargan_core.testing``.

Importing this package does not import torch: every name but the hook
markers and the errors is loaded on first access (``lazy_exports``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .errors import (CheckpointError, ConfigError, NameConflictError, NectarGANError, PluginError, RunDirError,
                     TrainingError)
from .hookspecs import hookimpl, hookspec
from .lazy import lazy_exports

__version__: str  # the installed nectargan-core's version, read on first access

if TYPE_CHECKING:  # the public names loaded on first access (lazy_exports reads this block)
    # plugins, their registry and the hooks' helper types
    from .hookspecs import Register
    from .plugins import PluginHost, PluginInfo, get_plugins
    from .registry import QUALIFIER, Component, Registry, unknown_name_message
    # running and reading runs
    from .run import Run
    from .rundir import CHECKPOINT_PATTERN, RunDir, latest_run
    from .reporting.history import History, Series
    from .reporting.runs import RunSummary, list_runs
    from .reporting.report import write_report
    from .reporting.sections import ReportSection, RunReport
    from .checkpoint import FORMAT as CHECKPOINT_FORMAT
    from .checkpoint import load_checkpoint, restoring, save_checkpoint, sha256_of, state_problem
    from .metrics import read_metrics
    from .directions import direction as metric_direction
    from .directions import improved as metric_improved
    from .losskeys import repeated_terms
    # the author's classes
    from .trainer import Trainer
    from .kit import Step, TrainerKit
    from .update import Update, optimizer_step
    from .accumulation import AccumulationGroup
    from .sampling import ResumableSampler
    from .splitlisting import SplitListing
    from .distributed import Distributed
    from .capabilities import NONFINITE_SKIP
    from .precision import Precision
    from .device import resolve_device
    from .graphmode import planned as step_graphs_planned
    from .signals import leave_stopping_to_main, stop_signalled
    # config
    from .config import (DEVICE_PATTERN, ComponentChoice, CoreConfig, Section, choice_of, describe_errors, dump_yaml,
                         load_config, name_of, parse_override_value, parts_of, plain_name, PrecisionSection,
                         registry_from, validate_config)
    from .limits import (BATCH_OPTION, FRACTION_OPTION, IMAGE_SIDE_OPTION, IMAGE_WHY, MAX_IMAGE_SIDE, MAX_SECONDS,
                         SECONDS_WHY, SEED_OPTION, Batch, BoundedFloat, BoundedInt, ImageSide, Seconds, Workers,
                         at_most)
    # files: complete or absent, and names a terminal can show
    from .atomic import (atomic_write, atomic_write_text, commit_files, commit_folder, describe_os_error, new_folder,
                         output_taken, pid_alive, staging, sweep_stale_temps, temp_path)
    from .filekind import kind_of as file_kind
    from .jsonfiles import JSONFileError, read_json, read_json_object
    from .torchload import require_torch
    from .text import printable, printable_lines

__all__ = [
    "__version__", "hookimpl", "hookspec", "lazy_exports",
    "NectarGANError", "ConfigError", "PluginError", "CheckpointError", "NameConflictError", "RunDirError",
    "TrainingError",
    "Register", "PluginHost", "PluginInfo", "get_plugins", "QUALIFIER", "Component", "Registry",
    "unknown_name_message",
    "Run", "CHECKPOINT_PATTERN", "RunDir", "latest_run", "History", "Series", "RunSummary", "list_runs",
    "write_report", "ReportSection", "RunReport", "CHECKPOINT_FORMAT", "load_checkpoint", "restoring", "save_checkpoint",
    "sha256_of", "state_problem", "read_metrics", "metric_direction", "metric_improved", "repeated_terms",
    "Trainer", "Step", "TrainerKit", "Update", "optimizer_step", "AccumulationGroup", "ResumableSampler", "SplitListing",
    "Distributed", "NONFINITE_SKIP", "Precision", "resolve_device", "step_graphs_planned",
    "leave_stopping_to_main", "stop_signalled",
    "DEVICE_PATTERN", "ComponentChoice", "CoreConfig", "Section", "choice_of", "describe_errors", "dump_yaml",
    "load_config", "name_of", "parse_override_value", "parts_of", "plain_name", "PrecisionSection", "registry_from", "validate_config",
    "BATCH_OPTION", "FRACTION_OPTION", "IMAGE_SIDE_OPTION", "IMAGE_WHY", "MAX_IMAGE_SIDE", "MAX_SECONDS",
    "SECONDS_WHY", "SEED_OPTION", "Batch", "BoundedFloat", "BoundedInt", "ImageSide", "Seconds", "Workers", "at_most",
    "atomic_write", "atomic_write_text", "commit_files", "commit_folder", "describe_os_error", "new_folder",
    "output_taken", "pid_alive", "staging", "sweep_stale_temps", "temp_path", "file_kind", "printable", "printable_lines",
    "JSONFileError", "read_json", "read_json_object", "require_torch",
]

#: Names that moved away, kept for one release with a DeprecationWarning: name -> (object, new home).
_DEPRECATED = {"GeneratorSpec": ("nectargan_core.generators:GeneratorSpec", "nectargan_translate.GeneratorSpec")}
_exported, _listed = lazy_exports(__name__, __file__, moved=_DEPRECATED)


def __dir__() -> list[str]:
    return sorted({*_listed(), "__version__"})


def __getattr__(name: str) -> Any:
    if name == "__version__":  # one source: the installed distribution's metadata (pyproject.toml)
        from importlib.metadata import version

        globals()[name] = value = version("nectargan-core")
        return value
    return _exported(name)
