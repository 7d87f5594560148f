"""Adversarial configs, generated rather than listed: the inputs of ``test_adversarial_configs.py``.

The leaves come from the installed plugins, not from a list kept here: a few
base configs switch on every registered part (every model, loss, GAN objective,
schedule, augmentation, visualizer and callback), the real config model fills
in every default, and every key of the result is a place to attack. A new
option in any plugin is attacked without touching this file. What is put there
comes from :data:`VALUES` (booleans, null, huge and non-finite numbers, numeric
strings, control characters, long texts, nested structures), and whole files
come from :func:`alias_bomb`, :func:`deep_nesting` and :func:`duplicate_key`.

:func:`bound_violations` states the documented bounds (docs/config.md, "Limits")
as checks on a resolved config, so "validates into values within the documented
bounds" is tested, not assumed.
"""

from __future__ import annotations

import copy
import fnmatch
import json
import math
import os
import unicodedata
from pathlib import Path
from typing import Any, Iterator

from hypothesis import strategies as st

from nectargan_core.config import dump_yaml, validate_config
from nectargan_core.registry import Registry

Path_ = tuple[Any, ...]  # keys and list indices from the top of a config

#: Characters no config text may hold (the rule of nectargan_core.text, restated independently).
FORBIDDEN = ["\x00", "\x1b", "\n", "\t", "\r", "\x7f", "\x85", "\u2028", "\u202e", "\u2066", "\ud800"]


def cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - macOS
        return os.cpu_count() or 1


#: The documented bounds (docs/config.md, "Limits"): dotted key patterns -> (lowest, highest).
#: ``[*]`` matches a list index; ``*`` any one key.
BOUNDS: dict[str, tuple[float, float]] = {
    "run.seed": (0, 2**32 - 1),
    "run.threads": (1, 4 * cpus()),
    "data.num_workers": (0, 4 * cpus()),
    "data.prefetch_factor": (1, 16),
    "data.batch_size": (1, 65536),
    "data.val.batch_size": (1, 65536),
    "data.test.batch_size": (1, 65536),
    "data.load_size": (1, 8192),
    "data.crop_size": (1, 8192),
    "models.*.ngf": (1, 4096),
    "models.*.ndf": (1, 4096),
    "models.*.max_width": (1, 4096),
    "models.*.in_channels": (1, 4096),
    "models.*.out_channels": (1, 4096),
    "models.*.input_channels": (1, 4096),
    "models.*.target_channels": (1, 4096),
    "models.*.depth": (0, 13),  # a ResNet may have no downsampling; UNets refuse 0 on their own
    "models.*.n_blocks": (0, 256),
    "models.*.n_layers": (1, 13),
    "loss.add.*.options.kernel_size": (3, 8192),
    "visualizers.visdom.queue_size": (1, 100_000),
    "visualizers.visdom.timeout": (0, 86_400),
    "visualizers.visdom.retry_max": (0, 86_400),
    "visualizers.visdom.flush_timeout": (0, 86_400),
    "visualizers.tensorboard.flush_secs": (1, 86_400),
}
#: Bounds of one augmentation kind (its options share key names with other kinds, e.g. ``sigma``).
AUGMENT_BOUNDS = {"blur.kernel_size": 16383, "elastic.sigma": 2047}
#: How docs/config.md names each bounded key in its Limits table.
DOC_NAMES = {
    "run.seed": "`run.seed`", "run.threads": "`run.threads`", "data.num_workers": "`data.num_workers`",
    "data.prefetch_factor": "`data.prefetch_factor`", "data.batch_size": "`data.batch_size`",
    "data.val.batch_size": "`data.val.batch_size`", "data.test.batch_size": "`data.test.batch_size`",
    "data.load_size": "`data.load_size`", "data.crop_size": "`data.crop_size`",
    "models.*.ngf": "`models.*.ngf`", "models.*.ndf": "`ndf`", "models.*.max_width": "`max_width`",
    "models.*.in_channels": "channel counts", "models.*.out_channels": "channel counts",
    "models.*.input_channels": "channel counts", "models.*.target_channels": "channel counts",
    "models.*.depth": "`models.*.depth`", "models.*.n_layers": "`n_layers`", "models.*.n_blocks": "`models.*.n_blocks`",
    "loss.add.*.options.kernel_size": "`ssim.kernel_size`",
    "visualizers.visdom.queue_size": "`visualizers.visdom.queue_size`",
    "visualizers.visdom.timeout": "`visualizers.visdom.timeout`", "visualizers.visdom.retry_max": "`retry_max`",
    "visualizers.visdom.flush_timeout": "`flush_timeout`",
    "visualizers.tensorboard.flush_secs": "`visualizers.tensorboard.flush_secs`",
}


# -- base configs: every registered part switched on somewhere ---------------------
def base_configs(registry: Registry) -> list[dict[str, Any]]:
    """Raw configs that together use every registered part (so their resolved forms hold every option)."""
    losses = [name for name in registry.names("loss")
              if name not in GAN_OBJECTIVES and name != "toy_mse" and registry.get("loss", name).options is not None]
    added = {name: {"loss": name, "options": _defaults(registry, "loss", name)} for name in losses}
    for term in added.values():
        if term["loss"] == "vgg":
            term["options"]["weights"] = "vgg19.pth"
    schedules = {
        "constant": {"name": "constant", "value": 1.0},
        "cosine": {"name": "cosine", "end": 10},
        "exponential": {"name": "exponential", "end": 10},
        "linear": {"name": "linear", "end": 10},
        "pix2pix_linear": {"name": "pix2pix_linear"},
        "warmup": {"name": "warmup", "end": 2, "then": {"name": "linear", "start": 2, "end": 10}},
    }
    missing = set(registry.names("schedule")) - set(schedules)
    assert not missing, f"add base schedules for {missing}"
    models = registry.names("model")  # any model may fill either role as far as the config is concerned
    configs = []
    for index in range(max(len(GAN_OBJECTIVES), (len(models) + 1) // 2)):
        gan = GAN_OBJECTIVES[index % len(GAN_OBJECTIVES)]
        generator, discriminator = models[(2 * index) % len(models)], models[(2 * index + 1) % len(models)]
        configs.append({
            "trainer": "pix2pix",
            "run": {"name": "adversary", "threads": 1},
            "visualizers": {name: _defaults(registry, "visualizer", name) for name in registry.names("visualizer")},
            "callbacks": {"counter": {}, "recorder": {"path": "calls.jsonl"}},
            "checkpoint": {"best_metric": "val/psnr", "every_steps": 100},
            "loop": {"max_steps": 1000, "val_every_steps": 50},
            "data": {"root": "data", "augment": [{"name": name} for name in AUGMENTATIONS],
                     "prefetch_factor": 2, "max_images": 10, "val": {"max_images": 5}, "test": {"max_images": 5}},
            "models": {"generator": _with(registry, generator, dropout_layers=1, init_gain=0.02),
                       "discriminator": _with(registry, discriminator, init_gain=0.02)},
            "loss": {"spec": "basic", "gan_mode": gan, "gan_options": _defaults(registry, "loss", gan),
                     "add": added, "terms": {"l1": {"weight": 50}}},
            "optim": {"lr_schedule": list(schedules.values())[index % len(schedules)],
                      "lr_schedule_d": list(schedules.values())[(index + 3) % len(schedules)], "grad_clip": 1.0},
            "validation": {"early_stop_metric": "psnr", "max_batches": 4},
        })
    configs.append({"trainer": "toy", "toy": {"fail_at_step": 3, "nan_at_step": 5}})
    return configs


GAN_OBJECTIVES = ("vanilla", "lsgan", "hinge", "wgan-gp")
AUGMENTATIONS = ("hflip", "vflip", "rot90", "affine", "elastic", "color_jitter", "gaussian_noise", "blur", "gamma",
                 "grayscale", "jpeg")


def _with(registry: Registry, model: str, **options: Any) -> dict[str, Any]:
    """``{name: model, ...}`` with those of ``options`` the model has (so optional fields hold values, not null)."""
    fields = getattr(registry.get("model", model).options, "model_fields", {})
    return {"name": model, **{key: value for key, value in options.items() if key in fields}}


def _defaults(registry: Registry, kind: str, name: str) -> dict[str, Any]:
    model = registry.get(kind, name).options
    return {} if model is None else json.loads(model.model_construct().model_dump_json())


def resolved_bases(registry: Registry) -> list[dict[str, Any]]:
    """The base configs with every default filled in by the real config model."""
    return [validate_config(config, registry).to_dict() for config in base_configs(registry)]


# -- leaves ----------------------------------------------------------------------
def leaves(data: Any, path: Path_ = ()) -> Iterator[tuple[Path_, Any]]:
    """``(path, value)`` of every value below the top: scalars, lists and their items, empty mappings."""
    if isinstance(data, dict):
        for key, value in data.items():
            yield from _leaf_and_below(path + (key,), value)
    elif isinstance(data, list):
        for index, value in enumerate(data):
            yield from _leaf_and_below(path + (index,), value)


def _leaf_and_below(path: Path_, value: Any) -> Iterator[tuple[Path_, Any]]:
    if not isinstance(value, dict) or not value:
        yield path, value
    yield from leaves(value, path)


def numeric(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def set_at(data: dict[str, Any], path: Path_, value: Any) -> dict[str, Any]:
    """A deep copy of ``data`` with ``value`` at ``path``."""
    result = copy.deepcopy(data)
    node: Any = result
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    return result


def dotted(path: Path_) -> str:
    return "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in path).lstrip(".")


def key_name(path: Path_) -> str:
    """The last key of ``path`` (what an error message must name)."""
    return next(str(part) for part in reversed(path) if not isinstance(part, int))


# -- values and files --------------------------------------------------------------
NUMBERS = st.one_of(
    st.integers(min_value=-(2**80), max_value=2**80),
    st.sampled_from([2**31, 2**32, 2**40, 2**53 + 1, 2**63, 2**64, 10**30, 10**400, -1, 0]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([1e30, 1e308, -0.0, 2.5, 1e3, 1e-300]),
)
TEXTS = st.one_of(
    st.text(max_size=12),
    st.sampled_from(["", "1e3", "0x10", "010", " 5 ", "inf", "nan", "-nan", "true", "off", "null", "1_000",
                     "../escape", "a/b", ".", "..", "C:\\x"]),
    st.builds(lambda prefix, bad, suffix: prefix + bad + suffix, st.text(max_size=4), st.sampled_from(FORBIDDEN),
              st.text(max_size=4)),
    st.integers(min_value=4000, max_value=20_000).map(lambda n: "x" * n),
)
SCALARS = st.one_of(st.booleans(), st.none(), NUMBERS, TEXTS)
VALUES = st.one_of(
    SCALARS,
    st.lists(SCALARS, max_size=4),
    st.dictionaries(st.one_of(st.text(max_size=6), st.sampled_from(FORBIDDEN)), SCALARS, max_size=3),
    st.integers(min_value=30, max_value=400).map(lambda depth: nested_list(depth)),
)


def nested_list(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


def write_config(path: Path, data: dict[str, Any]) -> Path:
    """``data`` as a YAML or JSON file (by ``path``'s suffix), read back by the loader exactly as ``data``."""
    if path.suffix == ".json":
        path.write_text(json.dumps(data, allow_nan=True), encoding="utf-8")
    else:
        path.write_text(dump_yaml(data), encoding="utf-8")
    return path


def alias_bomb(levels: int, fanout: int, under: str = "run") -> str:
    """A billion-laughs document: ``fanout ** levels`` values from ``levels`` lines, under key ``under``."""
    lines = [f"l0: &l0 [{', '.join(['lol'] * fanout)}]"]
    for level in range(1, levels):
        lines.append(f"l{level}: &l{level} [{', '.join([f'*l{level - 1}'] * fanout)}]")
    lines.append(f"{under}: {{name: *l{levels - 1}}}")
    return "\n".join(lines) + "\n"


def deep_nesting(depth: int, fmt: str) -> str:
    """A config whose ``run.name`` nests ``depth`` lists deep, in ``fmt`` (yaml-flow, yaml-block, json, toml)."""
    if fmt == "json":
        return '{"run": {"name": ' + "[" * depth + "]" * depth + "}}"
    if fmt == "toml":
        return "[run]\nname = " + "[" * depth + "]" * depth + "\n"
    if fmt == "yaml-block":
        return "run:\n  name:\n" + "".join("  " * (i + 2) + "-\n" for i in range(depth))
    return "run: {name: " + "[" * depth + "]" * depth + "}\n"


def duplicate_key(data: dict[str, Any], path: Path_) -> tuple[str, int, int]:
    """YAML of ``data`` with the key at ``path`` (mapping keys only) given twice: ``(text, first line, second line)``.

    The repeat goes right after the key's value, with the same indentation, so
    the document stays valid YAML apart from the repeated key.
    """
    lines = dump_yaml(data).splitlines()
    row, indent = _find_key_line(lines, path)
    end = row + 1
    while end < len(lines) and (_indent(lines[end]) > indent or
                                (_indent(lines[end]) == indent and lines[end].lstrip(" ").startswith("- "))):
        end += 1  # the value's own lines (PyYAML writes a list's items at the key's indentation)
    lines.insert(end, " " * indent + f"{path[-1]}: 1")
    return "\n".join(lines) + "\n", row + 1, end + 1


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _find_key_line(lines: list[str], path: Path_) -> tuple[int, int]:
    """Line index and indentation of the mapping key at ``path`` (a path of mapping keys only)."""
    row, indent = -1, -2
    for part in path:
        indent += 2
        row += 1
        while not (lines[row].startswith(" " * indent + f"{part}:") and _indent(lines[row]) == indent):
            row += 1
    return row, indent


# -- what must hold of every outcome ----------------------------------------------
def bound_violations(resolved: dict[str, Any]) -> list[str]:
    """Every place where a resolved config is outside the documented bounds (empty when all is well)."""
    problems = []
    for path, value in leaves(resolved):
        where = dotted(path)
        if numeric(value):
            if isinstance(value, float) and not math.isfinite(value):
                problems.append(f"{where}: non-finite {value}")
            if isinstance(value, int) and not -(2**63) <= value < 2**63:
                problems.append(f"{where}: {value} does not fit 64 bits")
            for pattern, (low, high) in BOUNDS.items():
                if _matches(path, pattern) and not low <= value <= high:
                    problems.append(f"{where}: {value} outside [{low}, {high}]")
        for text in (value, path[-1]):
            if isinstance(text, str):
                bad = [c for c in text if c in FORBIDDEN or unicodedata.category(c) in ("Cc", "Cs", "Zl", "Zp")]
                if bad:
                    problems.append(f"{where}: holds {bad[0]!r}")
                if len(text) > 4096:
                    problems.append(f"{where}: text of {len(text)} characters")
    name = resolved["run"]["name"]
    if "/" in name or "\\" in name or name in (".", "..") or len(name.encode("utf-8", "surrogatepass")) > 255:
        problems.append(f"run.name: {name!r} is not one folder name")
    data = resolved.get("data")
    if isinstance(data, dict):  # augmentations: bounds that depend on the kind and on the image size
        side = data.get("crop_size") or data.get("load_size")
        for index, spec in enumerate(data.get("augment", [])):
            kernel = None
            if spec.get("name") == "blur":
                kernel = spec["kernel_size"]
            elif spec.get("name") == "elastic":
                kernel = int(8 * spec["sigma"] + 1) | 1
                if spec["sigma"] > AUGMENT_BOUNDS["elastic.sigma"]:
                    problems.append(f"data.augment[{index}].sigma: {spec['sigma']} over 2047")
            if kernel is not None and kernel > AUGMENT_BOUNDS["blur.kernel_size"]:
                problems.append(f"data.augment[{index}]: {kernel}-pixel kernel over 16383")
            if side and kernel and kernel > 2 * side - 1:
                problems.append(f"data.augment[{index}]: {kernel}-pixel kernel on {side}-pixel images")
    return problems


def _matches(path: Path_, pattern: str) -> bool:
    shown = "".join("[*]" if isinstance(part, int) else f".{part}" for part in path).lstrip(".")
    return fnmatch.fnmatchcase(shown, pattern.replace("[*]", "[[]*[]]"))
