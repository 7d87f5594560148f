"""Fields that name registered parts: ``choice_of`` (one part and its options), ``name_of`` (a name), ``parts_of`` (a map
of names to options), each validated against the part's own options model."""

from __future__ import annotations

import json
from typing import Any, ClassVar, Mapping

from pydantic import (AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, ValidationInfo,
                      create_model, model_validator)

from ..errors import PluginError
from ..registry import Registry
from .messages import describe_errors


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
    """The plugin registry a validator runs with (``validate_config``'s context), or None outside a run."""
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
