"""The ``loss`` config section a GAN trainer embeds (no torch here).

It starts from a registered spec and edits it without code::

    loss:
      spec: extended
      gan_mode: lsgan
      terms: {l1: {weight: 50}, sobel: {schedule: {name: linear, start_value: 3, end_value: 0, end: 50}}}
      add: {ssim: {weight: 1}}
      drop: [laplacian]

When the config is validated with a registry (as ``nectargan`` does), every
name and option is checked and errors name the key and the allowed values.
:meth:`LossSection.resolve` turns the section into the final list of terms.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

from pydantic import BaseModel, Field, ValidationError, ValidationInfo, model_validator

from nectargan_core import (QUALIFIER, Component, ConfigError, PluginError, Registry, Section, describe_errors,
                            registry_from)

from .options import ScheduleChoice
from .specs import GAN, LossSpec, TermSpec

TERM_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_+-]{0,63}$")
#: An ``add`` key that is a qualified loss name: ``distribution:name`` (or ``plugin:name``).
QUALIFIED_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]*:[A-Za-z][A-Za-z0-9_+-]{0,63}$")


class TermEdit(Section):
    """Changes to one term of the spec; unset keys keep the spec's values."""

    loss: Optional[str] = Field(None, description="Another registered loss for the term, e.g. the qualified "
                                                  "name of a shared one (distribution:name)")
    weight: Optional[float] = Field(None, ge=0, description="New constant weight (0 turns the term off)")
    schedule: Optional[ScheduleChoice] = Field(None, description="Weight schedule replacing the weight")
    options: dict[str, Any] = Field(default_factory=dict, description="Loss options, merged over the spec's")

    @model_validator(mode="after")
    def _one_weight(self) -> "TermEdit":
        if self.weight is not None and self.schedule is not None:
            raise ValueError("give weight or schedule, not both")
        return self


class AddedTerm(Section):
    """A generator term added by config: ``loss(fake_B, real_B)`` times its weight."""

    loss: Optional[str] = Field(None, description="Registered loss name, bare or distribution:name "
                                                  "(default: the term's key)")
    weight: float = Field(1.0, ge=0, description="Constant weight (ignored when schedule is set)")
    schedule: Optional[ScheduleChoice] = Field(None, description="Weight schedule")
    options: dict[str, Any] = Field(default_factory=dict, description="Options of the loss")


class LossSection(Section):
    """Loss terms: a registered spec, the GAN objective, and edits to the spec."""

    spec: str = Field("basic", description="Registered loss spec (basic, extended, basic+vgg, extended+vgg, ...)")
    gan_mode: str = Field("vanilla", description="GAN objective: vanilla, lsgan, hinge, wgan-gp, ...")
    gan_options: dict[str, Any] = Field(default_factory=dict, description="Options of the GAN objective")
    drop: list[str] = Field(default_factory=list, description="Spec terms to remove")
    terms: dict[str, TermEdit] = Field(default_factory=dict, description="Edits to spec terms, by term name")
    add: dict[str, AddedTerm] = Field(default_factory=dict, description="New generator terms, by term name")

    @model_validator(mode="after")
    def _check_names(self, info: ValidationInfo) -> "LossSection":
        registry = registry_from(info)
        if registry is not None:
            resolve_terms(self, registry)
        return self

    def resolve(self, registry: Registry | None = None) -> "ResolvedLoss":
        """The final terms with every option validated and filled; ConfigError if anything is wrong."""
        if registry is None:
            from nectargan_core import get_plugins

            registry = get_plugins().registry
        try:
            return resolve_terms(self, registry)
        except ValueError as exc:
            raise ConfigError(f"loss: {exc}") from None


@dataclass(frozen=True)
class ResolvedLoss:
    """A spec after the config's edits: what :class:`LossManager` builds."""

    spec: str
    gan_mode: str
    gan_options: dict[str, Any]
    terms: dict[str, TermSpec] = field(default_factory=dict)


def load_spec(registry: Registry, name: str) -> LossSpec:
    """The registered spec ``name`` (a :class:`LossSpec` or a mapping of one)."""
    try:
        component = registry.get("loss_spec", name)
    except PluginError as exc:
        raise ValueError(f"spec: {exc}") from None
    obj = component.load()
    if isinstance(obj, LossSpec):
        return obj
    try:
        return LossSpec.model_validate(obj)
    except ValidationError as exc:
        raise ValueError(
            f"spec: loss spec '{name}' from {component.provided_by} is invalid: "
            + "; ".join(describe_errors(exc, LossSpec))
        ) from None


def is_objective(component: Component) -> bool:
    """Whether a registered loss is a GAN objective (registered with ``gan=True``)."""
    return bool(component.meta.get("gan"))


def is_pair_loss(component: Component) -> bool:
    """Whether a registered loss compares two images (every loss that is not a GAN objective)."""
    return not is_objective(component)


def gan_objectives(registry: Registry) -> list[str]:
    """Registered losses that are GAN objectives, as names to write (qualified where two plugins share one)."""
    return registry.listing("loss", is_objective)


def term_name(key: str) -> str:
    """The term name of an ``add`` key: the key, or the name part of a qualified ``distribution:name`` key."""
    return key.rpartition(QUALIFIER)[2]


def resolve_terms(section: LossSection, registry: Registry) -> ResolvedLoss:
    """Apply drop, terms and add to the spec; raise ValueError naming the key at fault.

    Loss names (``gan_mode``, ``add.*.loss``) may be bare or qualified
    (``distribution:name``); an ``add`` key may be a qualified loss name too, which
    adds a term named after the loss's bare name that uses exactly that loss.
    """
    spec = load_spec(registry, section.spec)
    try:
        registry.get("loss", section.gan_mode, among=is_objective, label="GAN objective")
    except PluginError as exc:
        raise ValueError(f"gan_mode: {exc}") from None
    gan_options = validated_options(registry, "loss", section.gan_mode, section.gan_options, "gan_options")

    names = list(spec.terms)
    for name in section.drop:
        if name not in spec.terms:
            raise ValueError(f"drop: {unknown_term(section.spec, name, names)}")
    terms = {name: term for name, term in spec.terms.items() if name not in section.drop}
    for name, edit in section.terms.items():
        if name not in terms:
            if name in section.drop:
                raise ValueError(f"terms.{name}: the term is dropped; remove it from drop or from terms")
            raise ValueError(f"terms: {unknown_term(section.spec, name, names)}")
        base = terms[name]
        if base.loss == GAN and edit.options:
            raise ValueError(f"terms.{name}.options: the '{GAN}' term takes no options; set gan_options instead")
        if edit.loss is not None and (base.loss == GAN) != (edit.loss == GAN):
            raise ValueError(f"terms.{name}.loss: the '{GAN}' term's objective is chosen by gan_mode, and no other "
                             f"term may become '{GAN}'")
        if edit.schedule is not None:
            weight, schedule = base.weight, edit.schedule
        elif edit.weight is not None:
            weight, schedule = edit.weight, None
        else:
            weight, schedule = base.weight, base.schedule
        loss = edit.loss if edit.loss is not None else base.loss
        options = {**base.options, **edit.options} if loss == base.loss else dict(edit.options)
        terms[name] = TermSpec(loss=loss, role=base.role, weight=weight, schedule=schedule, options=options)
    added_at: dict[str, str] = {}  # term name -> its key under add
    for key, added in section.add.items():
        name = term_name(key)
        if not TERM_NAME.match(name) or (name != key and not QUALIFIED_KEY.match(key)):
            raise ValueError(f"add.{key}: term names start with a letter and use letters, digits, _ + - "
                             "(or write a qualified loss name, distribution:name, whose name part becomes the "
                             "term name)")
        if name in terms:
            if name not in added_at:
                raise ValueError(f"add.{key}: the spec already has this term; edit it under terms, or drop it first")
            raise ValueError(f"add.{key}: add.{added_at[name]} already adds the term '{name}'; give one of them "
                             "another key and its loss under loss")
        loss = added.loss or key
        try:
            registry.get("loss", loss, among=is_pair_loss)
        except PluginError as exc:
            objective = any(is_objective(c) for c in registry.providers("loss", term_name(loss)))
            hint = f" ('{loss}' is a GAN objective: choose it with gan_mode)" if objective else ""
            raise ValueError(f"add.{key}.loss: {exc}{hint}") from None
        added_at[name] = key
        terms[name] = TermSpec(loss=loss, weight=added.weight, schedule=added.schedule, options=added.options)

    final: dict[str, TermSpec] = {}
    for name, term in terms.items():
        where = f"add.{added_at[name]}" if name in added_at else f"terms.{name}"
        if term.loss != GAN and registry.has("loss", term.loss) and all(
                is_objective(c) for c in registry.providers("loss", term_name(term.loss))):
            raise ValueError(f"{where}: '{term.loss}' is a GAN objective; use loss '{GAN}' and set gan_mode")
        options = term.options
        if term.loss != GAN:
            try:
                options = validated_options(registry, "loss", term.loss, term.options, where, ".options")
            except ValueError as exc:
                shared = QUALIFIER not in term.loss and len(registry.providers("loss", term.loss)) > 1
                if name in added_at or not shared:
                    raise
                raise ValueError(f"{exc} (under {where}.loss)") from None
        schedule = term.schedule
        if schedule is not None:
            checked = validated_options(registry, "schedule", schedule.name, schedule.options, f"{where}.schedule")
            schedule = ScheduleChoice(name=schedule.name, **checked)
        final[name] = TermSpec(loss=term.loss, role=term.role, weight=term.weight, schedule=schedule,
                               options=options)
    return ResolvedLoss(spec=section.spec, gan_mode=section.gan_mode, gan_options=gan_options, terms=final)


def validated_options(registry: Registry, kind: str, name: str, options: Mapping[str, Any],
                      where: str, nested: str = "") -> dict[str, Any]:
    """``options`` checked against the part's options model, defaults filled.

    Errors name ``where`` (the part) or ``where + nested + .key`` (an option).
    """
    try:
        model: type[BaseModel] | None = registry.get(kind, name).options
    except PluginError as exc:
        raise ValueError(f"{where}: {exc}") from None
    if model is None:
        if options:
            raise ValueError(f"{where}{nested}: {kind} '{name}' takes no options (got {', '.join(map(str, options))})")
        return {}
    try:
        validated = model.model_validate(dict(options), context={"registry": registry})
    except ValidationError as exc:
        raise ValueError("; ".join(describe_errors(exc, model, prefix=f"{where}{nested}"))) from None
    return validated.model_dump(mode="json")


def unknown_term(spec: str, name: str, names: list[str]) -> str:
    close = difflib.get_close_matches(name, names, n=1)
    hint = f" (did you mean '{close[0]}'?)" if close else ""
    return f"loss spec '{spec}' has no term '{name}'{hint}; its terms: {', '.join(names)}"
