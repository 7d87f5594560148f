"""The run configuration: one validated pydantic model, assembled from plugins.

The core owns the sections ``run``, ``loop`` and ``checkpoint`` and the keys
``trainer``, ``visualizers`` and ``callbacks``. The selected trainer adds its
own top-level sections (the fields of its ``options`` model), plugins add
sections through ``register_config_sections``, and every named part chosen in
the config (a model, a visualizer, ...) validates its options against the
model it registered. Any mistake is reported with its key path, e.g.
``loop.epochs: Input should be greater than 0 (got -1)``.
"""

from __future__ import annotations

import difflib
import functools
import json
import math
import os
import re
import types
import typing
from pathlib import Path
from typing import Any, ClassVar, Iterable, Iterator, Literal, Mapping, Optional, Union

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    PrivateAttr,
    Field,
    ValidationError,
    ValidationInfo,
    create_model,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError, PydanticUndefined

from .capabilities import check_capabilities
from .errors import ConfigError, PluginError
from .filekind import NotRegularFile, open_regular
from .limits import MAX_CONFIG_BYTES, MAX_INT, MIN_INT, Seed, Threads, check_data, check_name
from .metric_direction import direction
from .provenance import KEY as PROVENANCE_KEY
from .provenance import PartRecord, validate_recorded
from .registry import Registry
from .strict_yaml import StrictDumper, dump_yaml_text, load_yaml
from .text import printable

CONFIG_SUFFIXES = (".yaml", ".yml", ".toml", ".json")
MAX_DEVICE_INDEX = 127
DEVICE_PATTERN = re.compile(r"^(auto|cpu|mps|cuda(:[0-9]+)?)$")


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
                    _at_key(key, refuse_coercion, field, value)
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
            _at_key(key, within_int64, getattr(self, key))
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


class LoopSection(Section):
    """How long to train and how often to log and validate."""

    epochs: int = Field(10, description="Number of epochs to train", gt=0)
    max_steps: Optional[int] = Field(
        None, description="Stop after this many steps (batches; under accumulation at the end of the group)", gt=0)
    log_every_steps: int = Field(50, description="Write a metrics record every N steps", gt=0)
    val_every_epochs: Optional[int] = Field(1, description="Validate every N epochs (null: never)", gt=0)
    val_every_steps: Optional[int] = Field(None, description="Also validate every N steps", gt=0)
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
            _at_key("best_metric", _direction_of, self.best_metric, self.best_mode, "checkpoint.best_mode", registry)
            self._best_direction = direction(self.best_metric, self.best_mode, registry)
        return self

    @property
    def best_direction(self) -> str:
        """``min`` or ``max`` for ``best_metric`` (``best_mode`` with ``auto`` resolved when validated)."""
        return self._best_direction if self.best_metric else "min"


#: The longest distributed.timeout_s: a week (a rank silent for longer is not coming back).
MAX_TIMEOUT_S = 7 * 24 * 3600


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


class CoreConfig(Section):
    """The sections every run has."""

    trainer: Optional[str] = Field(None, description="Name of a registered trainer")
    run: RunSection = Field(default_factory=RunSection)
    loop: LoopSection = Field(default_factory=LoopSection)
    checkpoint: CheckpointSection = Field(default_factory=CheckpointSection)
    distributed: DistributedSection = Field(default_factory=DistributedSection)
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


def is_subclass(annotation: Any, base: type | tuple[type, ...]) -> bool:
    """Whether ``annotation`` is a class deriving from ``base``; ``list[str]`` is none (Python 3.10 says
    ``isinstance(list[str], type)`` and then ``issubclass`` raises)."""
    return isinstance(annotation, type) and not isinstance(annotation, types.GenericAlias) \
        and issubclass(annotation, base)


def plain_name(value: str) -> str:
    """``value`` if it names one folder entry (no separators, not . or .., no control characters,
    at most 255 bytes), else a ValueError."""
    return check_name(value)


# -- no silent coercion ------------------------------------------------------
def refuse_coercion(field: Any, value: Any) -> Any:
    """``value`` for ``field`` unless pydantic would coerce it into something else silently.

    Refused: a boolean where the field wants a number (pydantic reads ``true``
    as 1, also inside lists and tuples and against ``Literal[1, 3, 4]``), and
    null where the field does not take null (the message names the default,
    which is what leaving the key out gives).
    """
    annotation = field.annotation
    if value is None and not _accepts_none(annotation):
        raise ValueError(f"must not be null; {_null_hint(field)}")
    where = _boolean_as_number(annotation, value)
    if where is not None:
        raise ValueError(f"{where}a boolean where a number is expected (got {json.dumps(_first_bool(value))}); "
                         "write the number")
    problem = _wrong_scalar(annotation, value)
    if problem is not None:
        raise ValueError(problem)
    return value


def _scalar_kinds(annotation: Any) -> tuple[Optional[set[type]], set[str]]:
    """The Python types of the scalar values ``annotation`` means (None when it means more than scalars:
    Any, models, paths, collections..., which pydantic's own checks decide), and its literal texts."""
    kinds: set[type] = set()
    texts: set[str] = set()
    for arm in _arms(annotation):
        if typing.get_origin(arm) is Literal:
            for choice in typing.get_args(arm):
                texts.add(choice) if isinstance(choice, str) else kinds.add(type(choice))
        elif arm is float:
            kinds.update((float, int))  # an integer is an exact float
        elif arm in (bool, int, str, type(None)):
            kinds.add(arm)
        else:
            return None, texts
    return kinds, texts


def _wrong_scalar(annotation: Any, value: Any) -> Optional[str]:
    """Why ``value`` is not a value of ``annotation`` although pydantic would convert it, or None.

    pydantic's lax mode reads ``"off"``, ``"yes"``, ``1`` and ``"1"`` as booleans
    and ``"2"`` and ``2.0`` as the integer 2. A YAML 1.2 file means what it says:
    ``off`` is text, ``2.0`` is a float. Lists and tuples are checked item by item.
    """
    if isinstance(value, (list, tuple)):
        for types_ in _item_types(annotation, len(value)):
            for index, (item_type, item) in enumerate(zip(types_, value)):
                problem = _wrong_scalar(item_type, item)
                if problem is not None:
                    return f"item {index + 1}: {problem}"
        return None
    if not isinstance(value, (bool, int, float, str)):
        return None
    kinds, texts = _scalar_kinds(annotation)
    if kinds is None or type(value) in kinds or not kinds - {type(None)} or (isinstance(value, str) and value in texts):
        return None
    shown = json.dumps(value) if not isinstance(value, float) or math.isfinite(value) else str(value)
    if kinds <= {bool, type(None)}:
        return f"must be true or false (got {shown}); YAML booleans are only true and false, unquoted"
    if int in kinds and float not in kinds and isinstance(value, (float, str)):
        return f"must be an integer (got {shown}); write a whole number without quotes or decimal point"
    if float in kinds and isinstance(value, str):
        if isinstance(value, OverrideText):  # a bare --set value: nobody wrote quotes
            if value.strip().lower().lstrip("+-.") in {"inf", "infinity", "nan"}:
                return f"must be a finite number (got {shown})"
            return f"must be a number (got {shown})"
        return f"must be a number (got {shown}); write it without quotes"
    return None


#: pydantic error type of the checks above; ``describe_errors`` puts ctx["key"] into the error's key path.
KEYED_ERROR = "nectargan_key_error"


def _at_key(key: str, check: Any, *args: Any) -> None:
    """Run ``check``; report its ValueError at ``key`` (a model validator's error has the model's path)."""
    try:
        check(*args)
    except ValueError as exc:
        raise PydanticCustomError(KEYED_ERROR, "{key}: {message}", {"key": key, "message": str(exc)}) from None


def _direction_of(metric: str, mode: str, mode_key: str, registry: Any = None) -> None:
    """Refuse ``mode: auto`` for a metric that is not registered and whose name does not say which way it improves."""
    try:
        direction(metric, mode, registry)
    except ValueError as exc:
        raise ValueError(f"{exc}; set {mode_key}: min or max") from None


def _null_hint(field: Any) -> str:
    """What to write instead of null: remove the key for its default (shown), or an empty collection."""
    if field.default_factory is None and field.default is PydanticUndefined:
        return "this key needs a value"
    try:
        default = field.get_default(call_default_factory=True)
    except TypeError:  # a factory that needs the other values
        return "remove the key to use its default"
    if isinstance(default, BaseModel):
        return "remove the key to use its defaults"
    hint = f"remove the key to use the default ({json.dumps(default, default=str)})"
    if isinstance(default, (list, dict)) and default:
        hint += ", or write [] for none"
    return hint


def within_int64(value: Any) -> Any:
    """``value`` if every integer in it fits a signed 64-bit integer (torch, NumPy and JSON readers need it)."""
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        where, item = stack.pop()
        if isinstance(item, int) and not isinstance(item, bool) and not MIN_INT <= item <= MAX_INT:
            shown = str(item) if item.bit_length() <= 96 else f"a number of about {int(item.bit_length() * 0.30103)} digits"
            raise ValueError(f"{where}{shown} does not fit a 64-bit integer (at most {MAX_INT})")
        if isinstance(item, (list, tuple)):
            stack.extend((f"{where}item {i + 1}: ", child) for i, child in enumerate(item))
        elif isinstance(item, dict):
            stack.extend((f"{where}{printable(key)}: ", child) for key, child in item.items())
    return value


def _strip(annotation: Any) -> Any:
    while typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    return annotation


def _arms(annotation: Any) -> tuple[Any, ...]:
    annotation = _strip(annotation)
    if typing.get_origin(annotation) in (Union, types.UnionType):
        return tuple(_strip(arm) for arm in typing.get_args(annotation))
    return (annotation,)


def _item_types(annotation: Any, length: int) -> Iterator[list[Any]]:
    """For each list, set or tuple arm of ``annotation``, the annotations of a ``length``-item value's items."""
    for arm in _arms(annotation):
        origin, args = typing.get_origin(arm), typing.get_args(arm)
        if origin in (list, set, frozenset) and args:
            yield [args[0]] * length
        elif origin is tuple and args:
            yield [args[0]] * length if (len(args) == 2 and args[1] is Ellipsis) else list(args)


def _accepts_none(annotation: Any) -> bool:
    return any(arm in (Any, object, type(None), None) for arm in _arms(annotation))


def _takes_bool(annotation: Any) -> bool:
    """Whether a boolean is a meant value of ``annotation`` (bool, Any, a Literal with True/False, ...)."""
    for arm in _arms(annotation):
        if arm in (bool, Any, object):
            return True
        if typing.get_origin(arm) is Literal and any(isinstance(v, bool) for v in typing.get_args(arm)):
            return True
    return False


def _numeric(annotation: Any) -> bool:
    """Whether some arm of ``annotation`` is a number pydantic would read a boolean as (int, float, Literal[1, 3])."""
    for arm in _arms(annotation):
        if is_subclass(arm, (int, float)) and arm is not bool:
            return True
        if typing.get_origin(arm) is Literal and any(
                isinstance(v, (int, float)) and not isinstance(v, bool) for v in typing.get_args(arm)):
            return True
    return False


def _boolean_as_number(annotation: Any, value: Any) -> Optional[str]:
    """``""`` (or ``"item N: "``) where ``value`` holds a boolean that ``annotation`` would read as a number."""
    if isinstance(value, bool):
        return "" if _numeric(annotation) and not _takes_bool(annotation) else None
    if not isinstance(value, (list, tuple)):
        return None
    for item_types in _item_types(annotation, len(value)):
        for index, (item_type, item) in enumerate(zip(item_types, value)):
            if _boolean_as_number(item_type, item) is not None:
                return f"item {index + 1}: "
    return None


def _first_bool(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return next((item for item in value if isinstance(item, bool)), value)
    return value


def names_to_dict(value: Any) -> Any:
    """Accept ``[a, b]`` or ``[{name: a, ...}]`` for name -> options mappings."""
    if isinstance(value, (list, tuple)):
        result: dict[str, Any] = {}
        for item in value:
            if isinstance(item, str):
                result[item] = {}
            elif isinstance(item, Mapping) and isinstance(item.get("name"), str):
                result[item["name"]] = {k: v for k, v in item.items() if k != "name"}
            else:
                raise ValueError("list items must be names or mappings with a 'name' key")
        return result
    if value is None:
        return {}
    return value


def registry_from(info: ValidationInfo) -> Registry | None:
    context = info.context or {}
    return context.get("registry")


def validate_options(
    registry: Registry, kind: str, name: str, options: Mapping[str, Any], info: ValidationInfo | None = None
) -> dict[str, Any]:
    """Check ``name`` exists and validate ``options`` against its options model.

    Raises ValueError (which pydantic reports at the key path) with the
    nested key that is wrong.
    """
    try:
        component = registry.get(kind, name)
    except PluginError as exc:
        raise ValueError(str(exc)) from None
    model = component.options
    if model is None:
        if options:
            raise ValueError(f"{kind} '{name}' takes no options (got {', '.join(map(str, options))})")
        return {}
    try:
        validated = model.model_validate(dict(options), context=info.context if info else None)
    except ValidationError as exc:
        raise ValueError(f"{kind} '{name}': " + "; ".join(describe_errors(exc, model))) from None
    return validated.model_dump(mode="json")


class ComponentChoice(BaseModel):
    """A named part plus its options, e.g. ``{name: unet_256, norm: instance}``, or a bare name.

    Subclass with ``kind`` set (see :func:`choice_of`); the options are checked
    against the part's registered options model and filled with its defaults.
    A bare name (``unet_256``, or ``nectargan-models:unet_256``) means that part
    with its default options.
    """

    model_config = ConfigDict(extra="allow")
    kind: ClassVar[str] = ""
    """The kind of part this choice names (``model``, ``dataset``, ...); set by :func:`choice_of`."""
    name: str
    """The registered name of the part, bare (``unet_256``) or qualified (``nectargan-models:unet_256``)."""

    @model_validator(mode="before")
    @classmethod
    def _bare_name(cls, value: Any) -> Any:
        return {"name": value} if isinstance(value, str) else value

    @model_validator(mode="after")
    def _check_options(self, info: ValidationInfo) -> "ComponentChoice":
        registry = registry_from(info)
        if registry is not None and self.kind:
            options = validate_options(registry, self.kind, self.name, self.model_extra or {}, info)
            self.__pydantic_extra__ = options
        return self

    @property
    def options(self) -> dict[str, Any]:
        """The part's options: what the config gave, validated and filled with the defaults of its options model."""
        return dict(self.model_extra or {})


def choice_of(kind: str, default: str | None = None) -> type[ComponentChoice]:
    """A :class:`ComponentChoice` subclass for parts of ``kind`` (model, loss, dataset, ...).

    With ``default``, the name may be left out, so ``--set models.generator.norm=instance``
    changes one option of the default part.
    """
    name = f"{kind.title().replace('_', '')}Choice"
    fields: dict[str, Any] = {} if default is None else {"name": (str, default)}
    model = create_model(name, __base__=ComponentChoice, __module__=__name__, **fields)
    model.kind = kind
    return model


def name_of(kind: str) -> Any:
    """A field type for the name of a registered part of ``kind``, checked when the config is validated.

    ``metric: name_of("loss") = Field("l1", validate_default=True)``: the value is
    a bare name or ``distribution:name``; an unknown or ambiguous name fails at
    config time with the same message as the core's own names (a "did you mean",
    the names available). Works in lists too: ``list[name_of("loss")]``.
    """
    from typing import Annotated

    def check(value: str, info: ValidationInfo) -> str:
        registry = registry_from(info)
        if registry is not None:
            try:
                registry.get(kind, value)
            except PluginError as exc:
                raise ValueError(str(exc)) from None
        return value

    return Annotated[str, AfterValidator(check), Field(json_schema_extra={"nectargan_kind": kind})]


def parts_of(kind: str) -> Any:
    """A field type for several parts of ``kind`` with their options, like ``visualizers``.

    Accepts ``{name: {option: value}}``, ``[name, ...]`` or ``[{name: ..., option: value}]``;
    each name is checked and its options validated and filled with their
    defaults when the config is validated.
    """
    from typing import Annotated

    def check(value: dict[str, dict[str, Any]], info: ValidationInfo) -> dict[str, dict[str, Any]]:
        registry = registry_from(info)
        if registry is None:
            return value
        return {name: validate_options(registry, kind, name, options or {}, info) for name, options in value.items()}

    return Annotated[dict[str, dict[str, Any]], BeforeValidator(names_to_dict), AfterValidator(check),
                     Field(json_schema_extra={"nectargan_kind": kind})]


# -- building the model ------------------------------------------------------
def build_config_model(registry: Registry | None, trainer: str | None) -> type[CoreConfig]:
    """The config model for a run with ``trainer``: core + trainer + plugin sections."""
    fields: dict[str, Any] = {}
    validators: dict[str, Any] = {}
    owners: dict[str, str] = {name: "nectargan-core" for name in CoreConfig.model_fields}
    if registry is not None:
        for component in registry.all("config_section"):
            _add_section(fields, owners, component.name, component.load(), component.provided_by)
            registry.note(component)  # every run's config holds the section: its owner goes into the provenance
        if trainer is not None:
            component = registry.get("trainer", trainer, key="trainer")
            options = component.options
            if options is not None:
                for name, info in options.model_fields.items():
                    _add_section(fields, owners, name, (info.annotation, info), component.provided_by)
                if callable(getattr(options, "resolve_config", None)):
                    validators["_trainer_resolves"] = model_validator(mode="after")(_resolving(options))
    return create_model("NectarGANConfig", __base__=CoreConfig, __validators__=validators, **fields)


def _resolving(options: Any) -> Any:
    """A validator that lets the trainer's options fill values one section takes from another.

    ``options.resolve_config(config, registry)`` runs on the validated config and
    may set values derived from other sections (pix2pix writes ``data.in_channels``
    into the generator's options, so the config says what will be built). It
    returns ``{derived key: source key}``, which ``config init`` shows as comments.
    """
    def resolve(config: Any, info: ValidationInfo) -> Any:
        registry = registry_from(info)
        if registry is not None:
            options.resolve_config(config, registry)
        return config

    return resolve


def derived_keys(config: CoreConfig, registry: Registry | None) -> dict[str, str]:
    """``{key: the key it is taken from}`` for values the trainer's ``resolve_config`` sets."""
    if registry is None or config.trainer is None:
        return {}
    options = registry.get("trainer", config.trainer, key="trainer").options
    hook = getattr(options, "resolve_config", None)
    return dict(hook(config, registry) or {}) if callable(hook) else {}


def _add_section(fields: dict[str, Any], owners: dict[str, str], name: str, spec: Any, owner: str) -> None:
    if name in owners:
        raise PluginError(f"config section '{name}' is claimed by both {owners[name]} and {owner}")
    owners[name] = owner
    if isinstance(spec, tuple):
        fields[name] = spec
    else:
        fields[name] = (spec, Field(default_factory=spec, description=(spec.__doc__ or "").strip().split("\n")[0]))


def validate_config(
    data: Mapping[str, Any], registry: Registry | None, *, source: str = "config",
    origins: Mapping[str, str] | None = None,
) -> CoreConfig:
    """Validate raw config data; raise :class:`ConfigError` naming every bad key.

    The result records who provided each part it names (``provenance``); a
    ``provenance`` block in ``data`` is checked against what is installed now
    (see :mod:`nectargan_core.provenance`). ``origins`` names where some keys'
    values came from instead of ``source`` (``--set key=value``).
    """
    return validate_recorded(data, registry, source, functools.partial(_validate_sections, origins=origins))


def _validate_sections(
    data: Mapping[str, Any], registry: Registry | None, *, source: str = "config",
    origins: Mapping[str, str] | None = None,
) -> CoreConfig:
    """Validate raw config data; raise :class:`ConfigError` naming every bad key."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: the top level must be a mapping of sections, got {type(data).__name__}")
    problem = check_data(data)
    if problem is not None:
        raise ConfigError(f"{source}: {problem}")
    trainer = data.get("trainer")
    if trainer is not None and not isinstance(trainer, str):
        raise ConfigError(f"{source}: trainer: must be a trainer name (got {trainer!r})")
    try:
        model = build_config_model(registry, trainer)
    except PluginError as exc:
        raise ConfigError(f"{source}: {exc}") from None
    # Absent sections are validated from {} like present ones, so registry-dependent
    # defaults (a default part's options) are filled in and a saved config reads back the same.
    absent = {name: {} for name, info in model.model_fields.items()
              if name not in data and is_subclass(info.annotation, Section)}
    try:
        config = model.model_validate({**absent, **data}, context={"registry": registry})
    except ValidationError as exc:
        raise ConfigError("\n".join(f"{origin_of(line, source, origins)}: {line}"
                                     for line in describe_errors(exc, model))) from None
    check_capabilities(config, registry, source, origins)  # e.g. loop.nonfinite: skip needs a trainer that can skip
    return config


#: ``kind 'name': option: problem``: a part's option at fault, as :func:`validate_options` words it.
PART_OPTION = re.compile(r"^[a-z_]+ '([^']+)': ([A-Za-z_][\w.]*): ")


def origin_of(line: str, source: str, origins: Mapping[str, str] | None) -> str:
    """Where the value an error ``line`` (``key.path: problem``) is about came from: the last ``--set``
    (``origins`` is in the order they apply) of that key or of a section above it, else ``source``.

    A part's option (``data: dataset 'paired': cache: ...``) is looked up as
    ``data.cache`` (or ``visualizers.console.bar`` for a mapping of parts) too.
    """
    key, _, rest = line.partition(": ")
    keys = [key]
    part = PART_OPTION.match(rest)
    if part is not None:
        keys += [f"{key}.{part.group(2)}", f"{key}.{part.group(1)}.{part.group(2)}"]
    found = [text for k, text in (origins or {}).items()
             if any(candidate == k or candidate.startswith(f"{k}.") for candidate in keys)]
    return found[-1] if found else source


def describe_errors(exc: ValidationError, model: type[BaseModel], prefix: str = "") -> list[str]:
    """One line per validation error: ``prefix.key.path: problem (got value)``.

    ``prefix`` is the key path of ``model`` inside a larger config (e.g. ``loss``);
    errors of the model as a whole are reported at the prefix itself.
    """
    lines = []
    for error in exc.errors(include_url=False):
        loc = [str(part) for part in error["loc"]]
        message = error["msg"]
        if error["type"] == KEYED_ERROR:
            loc.append(str(error["ctx"]["key"]))
            message = str(error["ctx"]["message"])
        path = ".".join(loc)
        if message.startswith("Value error, "):
            message = message[len("Value error, "):]
        if error["type"] == "extra_forbidden":
            allowed = allowed_keys(model, loc[:-1])
            close = difflib.get_close_matches(loc[-1], allowed, n=1)
            hint = f"did you mean '{close[0]}'? " if close else ""
            message = f"unknown key; {hint}allowed keys: {', '.join(allowed)}"
        elif error["type"] == "missing":
            message = "this key is required"
        elif error["type"] == "int_parsing_size":
            message = f"too large: config integers fit 64 bits (at most {MAX_INT})"
            shown = repr(error["input"])
            message += f" (got {shown if len(shown) <= 30 else shown[:27] + '...'})"
        elif "input" in error and error["type"] not in {"value_error", "assertion_error", KEYED_ERROR}:
            shown = repr(error["input"])
            message = f"{message} (got {shown if len(shown) <= 60 else shown[:57] + '...'})"
        where = ".".join(part for part in (prefix, path) if part)
        lines.append(f"{where}: {message}" if where else message)
    return lines


def allowed_keys(model: type[BaseModel], loc: list[str]) -> list[str]:
    """The field names of the sub-model at ``loc`` (best effort, for error hints)."""
    current: Any = model
    in_mapping = False  # the next part is a key of a dict[str, Model]
    for part in loc:
        if in_mapping:
            in_mapping = False
            continue
        fields = getattr(current, "model_fields", None)
        if not fields or part not in fields:
            return []
        current = fields[part].annotation
        if getattr(current, "__origin__", None) is dict:
            current = current.__args__[1]
            in_mapping = True
        for arg in getattr(current, "__args__", ()) or ():  # Optional[Model]
            if is_subclass(arg, BaseModel):
                current = arg
    fields = getattr(current, "model_fields", None) or {}
    return sorted(fields)


# -- files and overrides -----------------------------------------------------
def load_file(path: str | Path) -> dict[str, Any]:
    """Read a YAML, TOML or JSON config file into a dict; errors name the file and line.

    YAML is read strictly (:mod:`nectargan_core.strict_yaml`); in every format a
    key given twice is an error, and the file's size, nesting and number of
    values, and the characters of its text, are bounded (:mod:`nectargan_core.limits`).
    """
    data = parse_file(path)
    problem = check_data(data)
    if problem is not None:
        raise ConfigError(f"{printable(path)}: {problem}")
    return data


def parse_file(path: str | Path) -> dict[str, Any]:
    """:func:`load_file` without the checks of the text inside (for reading what is on disk, e.g. ``nectargan runs``)."""
    path = Path(path)
    shown = printable(path)  # messages are one line each, whatever the file name holds
    if path.suffix.lower() not in CONFIG_SUFFIXES:
        raise ConfigError(f"{shown}: unsupported config format '{printable(path.suffix)}'; use .yaml, .yml, .toml or .json")
    try:
        with os.fdopen(open_regular(path), "rb") as stream:
            raw = stream.read(MAX_CONFIG_BYTES + 1)
    except FileNotFoundError:
        raise ConfigError(f"{shown}: config file not found") from None
    except NotRegularFile as exc:
        raise ConfigError(f"{shown}: not a config file but {exc.strerror}; give the path of a "
                          ".yaml, .toml or .json file") from None
    except OSError as exc:
        raise ConfigError(f"{shown}: cannot read config file: {exc.strerror or exc}") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{shown}: config file larger than {MAX_CONFIG_BYTES >> 20} MiB; a config is a few "
                          "kilobytes of settings (is this the right file?)")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{shown}: cannot read config file: not UTF-8 text (byte {exc.start})") from None
    suffix = path.suffix.lower()
    try:
        if suffix == ".json":
            data = json.loads(text, object_pairs_hook=_unique_keys) if text.strip() else {}
        elif suffix == ".toml":
            try:
                import tomllib
            except ModuleNotFoundError:  # Python 3.10: the same parser, from PyPI
                import tomli as tomllib

            data = tomllib.loads(text)
        else:
            data = load_yaml(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{shown}:{exc.lineno}: invalid JSON: {exc.msg}") from None
    except DuplicateKeyError as exc:
        raise ConfigError(f"{shown}: invalid JSON: {exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{shown}:{mark.line + 1}" if mark is not None else shown
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{where}: invalid YAML: {problem}") from None
    except RecursionError:  # the JSON and TOML parsers recurse once per level
        raise ConfigError(f"{shown}: nested deeper than the parser can follow; a config nests a few levels") from None
    except ValueError as exc:  # tomllib.TOMLDecodeError; an integer of more than 4300 digits in any format
        kind = {".json": "JSON", ".toml": "TOML"}.get(suffix, "YAML")
        problem = "a number has more than 4300 digits" if "4300 digits" in str(exc) else str(exc)[:200]
        raise ConfigError(f"{shown}: invalid {kind}: {problem}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{shown}: the top level must be a mapping of sections, got {type(data).__name__}")
    return data


class DuplicateKeyError(ValueError):
    """A JSON object gives one key twice (json.loads would keep the last silently)."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise DuplicateKeyError(f"duplicate key '{key}' in one object; keep one of them")
        result[key] = value
    return result


KEY_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_+:\-]*(\.[A-Za-z_][A-Za-z0-9_+:\-]*)*$")


def parse_override_value(raw: str) -> Any:
    """The value of ``--set key=value``.

    Scalars stay strings and are converted by the config model (so ``007`` is a
    valid run name and ``1e-4`` a valid float); ``null``, ``[...]`` and
    ``{...}`` are parsed as YAML; a value in quotes is the string inside them.
    """
    stripped = raw.strip()
    if len(stripped) >= 2 and stripped[0] == stripped[-1] and stripped[0] in "'\"":
        return stripped[1:-1]  # quoted: always a string, e.g. --set 'name="{x}/y"'
    if stripped in {"null", "~", "None"}:
        return None
    if stripped[:1] in "[{":
        try:
            return load_yaml(stripped)
        except yaml.YAMLError as exc:
            problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
            raise ConfigError(f"--set value {raw!r} is not valid YAML: {problem}") from None
    return OverrideText(raw)


class OverrideText(str):
    """A bare ``--set`` value: text for a text key, else read as a YAML 1.2 scalar once the key's type is known.

    So ``--set run.name=007`` stays the text ``007`` while ``--set loop.epochs=5`` is
    the integer 5, and ``--set run.deterministic=off`` is the text ``off`` (refused,
    as in a file) rather than pydantic's lax False.
    """


# A bare --set value kept as given (a key of free-form options) is written out as the text it is.
StrictDumper.add_representer(OverrideText, StrictDumper.represent_str)


def read_override(annotation: Any, text: str) -> Any:
    """The value of a bare ``--set`` text for a key of type ``annotation`` (see :class:`OverrideText`)."""
    kinds, texts = _scalar_kinds(annotation)
    if kinds is None or str in kinds or text in texts:
        return str(text)  # plain str: pydantic before 2.6 refuses a str subclass as a Literal choice
    try:
        value = load_yaml(text)
    except yaml.YAMLError:
        value = text
    if isinstance(value, (bool, int, float)):
        return value
    return OverrideText(text) if kinds & {int, float} else str(text)  # the marker words a number's error


def apply_overrides(data: dict[str, Any], overrides: Iterable[str]) -> dict[str, Any]:
    """Apply ``a.b.c=value`` overrides to a nested dict (returns a new dict)."""
    result = json.loads(json.dumps(data, default=str))
    for override in overrides:
        key, sep, raw = override.partition("=")
        key = key.strip()
        if not sep or not KEY_PATTERN.match(key):
            raise ConfigError(f"--set {override!r}: expected key.path=value, e.g. --set loop.epochs=5")
        parts = key.split(".")
        node = result
        for i, part in enumerate(parts[:-1]):
            child = node.get(part)
            if isinstance(child, list) and part in {"visualizers", "callbacks"}:
                child = names_to_dict(child)
                node[part] = child
            if child is None:
                child = node[part] = {}
            if not isinstance(child, dict):
                raise ConfigError(
                    f"--set {override!r}: '{'.'.join(parts[: i + 1])}' is a value, not a section"
                )
            node = child
        node[parts[-1]] = parse_override_value(raw)
    return result


def load_config(
    source: str | Path | Mapping[str, Any] | None = None,
    overrides: Iterable[str] = (),
    registry: Registry | None = None,
) -> CoreConfig:
    """Load, override and validate a config from a file path, a dict, or nothing (defaults)."""
    if isinstance(source, BaseModel):
        data = source.model_dump(mode="json")
        label = "config"
    elif isinstance(source, Mapping):
        data = dict(source)
        label = "config"
    elif source is None:
        data = {}
        label = "defaults"
    else:
        data = load_file(source)
        label = printable(source)
    problem = check_data(data)
    if problem is not None:  # before the overrides copy it: nothing deep or huge is walked twice
        raise ConfigError(f"{label}: {problem}")
    overrides = list(overrides)
    data = apply_overrides(data, overrides)
    origins: dict[str, str] = {}
    for override in overrides:  # in the order they apply: a key set again moves to the end
        key = override.partition("=")[0].strip()
        origins.pop(key, None)
        origins[key] = f"--set {override.strip()}"
    return validate_config(data, registry, source=label, origins=origins)


def dump_yaml(data: Mapping[str, Any]) -> str:
    """YAML text of ``data`` that :func:`load_file` reads back unchanged (e.g. a run's config.yaml)."""
    return dump_yaml_text(dict(data), sort_keys=False, default_flow_style=False)


def starter_yaml(model: type[BaseModel], values: Mapping[str, Any] | None = None,
                 registry: Registry | None = None, derived: Mapping[str, str] | None = None,
                 title: list[str] | None = None) -> str:
    """A commented YAML file listing every key with its description, and its default (or its value in ``values``).

    ``values`` are the values to show (a validated config's ``to_dict()``; without
    them the model's own defaults). With ``registry``, each chosen part (the dataset,
    the generator, ...) is written out with every one of its options. Keys in
    ``derived`` are taken from another key when the config is resolved: they are
    written commented out, naming their source.
    """
    lines = [*(title or ["# NectarGAN run config. Every key is optional; shown values are the defaults.",
                         "# Validate with: nectargan config validate FILE"]), ""]
    if values is None:
        values = model().model_dump(mode="json") if _constructible(model) else {}
    _emit(model, values, lines, 0, registry, dict(derived or {}), "")
    return "\n".join(lines) + "\n"


def _constructible(model: type[BaseModel]) -> bool:
    try:
        model()
        return True
    except ValidationError:
        return False


def _flow(value: Any) -> str:
    rendered = dump_yaml_text(value, default_flow_style=True, width=10**6).strip()
    if rendered.endswith("\n..."):
        rendered = rendered[: -len("\n...")]
    return rendered.removesuffix("...").strip()


def _emit(model: type[BaseModel], values: Mapping[str, Any], lines: list[str], indent: int,
          registry: Registry | None = None, derived: Mapping[str, str] | None = None, prefix: str = "") -> None:
    pad = "  " * indent
    derived = derived or {}
    for name, info in model.model_fields.items():
        if indent == 0 and name == PROVENANCE_KEY:
            continue  # nectargan writes it
        value = values.get(name)
        key = f"{prefix}{name}"
        sub = _submodel(info.annotation)
        choice = _choice(info.annotation)
        comment = f"  # {info.description}" if info.description else ""
        if sub is not None and isinstance(value, dict):
            doc = info.description or (sub.__doc__ or "").strip().split("\n")[0]
            lines.append(f"{pad}{name}:" + (f"  # {doc}" if doc else ""))
            _emit(sub, value, lines, indent + 1, registry, derived, f"{key}.")
        elif choice is not None and registry is not None and isinstance(value, dict) and "name" in value:
            lines.append(f"{pad}{name}:{comment}")
            _emit_choice(choice.kind, value, lines, indent + 1, registry, derived, f"{key}.")
        elif key in derived:
            lines.append(f"{pad}# {name}: {_flow(value)}  # set from {derived[key]}{comment.replace('  #', ';', 1)}")
        else:
            lines.append(f"{pad}{name}: {_flow(value)}{comment}")


def _emit_choice(kind: str, values: Mapping[str, Any], lines: list[str], indent: int, registry: Registry,
                 derived: Mapping[str, str], prefix: str) -> None:
    """A chosen part as a section: its name (with the installed alternatives), then every option.

    Options show their values, and their declared defaults where ``values`` lacks them.
    """
    pad = "  " * indent
    installed = ", ".join(registry.names(kind))
    lines.append(f"{pad}name: {_flow(values['name'])}  # Registered {kind.replace('_', ' ')} (installed: {installed})")
    options = registry.get(kind, values["name"]).options
    if options is None:
        return
    defaults = options.model_construct().model_dump(mode="json")
    _emit(options, {**defaults, **{k: v for k, v in values.items() if k != "name"}}, lines, indent, registry,
          derived, prefix)


def _choice(annotation: Any) -> type[ComponentChoice] | None:
    if is_subclass(annotation, ComponentChoice):
        return annotation
    return None


def _submodel(annotation: Any) -> type[BaseModel] | None:
    if is_subclass(annotation, BaseModel) and not issubclass(annotation, ComponentChoice):
        return annotation
    return None
