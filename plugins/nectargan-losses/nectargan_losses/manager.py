"""LossManager: builds a resolved loss spec and computes its weighted terms each step.

Usage in a trainer's ``train_step`` (D sees ``cat([A, B], 1)``)::

    losses.set_position(trainer.epoch, trainer.global_step)
    d = losses.discriminator_losses(D(cat([A, B], 1)), D(cat([A, fake.detach()], 1)))
    d.total.backward(); ...
    g = losses.generator_losses(fake, B, fake_logits=lambda: D(cat([A, fake], 1)))
    g.total.backward(); ...
    return {**g.logs(), **d.logs()}

Nothing here reads a value back to the host: results are 0-dim tensors the
engine averages on the device, weights are Python floats from the schedules,
and a term whose weight is 0 at the current position is not computed at all.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import torch
from pydantic import ValidationError

from nectargan_core import ConfigError, PluginError, Registry, describe_errors

from .config import LossSection, ResolvedLoss
from .gan import GANObjective, gradient_penalty
from .schedules import Schedule, build_schedule
from .specs import GAN


@dataclass
class Term:
    """One built term: ``key`` is its log name (``G/l1``, ``D/gan_d``)."""

    name: str
    role: str
    key: str
    loss: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None  # None: the GAN objective
    schedule: Schedule

    def weight(self, epoch: int, step: int) -> float:
        return float(self.schedule.at(epoch, step))


class LossResult:
    """The terms of one network's loss at one step.

    ``total`` is the weighted sum to backpropagate, or None when every term
    had weight 0 (then there is nothing to backpropagate). ``raw`` and
    ``weighted`` hold detached 0-dim tensors of the computed terms;
    ``weights`` the scheduled weight of every term, computed or not.
    """

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.total: torch.Tensor | None = None
        self.raw: dict[str, torch.Tensor] = {}
        self.weighted: dict[str, torch.Tensor | float] = {}
        self.weights: dict[str, float] = {}
        self.parts: dict[str, torch.Tensor] = {}

    def add(self, key: str, raw: torch.Tensor, weight: float) -> None:
        """Add term ``key``: its unweighted value ``raw`` times ``weight`` joins ``total``."""
        weighted = raw * weight
        self.total = weighted if self.total is None else self.total + weighted
        self.raw[key], self.weighted[key], self.weights[key] = raw.detach(), weighted.detach(), weight

    def skip(self, key: str) -> None:
        """Record term ``key`` as not computed at this step (its weight is 0)."""
        self.weighted[key], self.weights[key] = 0.0, 0.0

    def logs(self) -> dict[str, torch.Tensor | float]:
        """Values for the engine's metrics: weighted terms, total, raw terms, parts, weights.

        ``G/l1`` is the weighted term, ``G/l1.raw`` the unweighted one (only
        when computed), ``G/l1.weight`` the scheduled weight.
        """
        out: dict[str, torch.Tensor | float] = dict(self.weighted)
        out[f"{self.prefix}/total"] = self.total.detach() if self.total is not None else 0.0
        out.update({f"{key}.raw": value for key, value in self.raw.items()})
        out.update(self.parts)
        out.update({f"{key}.weight": value for key, value in self.weights.items()})
        return out


@dataclass
class _Point:
    first_step: int
    last_step: int
    epoch: int
    sums: dict[str, Any] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)

    def merge(self, later: "_Point") -> "_Point":
        sums = dict(self.sums)
        counts = dict(self.counts)
        for key, value in later.sums.items():
            sums[key] = sums[key] + value if key in sums else value
            counts[key] = counts.get(key, 0) + later.counts[key]
        return _Point(self.first_step, later.last_step, later.epoch, sums, counts)


class LossHistory:
    """Per-term means over buckets of ``every`` steps, summed on the device.

    At most ``max_points`` buckets are kept: when full, neighbouring buckets
    merge in pairs and ``every`` doubles, so a long run keeps its whole curve
    at a coarser resolution in bounded memory. :meth:`points` reads everything
    back in one transfer, for visualizers, on demand.

    ``every=None`` turns the history off (for trainers whose engine already
    logs loss means): :meth:`add` does nothing and the state stays empty; a
    checkpoint's history is then ignored on load, so old checkpoints load.
    """

    def __init__(self, every: int | None = 50, max_points: int = 500) -> None:
        if (every is not None and every < 1) or max_points < 2:
            raise ValueError("history needs every >= 1 (or None: off) and max_points >= 2")
        self.every, self.max_points = every, max_points
        self.device: torch.device | None = None
        self._points: list[_Point] = []
        self._open: _Point | None = None

    @property
    def enabled(self) -> bool:
        return self.every is not None

    def add(self, step: int, epoch: int, values: Mapping[str, torch.Tensor | float]) -> None:
        if self.every is None:
            return
        point = self._open
        if point is not None and step // self.every != point.first_step // self.every:
            self._close()
            point = None
        if point is None:
            point = self._open = _Point(step, step, epoch)
        point.last_step, point.epoch = step, epoch
        for key, value in values.items():
            value = value.detach().float() if isinstance(value, torch.Tensor) else float(value)
            point.sums[key] = point.sums[key] + value if key in point.sums else value
            point.counts[key] = point.counts.get(key, 0) + 1

    def _close(self) -> None:
        assert self._open is not None
        self._points.append(self._open)
        self._open = None
        if len(self._points) > self.max_points:
            pairs = self._points
            self._points = [pairs[i].merge(pairs[i + 1]) if i + 1 < len(pairs) else pairs[i]
                            for i in range(0, len(pairs), 2)]
            self.every *= 2

    def points(self) -> list[dict[str, Any]]:
        """``[{"first_step", "step", "epoch", "values": {key: mean}}]``, oldest first, open bucket last."""
        points = self._points + ([self._open] if self._open is not None else [])
        tensors = [v for p in points for v in p.sums.values() if isinstance(v, torch.Tensor)]
        host = iter(torch.stack([t.to(torch.float64) for t in tensors]).tolist()) if tensors else iter(())
        out = []
        for p in points:
            values = {key: (next(host) if isinstance(v, torch.Tensor) else v) / p.counts[key]
                      for key, v in p.sums.items()}
            out.append({"first_step": p.first_step, "step": p.last_step, "epoch": p.epoch, "values": values})
        return out

    def state_dict(self) -> dict[str, Any]:
        def dump(p: _Point) -> dict[str, Any]:
            sums = {k: v.detach().cpu() if isinstance(v, torch.Tensor) else v for k, v in p.sums.items()}
            return {"first_step": p.first_step, "last_step": p.last_step, "epoch": p.epoch,
                    "sums": sums, "counts": dict(p.counts)}

        return {"every": self.every, "points": [dump(p) for p in self._points],
                "open": dump(self._open) if self._open is not None else None}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        def load(d: Mapping[str, Any]) -> _Point:
            sums = {k: v.to(self.device) if isinstance(v, torch.Tensor) and self.device is not None else v
                    for k, v in d["sums"].items()}
            return _Point(d["first_step"], d["last_step"], d["epoch"], sums, dict(d["counts"]))

        if self.every is None or state.get("every") is None:  # off here, or saved while off: nothing to keep
            self._points, self._open = [], None
            return
        self.every = int(state["every"])
        self._points = [load(p) for p in state["points"]]
        self._open = load(state["open"]) if state["open"] is not None else None


def build_loss(registry: Registry, name: str, options: Mapping[str, Any], where: str) -> Callable[..., Any]:
    """The registered loss ``name`` built with ``options``: a callable ``loss(fake, real) -> tensor``.

    A factory that builds anything else (a GAN objective, which only
    ``gan_mode`` takes, or a non-callable) is a :class:`PluginError` naming
    the loss and its plugin.
    """
    component = registry.get("loss", name)
    loss = component.load()(**options)
    if isinstance(loss, GANObjective) or not callable(loss):
        what = "a GAN objective (use it as loss.gan_mode)" if isinstance(loss, GANObjective) else \
            f"a {type(loss).__name__}, which is not callable"
        raise PluginError(f"{where}: loss '{component.name}' ({component.provided_by}) built {what}; a loss term "
                          "needs a callable loss(fake, real) -> tensor (see docs/plugins/contracts.md)")
    return loss


class LossManager:
    """The loss terms of a GAN trainer, built from a ``loss`` config section.

    ``config`` is a :class:`LossSection`, its mapping form, or None (the
    ``basic`` spec with ``vanilla`` GAN: the pix2pix reference). Parts come
    from ``registry`` (default: the installed plugins). Track the manager in
    checkpoints (``trainer.track("losses", manager)``) to keep its history
    across a resume; weights need no state (schedules are pure).
    """

    def __init__(
        self,
        config: LossSection | Mapping[str, Any] | None = None,
        *,
        registry: Registry | None = None,
        device: torch.device | str | None = None,
        history_every: int | None = 50,
        history_points: int = 500,
    ) -> None:
        if registry is None:
            from nectargan_core import get_plugins

            registry = get_plugins().registry
        if not isinstance(config, LossSection):
            try:
                config = LossSection.model_validate(dict(config or {}), context={"registry": registry})
            except ValidationError as exc:
                raise ConfigError("\n".join(describe_errors(exc, LossSection, prefix="loss"))) from None
        self.resolved: ResolvedLoss = config.resolve(registry)
        objective = registry.get("loss", self.resolved.gan_mode).load()(**self.resolved.gan_options)
        if not isinstance(objective, GANObjective):
            raise ConfigError(f"loss.gan_mode: '{self.resolved.gan_mode}' did not build a GANObjective "
                              f"(got {type(objective).__name__})")
        self.objective = objective
        self.terms: list[Term] = []
        for name, spec in self.resolved.terms.items():
            loss = None if spec.loss == GAN else build_loss(registry, spec.loss, spec.options, f"loss term '{name}'")
            prefix = "G" if spec.role == "generator" else "D"
            schedule = build_schedule(spec.weight_spec(), registry)
            self.terms.append(Term(name, spec.role, f"{prefix}/{name}", loss, schedule))
        self.epoch = 0
        self.step = 0
        self.history = LossHistory(history_every, history_points)
        self.device: torch.device | None = None
        if device is not None:
            self.to(device)

    def to(self, device: torch.device | str) -> "LossManager":
        """Move the losses that hold tensors (filters, VGG) to ``device``."""
        self.device = torch.device(device)
        self.history.device = self.device
        for term in self.terms:
            if isinstance(term.loss, torch.nn.Module):
                term.loss.to(self.device)
        return self

    def set_position(self, epoch: int, step: int) -> None:
        """Where training is (epoch from 0, global step): schedules read it. Call once per step."""
        self.epoch, self.step = epoch, step

    def weights(self) -> dict[str, float]:
        """The scheduled weight of every term at the current position."""
        out = {term.key: term.weight(self.epoch, self.step) for term in self.terms}
        if self.objective.needs_gradient_penalty:
            out["D/gp"] = self.objective.gp_weight
        return out

    def generator_losses(
        self, fake: torch.Tensor, real: torch.Tensor,
        fake_logits: "torch.Tensor | Callable[[], torch.Tensor] | None" = None,
    ) -> LossResult:
        """The generator's terms. ``fake_logits`` is D's output on the fake (or a
        function computing it, called only when the GAN term's weight is non-zero)."""
        result = LossResult("G")
        for term in self.terms:
            if term.role != "generator":
                continue
            weight = term.weight(self.epoch, self.step)
            if weight == 0.0:
                result.skip(term.key)
                continue
            if term.loss is None:
                logits = fake_logits() if callable(fake_logits) else fake_logits
                if logits is None:
                    raise TypeError(f"term '{term.name}' is adversarial: pass fake_logits to generator_losses")
                raw = self.objective.generator_loss(logits)
            else:
                raw = term.loss(fake, real)
            result.add(term.key, raw, weight)
        self.history.add(self.step, self.epoch, result.logs())
        return result

    def discriminator_losses(
        self, real_logits: torch.Tensor, fake_logits: torch.Tensor, *,
        critic: Callable[[torch.Tensor], torch.Tensor] | None = None,
        real: torch.Tensor | None = None, fake: torch.Tensor | None = None,
        condition: torch.Tensor | None = None,
    ) -> LossResult:
        """The discriminator's terms, plus ``D/gp`` when the objective has a gradient penalty.

        The penalty needs ``critic`` (called on ``cat([condition, x], 1)``, or on
        ``x`` without a condition), ``real`` and ``fake`` images.
        """
        result = LossResult("D")
        for term in self.terms:
            if term.role != "discriminator":
                continue
            weight = term.weight(self.epoch, self.step)
            if weight == 0.0:
                result.skip(term.key)
                continue
            real_part, fake_part = self.objective.discriminator_terms(real_logits, fake_logits)
            result.add(term.key, real_part + fake_part, weight)
            result.parts[f"{term.key}.real"] = real_part.detach()
            result.parts[f"{term.key}.fake"] = fake_part.detach()
        if self.objective.needs_gradient_penalty:
            if critic is None or real is None or fake is None:
                raise TypeError(f"gan_mode '{self.resolved.gan_mode}' has a gradient penalty: "
                                "pass critic, real and fake to discriminator_losses")
            raw = gradient_penalty(critic, real, fake, condition, weight=1.0)
            result.add("D/gp", raw, self.objective.gp_weight)
        self.history.add(self.step, self.epoch, result.logs())
        return result

    def state_dict(self) -> dict[str, Any]:
        """The loss history (weights need no state: schedules are pure)."""
        return {"history": self.history.state_dict()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore the loss history saved by :meth:`state_dict`."""
        self.history.load_state_dict(state["history"])

    def __repr__(self) -> str:
        def side(role: str) -> str:
            return ", ".join(f"{t.name} {t.schedule!r}" for t in self.terms if t.role == role) or "-"

        return (f"LossManager(spec={self.resolved.spec}, gan={self.resolved.gan_mode}, "
                f"G: {side('generator')}; D: {side('discriminator')})")
