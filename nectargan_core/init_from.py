"""Starting a new run from a checkpoint's network weights, with nothing left to chance.

``--init-from`` (``run.init_from``) copies the weights of every network the run
tracks from a checkpoint, matching tensors by name and shape. A load that
leaves part of a network at its random initialisation is never silent:

* by default (``run.init_from_strict: true``) every network of the run must be
  in the checkpoint and fit it exactly (every tensor present, none left over,
  every shape equal); anything else is one :class:`InitFromError` line naming
  each network, how many tensors matched and an example of what did not;
* with ``run.init_from_strict: false`` (``--init-from-partial``) what fits is
  loaded, and the report says per network what stays at its initialisation.

Even a partial start needs at least one matching tensor: a checkpoint that
matches nothing is always an error. A malformed checkpoint (no ``state``, a
network's weights that are not a mapping of tensors) is one
:class:`~nectargan_core.errors.CheckpointError` line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import torch

from .errors import CheckpointError, ConfigError

#: How many names a message or report line quotes before it says "...".
SHOWN = 3
PARTIAL_HINT = "--init-from-partial (run.init_from_strict: false)"


class InitFromError(ConfigError):
    """The checkpoint does not fit the networks this run's config builds (exit status 2: fix the config)."""


@dataclass
class NetworkMatch:
    """How one network of the run matches the checkpoint's weights for it."""

    name: str
    #: Tensor names of the network, in its order.
    own: list[str]
    #: Whether the checkpoint holds weights under this network's name at all.
    present: bool
    loaded: list[str] = field(default_factory=list)
    #: In the network, not in the checkpoint.
    missing: list[str] = field(default_factory=list)
    #: In the checkpoint, not in the network.
    unexpected: list[str] = field(default_factory=list)
    #: ``name [saved shape] vs [built shape]``.
    mismatched: list[str] = field(default_factory=list)

    @property
    def fits(self) -> bool:
        return self.present and not (self.missing or self.unexpected or self.mismatched)

    @property
    def stays_random(self) -> list[str]:
        """The tensors that keep their initialisation: absent from the checkpoint or of another shape."""
        return [name for name in self.own if name not in set(self.loaded)]

    def as_dict(self) -> dict[str, list[str]]:
        return {"loaded": list(self.loaded), "missing": list(self.missing), "unexpected": list(self.unexpected),
                "mismatched": list(self.mismatched)}

    def problems(self) -> str:
        """``82 missing (e.g. 'down.0.weight'), 1 of another shape (...)``, or '' when it fits."""
        if not self.present:
            return "not in the checkpoint"
        parts = []
        for label, items in (("missing", self.missing), ("not in this network", self.unexpected),
                             ("of another shape", self.mismatched)):
            if items:
                example = items[0] if label == "of another shape" else f"'{items[0]}'"
                parts.append(f"{len(items)} {label} (e.g. {example})")
        return ", ".join(parts)


def networks_of(checkpoint: Mapping[str, Any], where: str) -> Mapping[str, Any]:
    """The checkpoint's ``state`` mapping (network name -> state dict), or a one-line CheckpointError."""
    state = checkpoint.get("state")
    if not isinstance(state, Mapping):
        raise CheckpointError(f"{where}: the checkpoint holds no network weights (no 'state' mapping)")
    return state


def match_network(name: str, module: torch.nn.Module, theirs: Any, where: str) -> NetworkMatch:
    """Compare ``module``'s tensors with ``theirs`` (the checkpoint's state dict for it, or None)."""
    own = module.state_dict()
    match = NetworkMatch(name, list(own), present=theirs is not None)
    if theirs is None:
        match.missing = list(own)
        return match
    if not isinstance(theirs, Mapping):
        raise CheckpointError(f"{where}: the weights of '{name}' are not a state dict "
                              f"(a {type(theirs).__name__}); the checkpoint is damaged or was not written by NectarGAN")
    bad = next((key for key, value in theirs.items() if not isinstance(key, str) or not isinstance(value, torch.Tensor)),
               None)
    if bad is not None:
        raise CheckpointError(f"{where}: the weights of '{name}' hold a {type(theirs[bad]).__name__} under "
                              f"{bad!r}, not a tensor; the checkpoint is damaged or was not written by NectarGAN")
    for key, tensor in own.items():
        if key not in theirs:
            match.missing.append(key)
        elif theirs[key].shape != tensor.shape:
            match.mismatched.append(f"{key} {list(theirs[key].shape)} vs {list(tensor.shape)}")
        else:
            match.loaded.append(key)
    match.unexpected = [key for key in theirs if key not in own]
    return match


def check_matches(matches: list[NetworkMatch], where: str, *, strict: bool, held: list[str]) -> None:
    """Raise :class:`InitFromError` when the matches do not allow the start that was asked for.

    ``held`` names the networks the checkpoint holds, for the message.
    """
    if not matches:
        return
    summary = "; ".join(f"'{m.name}' matched {len(m.loaded)}/{len(m.own)} tensors"
                        + (f": {m.problems()}" if not m.fits else "") for m in matches)
    if not any(m.loaded for m in matches):
        holds = ", ".join(f"'{name}'" for name in held) or "no networks"
        raise InitFromError(
            f"init_from: {where} fits none of this run's networks ({summary}; it holds {holds}); choose the models "
            "and options it was trained with (weights saved by pytorch-CycleGAN-and-pix2pix convert with "
            "nectargan models import FILE --arch NAME)")
    if strict and not all(m.fits for m in matches):
        raise InitFromError(
            f"init_from: {where} does not fit this run's networks exactly ({summary}); choose the models and "
            f"options it was trained with, or start what does not fit from its initialisation with {PARTIAL_HINT}")


def report_line(match: NetworkMatch, where: str) -> str:
    """One line per network: what was loaded and, for a partial start, what stays random."""
    if not match.present:
        return (f"init_from: {where} has no weights for '{match.name}'; all {len(match.own)} of its tensors stay "
                "at their initialisation")
    line = f"init_from: '{match.name}' loaded {len(match.loaded)}/{len(match.own)} tensors from {where}"
    random = match.stays_random
    if random:
        shown = ", ".join(random[:SHOWN]) + (" ..." if len(random) > SHOWN else "")
        line += f"; {len(random)} stay at their initialisation ({shown})"
    if match.unexpected:
        shown = ", ".join(match.unexpected[:SHOWN]) + (" ..." if len(match.unexpected) > SHOWN else "")
        line += f"; {len(match.unexpected)} of the checkpoint's are not used ({shown})"
    return line
