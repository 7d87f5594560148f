"""``nectargan config init``: a commented starter config written from the models."""

from __future__ import annotations

import json
from typing import Any, Mapping

from pydantic import BaseModel, ValidationError

from ..provenance import KEY as PROVENANCE_KEY
from ..registry import Registry
from ..strict_yaml import dump_yaml_text
from .choices import ComponentChoice
from .strict import is_subclass


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
