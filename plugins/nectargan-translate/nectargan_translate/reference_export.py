"""``nectargan export --format reference``: a run's generators as the reference's own ``.pth`` files.

The pix2pix/CycleGAN reference (junyanz/pytorch-CycleGAN-and-pix2pix) saves
each network as ``torch.save(net.state_dict())`` in
``checkpoints/<name>/<epoch>_net_<G|G_A|G_B>.pth`` and loads it with
``load_state_dict`` after building it with ``define_G`` from its command-line
options. This writes the same files from a checkpoint: each generator's
tensors in the reference's layout and key order
(:func:`nectargan_models.reference.to_reference`), named so that the
reference finds them (``<label>_net_G.pth``; ``--epoch <label>`` loads them),
with a sidecar ``<file>.json`` that gives the ``test.py`` options that build the
matching network (``--netG unet_256 --ngf 64 --norm batch ...``).

Which networks a run has is the trainer's to say: a trainer class lists them
in ``reference_networks`` (the reference's name -> the tracked network and the
config key of its model), and names the reference model that loads them in
``reference_model``. pix2pix has ``{"G": ("generator", "models.generator")}``
and ``pix2pix``; a CycleGAN trainer declares ``G_A`` and ``G_B`` the same way.

Every file is written in a temp folder beside its target, read back from
there and mapped onto the network again (the export fails unless every tensor
comes back identical), described in its sidecar (with its size and SHA-256),
and only then moved into place, the sidecar last, as the other formats are
(:func:`~nectargan_core.atomic.commit_files`). Options the reference cannot
build are refused in one line before anything is written.
"""

from __future__ import annotations

import json
import os
import shlex
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Optional

import torch

from nectargan_core import (CheckpointError, CoreConfig, NectarGANError, Registry, commit_files, describe_os_error,
                            get_plugins, load_checkpoint, sha256_of, staging, validate_config)

from .inference import resolve_checkpoint, run_dir_of

REPOSITORY = "junyanz/pytorch-CycleGAN-and-pix2pix"
#: The reference's test.py resizes to its crop_size, 256 unless told otherwise.
REFERENCE_TEST_SIZE = 256


class ReferenceExportError(NectarGANError):
    """The export could not be written, or does not read back as the network it came from."""


@dataclass
class ReferenceFile:
    """One written network: the ``.pth`` file, its sidecar, and how the reference builds it."""

    name: str  # the reference's network name: G, G_A, G_B
    path: Path
    sidecar: Path
    tensors: int
    flags: str
    max_abs_diff: float


@dataclass
class ReferenceExport:
    folder: Path
    label: str
    files: list[ReferenceFile]
    test_command: str

    def describe(self) -> list[str]:
        """What the command prints: the files, the round-trip result, and the reference's options."""
        lines = [f"wrote {f.path} ({f.tensors} tensors in the reference's layout) and {f.sidecar.name}"
                 for f in self.files]
        worst = max(f.max_abs_diff for f in self.files)
        lines.append(f"read back and mapped onto the network again: max |difference| = {worst:g}")
        for f in self.files:
            lines.append(f"net_{f.name}: load with define_G from the reference's options {f.flags}")
        lines.append(f"test it with the reference: {self.test_command}")
        return lines


def export_reference(target: str | Path, which: str = "latest", *, output: Optional[Path] = None,
                     registry: Optional[Registry] = None) -> ReferenceExport:
    """Write the generators of ``target``'s checkpoint (``which`` of a run directory) as reference files.

    ``output`` is a folder (the reference's ``checkpoints/<name>``); by default
    ``RUN_DIR/export/reference``.
    """
    from nectargan_models import from_reference, reference_build, to_reference

    registry = registry or get_plugins().registry
    path = resolve_checkpoint(target, which)
    checkpoint = load_checkpoint(path)
    networks = reference_networks(checkpoint, path, registry)
    config = stored_config(checkpoint, path, registry)
    state = checkpoint.get("state")
    folder = Path(output) if output is not None else run_dir_of(path) / "export" / "reference"
    if folder.exists() and not folder.is_dir():
        raise ReferenceExportError(f"{folder}: is a file; --format reference writes a folder (the reference's "
                                   "checkpoints/<name>), give -o a folder")
    label = label_of(path, target, which)

    # Everything is mapped and checked before anything is written.
    planned = []
    for name, (tracked, key) in networks.items():
        choice = config_value(config, key, path)
        weights = state.get(tracked) if isinstance(state, Mapping) else None
        if not isinstance(weights, Mapping):
            raise CheckpointError(f"{path}: the checkpoint holds no weights for '{tracked}' (net_{name})")
        build = reference_build(choice.name, choice.options)
        mapped = to_reference(weights, choice.name, choice.options, source=f"{path} ('{tracked}')")
        planned.append((name, tracked, choice, weights, build, mapped))

    files = []
    for name, tracked, choice, weights, build, mapped in planned:
        file = folder / f"{label}_net_{name}.pth"
        sidecar = file.with_name(file.name + ".json")
        try:  # written, read back and described in a temp folder, then moved in, the sidecar last
            with staging(file) as stage:
                staged = stage / file.name
                with open(staged, "wb") as handle:
                    torch.save(OrderedDict(mapped), handle)  # what the reference's save_networks writes
                    handle.flush()
                    os.fsync(handle.fileno())
                back = torch.load(staged, map_location="cpu", weights_only=True)
                ours = from_reference(back, choice.name, choice.options, source=str(file))
                difference = max(float((ours[k].float() - weights[k].float()).abs().max()) if ours[k].numel()
                                 else 0.0 for k in ours)
                if set(ours) != set(weights) or difference != 0.0:
                    raise ReferenceExportError(f"{file}: read back, it does not give the network's tensors exactly "
                                               f"(max |difference| {difference:g}); nothing was written")
                record = describe(file, name, tracked, choice, build, mapped, checkpoint, path, config, label,
                                  difference)
                record.update(size=staged.stat().st_size, sha256=sha256_of(staged))
                (stage / sidecar.name).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
                commit_files(stage, folder, [file.name], sidecar.name)
        except (OSError, RuntimeError) as exc:
            problem = describe_os_error(exc, with_file=False)
            if problem is None:
                raise
            raise ReferenceExportError(f"{file}: cannot write the export: {problem} (any previous export there is "
                                       "unchanged)") from None
        files.append(ReferenceFile(name, file, sidecar, len(mapped), build.command_line(), difference))
    return ReferenceExport(folder, label, files,
                           test_command(folder, label, networks, config, registry, checkpoint, files))


def reference_networks(checkpoint: Mapping[str, Any], path: Path, registry: Registry) -> dict[str, tuple[str, str]]:
    """The trainer's ``reference_networks``: the reference's name -> (tracked network, config key of its model).

    A trainer that declares them must also declare ``reference_model`` (the
    reference's ``--model``), and both in their documented form; anything else
    is a one-line :class:`ReferenceExportError` naming the trainer.
    """
    trainer = checkpoint.get("trainer")
    if not isinstance(trainer, str) or not registry.has("trainer", trainer):
        raise CheckpointError(f"{path}: written by trainer {trainer!r}, which is not installed here; "
                              "--format reference needs it to know which networks are the generators: "
                              f"{registry.install_advice('trainer', str(trainer))}")
    component = registry.get("trainer", trainer)
    trainer_cls = component.load()
    networks = getattr(trainer_cls, "reference_networks", None)
    if not networks:
        raise ReferenceExportError(f"{path}: trainer '{trainer}' has no counterpart in the pix2pix/CycleGAN reference "
                                   "(it declares no reference_networks); use --format onnx or torchscript")
    where = f"trainer '{trainer}' ({component.provided_by})"
    if not isinstance(networks, Mapping) or not all(
            isinstance(name, str) and isinstance(pair, tuple) and len(pair) == 2
            and all(isinstance(part, str) for part in pair) for name, pair in networks.items()):
        raise ReferenceExportError(f"{where}: reference_networks must map the reference's network names to (tracked "
                                   "network, config key) pairs of strings, e.g. {'G': ('generator', "
                                   "'models.generator')}; see docs/plugins/contracts.md")
    if not isinstance(getattr(trainer_cls, "reference_model", None), str):
        raise ReferenceExportError(f"{where}: declares reference_networks but no reference_model (the reference's "
                                   "--model that loads them, e.g. 'pix2pix' or 'cycle_gan'); see "
                                   "docs/plugins/contracts.md")
    return dict(networks)


def stored_config(checkpoint: Mapping[str, Any], path: Path, registry: Registry) -> CoreConfig:
    if not isinstance(checkpoint.get("config"), Mapping):
        raise CheckpointError(f"{path}: the checkpoint has no stored config, so its networks' architecture is "
                              "unknown")
    return validate_config(checkpoint["config"], registry, source=f"{path} (stored config)")


def config_value(config: CoreConfig, key: str, path: Path) -> Any:
    """The value at a dotted config key, e.g. ``models.generator``."""
    value: Any = config
    for part in key.split("."):
        value = getattr(value, part, None)
        if value is None:
            raise CheckpointError(f"{path}: the stored config has no '{key}'")
    return value


def label_of(path: Path, target: str | Path, which: str) -> str:
    """The reference's ``--epoch`` label of the export: ``latest``, ``best``, or an epoch number.

    A run directory gives ``which`` (latest by default, as the reference's own
    default ``--epoch latest``); a checkpoint file gives ``best`` for best.pt,
    its epoch for a periodic checkpoint, otherwise its name.
    """
    if Path(target).is_dir():
        return which
    if path.name == "best.pt":
        return "best"
    if path.name.startswith("epoch") and path.name[5:9].isdigit():
        return str(int(path.name[5:9]))
    return path.stem


def describe(file: Path, name: str, tracked: str, choice: Any, build: Any, mapped: Mapping[str, torch.Tensor],
             checkpoint: Mapping[str, Any], path: Path, config: CoreConfig, label: str,
             difference: float) -> dict[str, Any]:
    """The sidecar of one file: what it holds, where it came from, and how the reference builds and loads it."""
    return {
        "file": file.name,
        "format": "reference",
        "network": name,
        "reference": {
            "repository": REPOSITORY,
            "factory": build.factory,
            "arguments": build.arguments,
            "options": build.command_line(),
            "epoch_label": label,
            "load": f"net = {build.factory}(**arguments); net.load_state_dict(torch.load('{file.name}'), "
                    "strict=True)",
        },
        "tensors": len(mapped),
        "parameters": sum(t.numel() for k, t in mapped.items() if not k.endswith(("running_mean", "running_var",
                                                                                   "num_batches_tracked"))),
        "checkpoint": str(path.resolve()),
        "network_in_checkpoint": tracked,
        "epoch": checkpoint.get("epoch"),
        "global_step": checkpoint.get("global_step"),
        "model": {"name": choice.name, **choice.options},
        "round_trip": {"checked_with": "the file read back and mapped onto the network", "max_abs_diff": difference},
        "torch": torch.__version__,
    }


def test_command(folder: Path, label: str, networks: Mapping[str, Any], config: CoreConfig, registry: Registry,
                 checkpoint: Mapping[str, Any], files: list[ReferenceFile]) -> str:
    """A ``python test.py ...`` line of the reference that loads these files (run from its repository)."""
    model = registry.get("trainer", checkpoint["trainer"]).load().reference_model  # checked: reference_networks()
    data = getattr(config, "data", None)
    options = getattr(data, "options", {}) or {}
    size = options.get("crop_size") or options.get("load_size")
    parts = ["python", "test.py", "--dataroot", "DATAROOT", "--checkpoints_dir", str(folder.parent), "--name",
             folder.name, "--model", model, "--epoch", label]
    command = " ".join(shlex.quote(part) for part in parts)
    command += " " + files[0].flags
    if options.get("direction"):
        command += f" --direction {options['direction']}"
    if size and size != REFERENCE_TEST_SIZE:
        command += f" --load_size {size} --crop_size {size}"
    return command
