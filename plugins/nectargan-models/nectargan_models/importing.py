"""Reference weights as NectarGAN checkpoints (``nectargan models import``).

A file saved by pytorch-CycleGAN-and-pix2pix (``latest_net_G.pth``) is a bare
``state_dict`` without the architecture options; the user names them
(``--arch unet_256 --set norm=batch``). The file is read with
``torch.load(weights_only=True)``, mapped tensor by tensor
(:mod:`nectargan_models.reference`) and wrapped in the checkpoint format of
the pix2pix trainer, whose stored config records the architecture: ``predict``,
``test``, ``export`` and ``train --init-from`` then rebuild the network from
the checkpoint alone. Imports torch: import it lazily from commands.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import torch

from nectargan_core import (CHECKPOINT_FORMAT, CheckpointError, ConfigError, Registry, get_plugins, save_checkpoint,
                            sha256_of, validate_config)

from .overrides import resolve_options
from .reference import MODEL_FAMILY, REFERENCE_ARCHS, describe_options, from_reference, reference_layout

#: The trainer whose checkpoint format an import writes (its commands read the generator from it).
TRAINER = "pix2pix"
#: Trainers whose checkpoints can hold an imported network, in order of preference: trainer -> role -> the
#: tracked name the network is stored under. A CycleGAN-only install reads a generator as CycleGAN's G_A.
LAYOUTS = {"pix2pix": {"generator": "generator", "discriminator": "discriminator"}, "cyclegan": {"generator": "G_A"}}
#: The networks an import can hold: their roles, which are also their config sections and state keys.
ROLES = ("generator", "discriminator")
IMAGE_CHANNELS = (1, 3, 4)


@dataclass
class ImportedNetwork:
    """A reference state dict mapped onto one of our networks, as a checkpoint payload."""

    source: Path
    arch: str
    model_name: str
    role: str
    options: dict[str, Any]
    state: dict[str, torch.Tensor]
    payload: dict[str, Any]

    @property
    def parameters(self) -> int:
        return sum(t.numel() for k, t in self.state.items() if not _is_buffer(k))

    def summary(self) -> str:
        described = describe_options(reference_layout(self.model_name, self.options))
        return (f"imported {self.source} as {self.model_name} ({described}): {len(self.state)} tensors, "
                f"{self.parameters:,} parameters")


def _is_buffer(key: str) -> bool:
    return key.rsplit(".", 1)[-1] in ("running_mean", "running_var", "num_batches_tracked")


def architectures() -> list[str]:
    """Every name ``--arch`` takes: the reference's ``--netG``/``--netD`` names and our matching models."""
    return sorted(set(REFERENCE_ARCHS) | set(MODEL_FAMILY))


def read_state_dict(path: str | Path) -> Mapping[str, Any]:
    """The object in ``path``, loaded safely (``weights_only``), or a one-line CheckpointError."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: file not found")
    try:
        data = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        if "weights_only" in str(exc) or "Unsupported global" in str(exc) or "GLOBAL" in str(exc):
            raise CheckpointError(
                f"{path}: refused to load: the file holds pickled Python objects, not only tensors "
                "(a saved model or training state rather than a state_dict); if you trust it, load it in Python "
                "and save its network's state_dict()") from None
        raise CheckpointError(f"{path}: not a readable PyTorch file ({_first_line(exc)})") from None
    except Exception as exc:  # noqa: BLE001 - torch raises many types on a damaged or foreign file
        raise CheckpointError(f"{path}: truncated or not a PyTorch file ({_first_line(exc)})") from None
    if isinstance(data, Mapping) and data.get("format") == CHECKPOINT_FORMAT:
        raise CheckpointError(f"{path}: already a NectarGAN checkpoint; use it as it is, without importing")
    if not isinstance(data, Mapping):
        raise CheckpointError(f"{path}: holds a {type(data).__name__}, not a state dict (a mapping of tensor names "
                              "to tensors)")
    return data


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def resolve_arch(arch: str, overrides: Sequence[str], registry: Registry) -> tuple[str, str, dict[str, Any]]:
    """(our model name, its role, its validated options) for ``--arch`` and ``--set`` values."""
    model_name = REFERENCE_ARCHS.get(arch, arch if arch in MODEL_FAMILY else None)
    if model_name is None:
        raise ConfigError(f"--arch {arch}: not a reference network; choose one of {', '.join(architectures())}")
    component = registry.get("model", model_name)
    return model_name, str(component.meta.get("role")), resolve_options(component, list(overrides))


def import_reference(path: str | Path, arch: str, overrides: Sequence[str] = (), *,
                     registry: Registry | None = None, role: str | None = None,
                     into: Mapping[str, Any] | None = None, into_name: str = "checkpoint") -> ImportedNetwork:
    """Read a reference state dict and map it onto ``arch`` with ``overrides``; the checkpoint is in ``payload``.

    ``role`` (``generator`` or ``discriminator``), when given, is what the
    caller needs; another role is a ConfigError. ``into`` is an earlier import
    (a loaded checkpoint, named ``into_name`` in messages) that the network joins,
    replacing a network of the same role: a generator and a discriminator
    imported into one checkpoint start ``train --init-from`` together.
    """
    registry = registry or get_plugins().registry
    path = Path(path)
    model_name, found_role, options = resolve_arch(arch, overrides, registry)
    if role is not None and found_role != role:
        raise ConfigError(f"--arch {arch} is a {found_role}; a {role} is needed here")
    trainer = TRAINER if into is not None else next(
        (name for name, roles in LAYOUTS.items() if found_role in roles and registry.has("trainer", name)), TRAINER)
    if not registry.has("trainer", trainer):
        raise ConfigError(f"importing writes a checkpoint of the {TRAINER} trainer, which is not installed: "
                          "pip install nectargan-pix2pix")
    state = from_reference(read_state_dict(path), model_name, options, source=str(path))
    channels = data_channels(found_role, options)
    for key, value in channels.items():
        if value not in IMAGE_CHANNELS:
            raise ConfigError(f"{path}: the network needs data.{key} = {value}, and pix2pix images have 1, 3 or "
                              "4 channels, so it cannot be used here")
    record = {"source": str(path.resolve()), "sha256": sha256_of(path), "arch": arch, "model": model_name,
              "options": options, "tensors": len(state)}
    choice = {"name": model_name, **options}
    if into is None:
        defaults = {"in_channels": options.get("input_channels", 3), "out_channels": 3}
        raw: dict[str, Any] = {"trainer": trainer, "models": {found_role: choice}, "data": {**defaults, **channels}}
        networks: dict[str, Any] = {}
        records: dict[str, Any] = {}
    else:
        raw, networks, records = _joined(into, into_name, found_role, choice, channels)
    config = validate_config(raw, registry, source=f"{path} (imported config)")
    tracked = LAYOUTS[trainer]
    payload = {
        "trainer": trainer,
        "epoch": 0,
        "global_step": 0,
        "config": config.to_dict(),
        "state": {tracked[role]: value for role, value in _in_role_order({**networks, found_role: state}).items()},
        "imported": _in_role_order({**records, found_role: record}),
    }
    return ImportedNetwork(path, arch, model_name, found_role, options, state, payload)


def _in_role_order(by_role: Mapping[str, Any]) -> dict[str, Any]:
    return {role: by_role[role] for role in ROLES if role in by_role}


def data_channels(role: str, options: Mapping[str, Any]) -> dict[str, int]:
    """The ``data`` channel counts a network fixes: a generator both, an unconditional discriminator only B's."""
    if role == "generator":
        return {"in_channels": options["in_channels"], "out_channels": options["out_channels"]}
    if options.get("conditional", True):
        return {"in_channels": options["input_channels"], "out_channels": options["target_channels"]}
    return {"out_channels": options["target_channels"]}


def _joined(into: Mapping[str, Any], name: str, role: str, choice: dict[str, Any],
            channels: dict[str, int]) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(config, networks, import records) of ``into`` with the network of ``role`` added or replaced."""
    records = into.get("imported")
    if into.get("trainer") != TRAINER or not isinstance(records, Mapping) or not all(
            section in ROLES for section in records):
        raise ConfigError(f"{name}: not a checkpoint written by nectargan models import; --into adds networks to "
                          "those only")
    others = {section: record for section, record in records.items() if section != role}
    for section, record in others.items():
        theirs = data_channels(section, record["options"])
        clash = next((key for key in channels if key in theirs and theirs[key] != channels[key]), None)
        if clash is not None:
            raise ConfigError(f"the {role} needs data.{clash} = {channels[clash]}, the {section} in {name} "
                              f"{theirs[clash]}; both networks must see the same images")
    raw = {**into["config"], "models": {**into["config"]["models"], role: choice},
           "data": {**into["config"]["data"], **channels}}
    networks = {section: into["state"][section] for section in others}
    return raw, networks, dict(others)


def write_checkpoint(imported: ImportedNetwork, output: str | Path, *, force: bool = False) -> Path:
    """Write ``imported`` as a checkpoint (atomically, with its checksum sidecar); never over a file unasked."""
    output = Path(output)
    if output.is_dir():
        raise ConfigError(f"{output}: is a folder; give -o a file name such as {output / 'imported.pt'}")
    if output.exists() and output.resolve() == imported.source.resolve():
        raise ConfigError(f"{output}: is the file being imported; choose another -o")
    if output.exists() and not force:
        raise ConfigError(f"{output}: already exists; choose another -o or pass --force to replace it")
    return save_checkpoint(imported.payload, output)

