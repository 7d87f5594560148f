"""Loading a trained generator from a run directory or a checkpoint file.

The checkpoint carries the resolved config, so the generator is rebuilt with
exactly the architecture options it was trained with; nobody has to repeat
them on the command line.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

import torch

from nectargan_core import (CHECKPOINT_PATTERN, CheckpointError, CoreConfig, Registry, RunDir, get_plugins,
                            load_checkpoint, restoring, state_problem, validate_config)

from .generators import GeneratorSpec
from .networks import build_network
from .options import data_channels
from .evaluation import evaluation_mode


@dataclass
class LoadedGenerator:
    """A trained generator read from a checkpoint (:func:`load_generator`), with the run's config and where
    its weights come from; what ``test``, ``predict`` and ``export`` run."""

    model: torch.nn.Module
    config: CoreConfig
    checkpoint: Path
    epoch: int
    global_step: int
    #: The direction it translates (``AtoB``/``BtoA``), and how it was built (see :class:`GeneratorSpec`).
    direction: str = "AtoB"
    spec: Optional[GeneratorSpec] = None
    #: Every direction the checkpoint has a generator for, the default first.
    directions: tuple[str, ...] = ("AtoB",)
    #: The name the trainer tracked it under (its key in the checkpoint's ``state``).
    tracked: str = "generator"
    #: Batches of the next epoch already trained when the checkpoint was written (0: at an epoch's end).
    batch_in_epoch: int = 0

    @property
    def position(self) -> str:
        """Where the weights come from, counting epochs from 1 as ``nectargan train`` does.

        ``epoch 3`` (the end of the third), or mid-epoch ``epoch 1, batch 15`` (the
        checkpoint's file name and ``epoch`` entry count the epochs *done*: 0 there).
        """
        if self.batch_in_epoch:
            return f"epoch {self.epoch + 1}, batch {self.batch_in_epoch}"
        return f"epoch {self.epoch}"

    @property
    def channels(self) -> tuple[int, int]:
        """(input channels, output channels) of this generator."""
        if self.spec is not None:
            return self.spec.in_channels, self.spec.out_channels
        return data_channels(self.config)

    @cached_property
    def size_multiple(self) -> int:
        """The number input height and width must be multiples of (see :func:`size_multiple`)."""
        model_choice = self.spec.model if self.spec is not None else self.config.models.generator
        return size_multiple(self.model, model_choice.options, self.channels[0])

    @property
    def training_size(self) -> int | None:
        """The side of the square images the generator was trained on (``data.crop_size``, else ``load_size``)."""
        options = self.config.data.options
        return options.get("crop_size") or options.get("load_size")

    @property
    def name(self) -> str:
        """The checkpoint's file stem (``best``, ``epoch0010-step00004000``)."""
        return self.checkpoint.stem

    @property
    def tag(self) -> str:
        """A name for outputs that says which weights made them, whatever the file is called.

        A periodic checkpoint's stem already holds its epoch and step; any other
        (``best``, a copied file) gets them appended (``best-epoch0003-step00000012``),
        so the outputs of a later ``best`` never overwrite those of an earlier one.
        """
        if CHECKPOINT_PATTERN.match(self.checkpoint.name):
            return self.name
        return f"{self.name}-{RunDir.checkpoint_name(self.epoch, self.global_step).removesuffix('.pt')}"

    @property
    def label(self) -> str:
        """``best.pt (epoch 3, step 12)``: the file and the position its weights come from."""
        return f"{self.checkpoint.name} ({self.position}, step {self.global_step})"

    @property
    def inverse(self) -> Optional[str]:
        """The direction that translates back (``BtoA`` for ``AtoB``), when the checkpoint has its generator."""
        other = {"AtoB": "BtoA", "BtoA": "AtoB"}.get(self.direction)
        return other if other in self.directions else None


def run_dir_of(checkpoint: Path) -> Path:
    """The run directory holding ``checkpoint`` (``RUN/checkpoints/x.pt``), else its folder."""
    parent = checkpoint.parent
    if parent.name == "checkpoints" and (parent.parent / "config.yaml").is_file():
        return parent.parent
    return parent


def resolve_checkpoint(target: str | Path, which: str = "latest") -> Path:
    """A checkpoint file from a file path, or from a run directory and ``which``:
    ``latest``, ``best`` or an epoch number."""
    path = Path(target)
    if path.is_file():
        return path
    run = RunDir.open(path)
    if which == "best":
        if not run.best_checkpoint.is_file():
            raise CheckpointError(f"{run.path}: no best.pt (checkpoint.best_metric was not set when training, or "
                                  "never gave a number); "
                                  "use --checkpoint latest")
        return run.best_checkpoint
    checkpoints = run.periodic_checkpoints()
    if which == "latest":
        if not checkpoints:
            raise CheckpointError(f"{run.path}: no checkpoints yet")
        return checkpoints[-1]
    if not which.isdigit():
        raise CheckpointError(f"--checkpoint {which!r}: use latest, best or an epoch number")
    matches = [p for p in checkpoints if p.name.startswith(f"epoch{int(which):04d}-")]
    if not matches:
        epochs = sorted({int(p.name[5:9]) for p in checkpoints})
        raise CheckpointError(f"{run.path}: no checkpoint for epoch {which}; available epochs: "
                              f"{', '.join(map(str, epochs)) or 'none'}")
    return matches[-1]


def load_generator(target: str | Path, which: str = "latest", *, device: str | torch.device = "cpu",
                   registry: Registry | None = None, arch: str | None = None,
                   arch_options: Sequence[str] = (), direction: str | None = None) -> LoadedGenerator:
    """The generator of ``direction`` in a checkpoint, in eval mode on ``device``.

    The checkpoint's trainer says which tracked network translates each way and
    how it is built from the stored config (its ``generators`` and
    ``generator_spec``, see ``GeneratorSpec``); ``direction``
    None takes its first (pix2pix's one generator, CycleGAN's ``AtoB``).
    With ``arch``, ``target`` is a pix2pix/CycleGAN reference state dict instead,
    mapped in memory as ``nectargan models import FILE --arch ARCH --set ...`` does
    (``arch_options`` are its ``OPTION=VALUE`` settings).
    """
    return load_generators(target, which, [direction], device=device, registry=registry, arch=arch,
                           arch_options=arch_options)[0]


def load_generators(target: str | Path, which: str = "latest", directions: Sequence[str | None] = (None,), *,
                    device: str | torch.device = "cpu", registry: Registry | None = None, arch: str | None = None,
                    arch_options: Sequence[str] = (), inverse: bool = False) -> list[LoadedGenerator]:
    """:func:`load_generator` for several directions of one checkpoint, read once.

    ``inverse``: also the generator that translates the first one's outputs back, last in the list, when the
    checkpoint has one (CycleGAN's G_B for G_A).
    """
    registry = registry or get_plugins().registry
    if arch is not None:
        from nectargan_models import import_reference

        path = Path(target)
        if path.is_dir():
            raise CheckpointError(f"{path}: --arch takes a reference state dict file, not a folder")
        checkpoint = import_reference(path, arch, arch_options, registry=registry, role="generator").payload
    else:
        path = resolve_checkpoint(target, which)
        checkpoint = load_checkpoint(path)
    for entry in ("trainer", "state", "epoch", "global_step"):
        if entry not in checkpoint:
            raise CheckpointError(f"{path}: cannot restore: it has no '{entry}' entry; the checkpoint is damaged or "
                                  "was written by another program")
    trainer = checkpoint["trainer"]
    trainer_class = _trainer_class(trainer, path, registry)
    declared = dict(getattr(trainer_class, "generators", None) or {})
    if not declared:
        raise CheckpointError(f"{path}: not a checkpoint with a generator: its trainer '{trainer}' declares none "
                              "for test, predict and export")
    wanted = [direction or next(iter(declared)) for direction in directions]
    back = {"AtoB": "BtoA", "BtoA": "AtoB"}.get(wanted[0])
    if inverse and back in declared:
        wanted.append(back)
    for direction in wanted:
        if direction not in declared:
            raise CheckpointError(f"{path}: --direction {direction}: this '{trainer}' checkpoint has a generator "
                                  f"for {' and '.join(declared)} only")
    networks = checkpoint["state"] if isinstance(checkpoint["state"], Mapping) else {}
    for direction in wanted:
        name = declared[direction]
        if not isinstance(networks.get(name), Mapping):
            raise CheckpointError(f"{path}: not a {trainer} checkpoint with a generator (trainer "
                                  f"'{trainer}', networks: {', '.join(networks) or 'none'})"
                                  + ("" if name in networks else f"; it has no '{name}' entry"))
    if not isinstance(checkpoint.get("config"), Mapping):
        raise CheckpointError(f"{path}: the checkpoint has no stored config, so the generator's architecture is "
                              "unknown; for reference weights use nectargan models import FILE --arch NAME "
                              "(its 'config' entry is missing or not a mapping)")
    with restoring(str(path)):  # a damaged or crafted checkpoint: one line naming the file and what it lacks
        epoch, global_step = int(checkpoint["epoch"]), int(checkpoint["global_step"])
        batch_in_epoch = int(checkpoint.get("batch_in_epoch") or 0)
    config = validate_config(checkpoint["config"], registry, source=f"{path} (stored config)")
    loaded = []
    for direction in wanted:
        spec_of = getattr(trainer_class, "generator_spec", None)
        if spec_of is None:
            raise CheckpointError(f"{path}: its trainer '{trainer}' declares generators but no "
                                  "generator_spec(config, direction), so they cannot be rebuilt")
        spec = spec_of(config, direction)

        def build(spec: GeneratorSpec = spec) -> torch.nn.Module:
            return build_network(registry, spec.model, in_channels=spec.in_channels, out_channels=spec.out_channels)

        try:
            model = _with_weights(build, networks[declared[direction]])
        except RuntimeError as exc:  # load_state_dict: keys or shapes that do not fit the stored architecture
            raise CheckpointError(f"{path}: the generator weights do not fit the architecture in the stored config "
                                  f"({state_problem(exc)})") from None
        model.to(device).eval()
        loaded.append(LoadedGenerator(model, config, path, epoch, global_step,
                                      direction=direction, spec=spec, directions=tuple(declared),
                                      tracked=declared[direction], batch_in_epoch=batch_in_epoch))
    return loaded


def _trainer_class(name: Any, path: Path, registry: Registry) -> Any:
    """The class of the trainer that wrote a checkpoint, whose declarations say where its generators are."""
    if not isinstance(name, str) or not registry.has("trainer", name):
        raise CheckpointError(f"{path}: written by trainer '{name}', which is not installed here; "
                              f"{registry.install_advice('trainer', str(name))}")
    return registry.get("trainer", name).load()


def _with_weights(build: Any, state: Mapping[str, Any]) -> torch.nn.Module:
    """``build()`` with ``state`` loaded, skipping the random initialisation the weights replace.

    The network is built on the meta device (no memory, no init: 0.63 s of a 0.78 s
    unet_256 load) and takes the checkpoint's tensors as its own; a network with
    state the checkpoint does not hold (a non-persistent buffer) is built normally.
    """
    with torch.device("meta"):
        model = build()
    model.load_state_dict(state, assign=True)
    if any(t.is_meta for t in (*model.parameters(), *model.buffers())):
        model = build()
        model.load_state_dict(state)
    return model


def size_multiple(model: torch.nn.Module, options: Mapping[str, Any], in_channels: int, *,
                  limit: int = 4096) -> int:
    """What input height and width must be multiples of, for any generator.

    The model's own ``size_multiple`` attribute when it declares one (every
    nectargan-models generator does), else found by trying: the smallest
    power-of-two square the model accepts (each stride-2 level halves the
    size, so that square is the multiple). A declared value that is not a
    positive whole number is a :class:`CheckpointError`. ``options`` (the
    model's config options) are not read: an option's name says nothing sure
    about the geometry of another plugin's network.
    """
    declared = getattr(model, "size_multiple", None)
    if declared is not None:
        if isinstance(declared, bool) or not isinstance(declared, int) or declared < 1:
            raise CheckpointError(f"the generator ({type(model).__name__}) declares size_multiple {declared!r}; it "
                                  "must be a whole number of at least 1 (its author's fix; see "
                                  "docs/plugins/contracts.md)")
        return declared
    parameter = next(model.parameters(), None)
    device = parameter.device if parameter is not None else torch.device("cpu")
    side = 1
    with evaluation_mode(model, True):
        while side <= limit:
            try:
                model(torch.zeros(1, in_channels, side, side, device=device))
                return side
            except Exception:  # noqa: BLE001 - a too-small input fails in model-specific ways
                side *= 2
    raise CheckpointError(f"the generator ({type(model).__name__}) accepts no square input up to {limit} px")
