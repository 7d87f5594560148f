"""The core's config sections (run, loop, checkpoint, distributed) and ``Section``, the base of every options model."""

from __future__ import annotations

import re
from typing import Any, ClassVar, Literal, Mapping, Optional

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationInfo, field_validator, model_validator
from pydantic_core import PydanticCustomError

from ..errors import ConfigError
from ..limits import Seed, Threads, check_name
from ..directions import direction
from ..provenance import KEY as PROVENANCE_KEY
from ..provenance import PartRecord
from .choices import names_to_dict, registry_from, validate_options
from .overrides import read_override
from .strict import KEYED_ERROR, OverrideText, at_key, refuse_coercion, within_int64


MAX_DEVICE_INDEX = 127
DEVICE_PATTERN = re.compile(r"^(auto|cpu|mps|cuda(:[0-9]+)?)$")
"""The values ``run.device`` and the commands' ``--device`` accept."""


class Section(BaseModel):
    """Base for config sections: unknown keys are errors, values are re-validated on assignment.

    Nothing is coerced silently (see :func:`refuse_coercion`): a boolean is not a
    number, null is not a default, and numbers are finite and fit 64 bits.
    Every plugin's options derive from this class, so they get the same rules.
    """

    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)

    # Model validators rather than field validators: pydantic forbids 'before' field validators on
    # the discriminator field of a tagged union, which a plugin's options may well be.
    @model_validator(mode="before")
    @classmethod
    def _no_silent_coercion(cls, data: Any) -> Any:
        if isinstance(data, Mapping):
            read = {key: read_override(cls.model_fields[key].annotation, value) for key, value in data.items()
                    if isinstance(value, OverrideText) and isinstance(key, str) and key in cls.model_fields}
            if read:
                data = {**data, **read}
            for key, value in data.items():
                field = cls.model_fields.get(key) if isinstance(key, str) else None
                if field is not None:
                    at_key(key, refuse_coercion, field, value)
        return data

    renamed_options: ClassVar[Mapping[str, str]] = {}
    """Options renamed since an older release, old key -> new key: a stored config that still has the old key
    (an older run resumed, tested or exported) reads as the new one, and is saved with the new key."""
    removed_options: ClassVar[frozenset[str]] = frozenset()
    """Options removed since an older release: a stored config that still has one reads without it."""

    # Defined after _no_silent_coercion so that it runs before it (pydantic runs 'before' validators last first).
    @model_validator(mode="before")
    @classmethod
    def _migrate(cls, data: Any) -> Any:
        if not isinstance(data, Mapping) or not (cls.renamed_options or cls.removed_options):
            return data
        migrated: dict[Any, Any] = {}
        for key, value in data.items():
            if key in cls.removed_options:
                continue
            new = cls.renamed_options.get(key, key) if isinstance(key, str) else key
            if new != key and new in data:
                raise PydanticCustomError(KEYED_ERROR, "{key}: {message}", {
                    "key": key, "message": f"renamed to {new}, which is also given; keep {new} only"})
            migrated[new] = value
        return migrated

    @model_validator(mode="after")
    def _fits_64_bits(self) -> "Section":
        for key in type(self).model_fields:
            at_key(key, within_int64, getattr(self, key))
        return self


class RunSection(Section):
    """Where the run lives and how it is made reproducible."""

    name: str = Field("run", description="Run name; outputs go to output_dir/name/version_N", min_length=1)
    output_dir: str = Field("runs", description="Folder that holds all runs")
    seed: Seed = Field(0, description="Global seed for Python, NumPy and torch")
    device: str = Field("auto", description="auto, cpu, cuda, cuda:N or mps")
    deterministic: bool = Field(False, description="Use deterministic algorithms (bit-exact resume on CPU)")
    threads: Optional[Threads] = Field(None, description="torch intra-op threads (default: torch's choice)")
    init_from: Optional[str] = Field(None, description="Checkpoint to take network weights from (fine-tuning)")
    init_from_strict: bool = Field(
        True, description="init_from must fit every network exactly; false: load what fits, report what stays random")

    @field_validator("device")
    @classmethod
    def _device(cls, value: str) -> str:
        match = DEVICE_PATTERN.match(value)
        index = value.partition(":")[2]
        if not match or (index and int(index) > MAX_DEVICE_INDEX):  # torch keeps a device number in 8 bits
            raise ValueError(f"must be auto, cpu, cuda, cuda:N (N from 0 to {MAX_DEVICE_INDEX}) or mps")
        return value

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return plain_name(value)


#: The longest distributed.timeout_s and loop.batch_timeout_s: a week (a rank silent for longer is not coming back).
MAX_TIMEOUT_S = 7 * 24 * 3600


class LoopSection(Section):
    """How long to train and how often to log and validate."""

    @property
    def fitted_epochs(self) -> int:
        """The epochs schedules that follow the run's length are fitted to: ``schedule_epochs`` or ``epochs``."""
        return self.schedule_epochs if self.schedule_epochs is not None else self.epochs

    epochs: int = Field(10, description="Number of epochs to train", gt=0)
    schedule_epochs: Optional[int] = Field(
        None, gt=0, description="The epochs that schedules following the run's length (the default LR schedule) are "
                                "fitted to (null: loop.epochs); a run longer than this holds each such schedule's "
                                "last value after them. nectargan train --resume --keep-schedule sets it")
    max_steps: Optional[int] = Field(
        None, description="Stop after this many steps (batches; under accumulation at the end of the group)", gt=0)
    log_every_steps: int = Field(50, description="Write a metrics record every N steps", gt=0)
    val_every_epochs: Optional[int] = Field(1, description="Validate every N epochs (null: never)", gt=0)
    val_every_steps: Optional[int] = Field(None, description="Also validate every N steps", gt=0)
    batch_timeout_s: float = Field(
        600.0, ge=1, le=MAX_TIMEOUT_S, allow_inf_nan=False,
        description="The longest wait for one batch from data loader worker processes (training and validation): "
                    "past it the run saves its position and fails in one line naming the workers and their state")
    nonfinite: str = Field(
        "stop", pattern="^(stop|skip)$",
        description="On a NaN/Inf loss: stop (fail the run) or skip (go on, leaving such updates out; only for "
                    "trainers that declare the nonfinite_skip capability, e.g. those on the TrainerKit)",
    )


class CheckpointSection(Section):
    """When checkpoints are written and how many are kept."""

    every_epochs: Optional[int] = Field(1, description="Save every N epochs (null: never)", gt=0)
    every_steps: Optional[int] = Field(None, description="Also save every N steps (mid-epoch)", gt=0)
    keep_last: int = Field(3, description="How many periodic checkpoints to keep", ge=1)
    save_last: bool = Field(True, description="Always save when training ends")
    best_metric: Optional[str] = Field(None, description="Validation metric that selects best.pt (e.g. val/psnr)")
    best_mode: str = Field("auto", pattern="^(auto|min|max)$",
                           description="Which way best_metric improves: min, max, or auto (as the metric's plugin "
                                       "registered it, else from its name: psnr/ssim higher, l1/mse/loss lower)")
    #: best_mode with ``auto`` resolved when the config was validated (with the registered metrics when known).
    _best_direction: str = PrivateAttr("min")

    @model_validator(mode="after")
    def _direction_known(self, info: ValidationInfo) -> "CheckpointSection":
        if self.best_metric is not None:
            registry = registry_from(info)
            at_key("best_metric", _direction_of, self.best_metric, self.best_mode, "checkpoint.best_mode", registry)
            self._best_direction = direction(self.best_metric, self.best_mode, registry)
        return self

    @property
    def best_direction(self) -> str:
        """``min`` or ``max`` for ``best_metric`` (``best_mode`` with ``auto`` resolved when validated)."""
        return self._best_direction if self.best_metric else "min"




class DistributedSection(Section):
    """Data-parallel training under torchrun (ignored by a single process)."""

    backend: str = Field("auto", pattern="^(auto|gloo|nccl)$",
                         description="Process-group backend: auto (nccl on CUDA, gloo on CPU), gloo, nccl")
    timeout_s: float = Field(600.0, ge=1, le=MAX_TIMEOUT_S, allow_inf_nan=False,
                             description="Seconds any wait for another process may last before the run fails "
                                         "(every collective, rank 0 validating or checkpointing alone): 1 to 604800")
    sync_batchnorm: bool = Field(False, description="Convert batch norm layers to SyncBatchNorm (CUDA only)")
    find_unused_parameters: bool = Field(
        False, description="DDP find_unused_parameters (only for models with parameters a step does not use)")


AMP_MODES = ("auto", "off", "bf16", "fp16")
"""The values of ``precision.amp``."""


def amp_mode(config: Any) -> str:
    """The config's ``precision.amp``; ``off`` (full precision) for a trainer whose options have no such key."""
    return getattr(getattr(config, "precision", None), "amp", "off")


def check_amp(mode: str, device_type: str) -> None:
    """Refuse an autocast mode this device cannot train with (fp16 on a CPU), in one line naming the key."""
    if mode == "fp16" and device_type == "cpu":
        raise ConfigError("precision.amp: fp16 autocast is not supported for training on CPU; use bf16 or off")


class PrecisionSection(Section):
    """Numeric precision, memory layout and step capture: the kit's precision policy (``precision.amp``) and the
    engine's CUDA graphs (``precision.cuda_graphs``) read it; a trainer adds it to its options as ``precision``."""

    amp: Literal["auto", "off", "bf16", "fp16"] = Field(
        "auto", description="Autocast: auto (cuda: bf16 (fp16 without bf16) when the step is replayed as a CUDA "
                            "graph, else fp32; cpu and mps: off), off, bf16, fp16")
    channels_last: bool = Field(False, description="Use the channels_last memory format for networks and batches")
    compile: Literal["off", "default", "reduce-overhead", "max-autotune"] = Field(
        "off", description="torch.compile G and D for the training step (a torch.compile mode), or off (eager)")
    compile_backend: Literal["inductor", "aot_eager", "eager"] = Field(
        "inductor", description="torch.compile backend when compile is on (aot_eager: no C++ compiler needed)")
    cuda_graphs: Literal["auto", "on", "off"] = Field(
        "auto", description="Capture the whole training step as one CUDA graph and replay it: auto (on CUDA where "
                            "safe: one process, no gradient accumulation, compile off), on (refuse a run where it "
                            "cannot), off")
    cudnn_benchmark: Literal["auto", "on", "off"] = Field(
        "auto", description="cuDNN picks each convolution's algorithm by timing the candidates at its first use "
                            "(torch.backends.cudnn.benchmark): auto (on unless run.deterministic), on, off (its "
                            "heuristics: no search at the start)")


class CoreConfig(Section):
    """The sections every run has."""

    trainer: Optional[str] = Field(None, description="Name of a registered trainer")
    run: RunSection = Field(default_factory=RunSection)
    """Name, output folder, seed, device and threads of the run."""
    loop: LoopSection = Field(default_factory=LoopSection)
    """Epochs, logging and validation intervals, non-finite losses."""
    checkpoint: CheckpointSection = Field(default_factory=CheckpointSection)
    """When checkpoints are written and kept, and which is best."""
    distributed: DistributedSection = Field(default_factory=DistributedSection)
    """Backend and timeouts of multi-process runs."""
    visualizers: dict[str, dict[str, Any]] = Field(
        default_factory=lambda: {"console": {}}, validate_default=True,
        description="Visualizers enabled for this run, name -> options",
    )
    callbacks: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="Callbacks enabled for this run, name -> options"
    )
    provenance: list[PartRecord] = Field(
        default_factory=list, description="Written by nectargan: the distribution and version of every part named")

    @field_validator("visualizers", "callbacks", mode="before")
    @classmethod
    def _list_to_dict(cls, value: Any) -> Any:
        return names_to_dict(value)  # null never gets here: Section refuses it (no silent 'no console')

    @field_validator("visualizers", "callbacks")
    @classmethod
    def _check_parts(cls, value: dict[str, dict[str, Any]], info: ValidationInfo) -> dict[str, dict[str, Any]]:
        registry = registry_from(info)
        if registry is None:
            return value
        kind = "visualizer" if info.field_name == "visualizers" else "callback"
        return {name: validate_options(registry, kind, name, opts or {}, info) for name, opts in value.items()}

    @model_validator(mode="after")
    def _search_or_determinism(self) -> "CoreConfig":
        """``precision.cudnn_benchmark: on`` (a trainer's section) cannot go with ``run.deterministic``."""
        if getattr(getattr(self, "precision", None), "cudnn_benchmark", "auto") == "on" and self.run.deterministic:
            raise PydanticCustomError(KEYED_ERROR, "{key}: {message}", {
                "key": "precision.cudnn_benchmark",
                "message": "on picks convolution algorithms by timing them, which can differ between runs; it "
                           "cannot go with run.deterministic: true (set precision.cudnn_benchmark to auto or off, or "
                           "run.deterministic to false)"})
        return self

    def section(self, name: str) -> Any:
        """A plugin's or trainer's section by name."""
        try:
            return getattr(self, name)
        except AttributeError:
            raise ConfigError(f"config has no section '{name}'") from None

    def to_dict(self) -> dict[str, Any]:
        """The resolved config as plain JSON-ready data (what run directories store)."""
        data = self.model_dump(mode="json")
        data[PROVENANCE_KEY] = data.pop(PROVENANCE_KEY)  # last: it describes the sections above
        return data


def plain_name(value: str) -> str:
    """``value`` if it names one folder entry (no separators, not . or .., no control characters,
    at most 255 bytes), else a ValueError."""
    return check_name(value)


def _direction_of(metric: str, mode: str, mode_key: str, registry: Any = None) -> None:
    """Refuse ``mode: auto`` for a metric that is not registered and whose name does not say which way it improves."""
    try:
        direction(metric, mode, registry)
    except ValueError as exc:
        raise ValueError(f"{exc}; set {mode_key}: min or max") from None
