"""``nectargan export``: the generator as ONNX or TorchScript, checked against PyTorch.

The generator is exported in eval mode (dropout off, BN running statistics)
with a dynamic batch axis; ONNX also with a dynamic height and width (any
multiples of the generator's size multiple), TorchScript for one size. The
export is then run on a random batch of 2 and of 1 (the second proves the
batch axis is dynamic), and an ONNX export also on a second size (which
proves the height and width are), and compared with the PyTorch model: ONNX with onnxruntime when it is installed
(otherwise the check is skipped and the sidecar says why), TorchScript by
loading the saved file back. A difference above the tolerance is an error.

Next to the export, ``<file>.json`` records what a pipeline needs to call it:
input and output names and shapes, channels, the [-1, 1] value range,
the size multiple, the checkpoint and epoch, the parity result, and the
export's size and SHA-256.

The export is written, checked and described in a temp folder beside the
target, then moved into place: the old sidecar is removed first and the new
one moved in last (:func:`~nectargan_core.atomic.commit_files`). A process
killed at any point leaves the previous export (with or without its sidecar)
or the new one, never a partial file, nor a sidecar beside a file it does not
describe. A full or read-only disk is one line, and the previous export stays.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Literal, Optional

import torch

from nectargan_core import MAX_IMAGE_SIDE, NectarGANError, commit_files, describe_os_error, sha256_of, staging

from .inference import LoadedGenerator, load_generator, run_dir_of

Format = Literal["onnx", "torchscript"]
SUFFIXES = {"onnx": ".onnx", "torchscript": ".torchscript.pt"}
INPUT, OUTPUT = "input", "output"
PARITY_BATCHES = (2, 1)
#: ONNX keeps everything in one protobuf below this size; larger weights go to a ``.data`` file.
PROTOBUF_LIMIT = 2**31 - 2**26
#: The packages themselves (the plugin is not on PyPI, so ``nectargan-translate[onnx]`` would not resolve there).
INSTALL_HINT = "pip install onnx onnxscript onnxruntime"


class ExportError(NectarGANError):
    """The export failed, or does not reproduce the PyTorch model."""


@dataclass
class Parity:
    """How closely the export reproduces the PyTorch model (``max_abs_diff`` None: not checked)."""

    checked_with: Optional[str]
    max_abs_diff: Optional[float]
    tolerance: float
    reason: Optional[str] = None
    #: The image sizes (height, width) the export was run at.
    sizes: tuple[tuple[int, int], ...] = ()

    @property
    def passed(self) -> Optional[bool]:
        """Whether the difference is within the tolerance; None when parity was not checked."""
        return None if self.max_abs_diff is None else self.max_abs_diff <= self.tolerance

    def describe(self) -> str:
        """One line on the check for the command's output: how it was checked and the largest difference,
        or why it was not checked."""
        if self.max_abs_diff is None:
            return f"parity not checked: {self.reason}"
        batches = " and ".join(map(str, PARITY_BATCHES))
        sizes = f" at {' and '.join(f'{h}x{w}' for h, w in self.sizes)}" if len(self.sizes) > 1 else ""
        return (f"parity ({self.checked_with}, batches of {batches}{sizes}): max |export - pytorch| = "
                f"{self.max_abs_diff:.3g} (tolerance {self.tolerance:g})")

    def as_dict(self) -> dict[str, Any]:
        """The check as JSON-ready values, for the ``parity`` entry of the export's sidecar."""
        return {"checked_with": self.checked_with, "max_abs_diff": self.max_abs_diff, "tolerance": self.tolerance,
                "batch_sizes": list(PARITY_BATCHES), "sizes": [list(size) for size in self.sizes],
                "passed": self.passed, "reason": self.reason}


@dataclass
class ExportReport:
    """What :func:`export_generator` wrote: the export and its JSON sidecar, its format, input size and parity."""

    path: Path
    sidecar: Path
    format: Format
    size: tuple[int, int]
    parity: Parity
    #: Which weights: ``best.pt (epoch 3, step 12)``.
    weights: str = ""
    #: Whether the export takes any height and width in multiples of ``multiple`` (ONNX), or only ``size``.
    dynamic_size: bool = False
    multiple: int = 1

    def notes(self) -> list[str]:
        """Lines for stderr: an ONNX export that could be made for one size only."""
        if self.format == "onnx" and not self.dynamic_size:
            return [f"note: this generator could not be exported for any height and width (its code fixes a size "
                    f"when traced); the export takes {self.size[0]}x{self.size[1]} only: resize or pad to it"]
        return []

    def describe_sizes(self) -> str:
        """The sizes the export takes, for the command's line."""
        if self.dynamic_size:
            return f"any height and width in multiples of {self.multiple}, dynamic batch"
        return f"{self.size[0]}x{self.size[1]}, dynamic batch"


def export_generator(target: str | Path, which: str = "latest", *, fmt: Format = "onnx",
                     output: Optional[Path] = None, size: Optional[tuple[int, int]] = None,
                     opset: int = 18, tolerance: float = 1e-4, direction: Optional[str] = None) -> ExportReport:
    """Export the generator of ``direction`` (None: the checkpoint's first), check it, and write its sidecar;
    raise if parity fails."""
    if fmt == "onnx" and not all(importlib.util.find_spec(name) for name in ("onnx", "onnxscript")):
        raise ExportError(f"ONNX export needs the onnx and onnxscript packages: {INSTALL_HINT}")
    if fmt == "onnx":
        import onnx.defs

        newest = onnx.defs.onnx_opset_version()
        if not 18 <= opset <= newest:
            raise ExportError(f"--opset {opset}: the exporter writes opsets 18 to {newest} (the installed onnx's "
                              "newest); choose one of them")
    generator = load_generator(target, which, device="cpu", direction=direction)
    if size is None and not generator.training_size:
        raise ExportError(f"{generator.checkpoint}: the run records no training size (data.crop_size or load_size), "
                          f"so the export's input size is yours to choose: pass --size HxW (multiples of "
                          f"{generator.size_multiple})")
    height, width = size or (generator.training_size,) * 2
    multiple = generator.size_multiple
    if height % multiple or width % multiple:
        raise ExportError(f"--size {height}x{width}: height and width must be multiples of {multiple} "
                          "for this generator")
    # named after the weights' epoch (tag); a checkpoint with a generator per direction adds the direction
    stem = generator.tag if len(generator.directions) == 1 else f"{generator.tag}-{generator.direction}"
    path = Path(output) if output is not None else (
        run_dir_of(generator.checkpoint) / "export" / f"{stem}{SUFFIXES[fmt]}")
    if path.is_dir():
        raise ExportError(f"{path}: is a folder; give -o a file name")

    in_channels = generator.channels[0]
    random = torch.Generator().manual_seed(0)

    def batch(n: int, sides: tuple[int, int] = (height, width)) -> torch.Tensor:
        return torch.rand(n, in_channels, *sides, generator=random) * 2 - 1

    other = (height + multiple, width + 2 * multiple)  # a second size: the height and width are dynamic

    model = generator.model.eval()
    sidecar = path.with_name(path.name + ".json")
    try:
        with staging(path) as stage:
            staged = stage / path.name
            dynamic = False
            if fmt == "onnx":
                opset, dynamic = export_onnx(model, batch(2), staged, opset, multiple)
                batches = [batch(n) for n in PARITY_BATCHES] + ([batch(1, other)] if dynamic else [])
                parity = onnx_parity(model, staged, batches, tolerance, label=path)
                parity.sizes = ((height, width), other) if dynamic else ((height, width),)
            else:
                export_torchscript(model, batch(2), staged)
                parity = torchscript_parity(model, staged, [batch(n) for n in PARITY_BATCHES], tolerance)
                parity.sizes = ((height, width),)
            record = describe(generator, path, fmt, (height, width), opset if fmt == "onnx" else None, parity,
                              dynamic)
            record.update(size=staged.stat().st_size, sha256=sha256_of(staged))
            (stage / sidecar.name).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
            extra = sorted(name for name in os.listdir(stage) if name not in (path.name, sidecar.name))
            commit_files(stage, path.parent, [*extra, path.name], sidecar.name)  # e.g. ONNX external data first
    except (OSError, RuntimeError) as exc:
        problem = describe_os_error(exc, with_file=False) or _write_failure(exc)
        if problem is None:
            raise
        raise ExportError(f"{path}: cannot write the export: {problem} (any previous export there is unchanged)") \
            from None
    if parity.passed is False:
        raise ExportError(f"parity check failed: max |export - pytorch| = {parity.max_abs_diff:.3g} is above the "
                          f"tolerance {tolerance:g}; {path} does not reproduce the model")
    return ExportReport(path, sidecar, fmt, (height, width), parity, generator.label, dynamic, multiple)


def _write_failure(exc: BaseException) -> Optional[str]:
    """The first line of a C++ writer's error (``PytorchStreamWriter failed writing file``) that has no OSError."""
    text = str(exc)
    if isinstance(exc, RuntimeError) and ("write" in text.lower() and "fail" in text.lower()):
        return text.strip().splitlines()[0]
    return None


def export_onnx(model: torch.nn.Module, example: torch.Tensor, path: Path, opset: int,
                multiple: int = 1) -> tuple[int, bool]:
    """Write ``model`` as ONNX with a dynamic batch axis and, where the model allows it, a dynamic height and width
    (multiples of ``multiple``); return the opset the file declares and whether the height and width are dynamic."""
    import onnx

    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    batch = torch.export.Dim("batch", min=1)
    blocks = MAX_IMAGE_SIDE // multiple
    sized = {0: batch, 2: multiple * torch.export.Dim("height_blocks", min=1, max=blocks),
             3: multiple * torch.export.Dim("width_blocks", min=1, max=blocks)}
    # traced at two blocks or more per side: torch.export fixes a dimension whose example is exactly 1
    height, width = (max(side, 2 * multiple) for side in example.shape[-2:])
    traced = torch.nn.functional.interpolate(example, size=(height, width)) if (height, width) != \
        tuple(example.shape[-2:]) else example
    try:
        dynamic = True
        try:
            with _quiet_tracing():
                torch.onnx.export(model, (traced,), str(path), dynamo=True, input_names=[INPUT],
                                  output_names=[OUTPUT], dynamic_shapes=(sized,), opset_version=opset,
                                  external_data=weights > PROTOBUF_LIMIT, verbose=False)
        except ImportError:
            raise
        except Exception:  # noqa: BLE001 - a model whose code fixes its size (a guard on H or W): one size
            dynamic = False
            torch.onnx.export(model, (example,), str(path), dynamo=True, input_names=[INPUT], output_names=[OUTPUT],
                              dynamic_shapes=({0: batch},), opset_version=opset,
                              external_data=weights > PROTOBUF_LIMIT, verbose=False)
    except ImportError as exc:  # onnxscript older than this torch's exporter (torch 2.11 needs onnxscript 0.6)
        versions = ", ".join(f"{name} {_installed(name)}" for name in ("onnx", "onnxscript"))
        raise ExportError(f"ONNX export: torch {torch.__version__} cannot use the installed {versions} ({exc}); "
                          "upgrade them: pip install -U onnx onnxscript") from None
    declared = onnx.load(str(path), load_external_data=False).opset_import
    version = next(entry.version for entry in declared if entry.domain in ("", "ai.onnx"))
    if version != opset:  # the converter from the exporter's opset failed (it prints why) and kept its own
        raise ExportError(f"--opset {opset}: the exporter could not convert this generator to it (it wrote opset "
                          f"{version}); use --opset {version}")
    return version, dynamic


@contextlib.contextmanager
def _quiet_tracing() -> Iterator[None]:
    """torch logs a guard it cannot create while tracing for any size as an ERROR block on stderr; the fallback to
    one size is the answer to it, said in one note."""
    import logging

    names = ("torch._guards", "torch.fx.experimental.symbolic_shapes", "torch._dynamo", "torch.export")
    loggers = [logging.getLogger(name) for name in names]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)


def _installed(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return "(not installed)"


@contextlib.contextmanager
def quiet_jit() -> Iterator[None]:
    """Silence what TorchScript says about itself while we use it on purpose.

    ``torch.jit`` announces its deprecation on every call (TorchScript was
    asked for), and tracing warns that the generator's input-size check reads
    Python ints from the shape (the export is for one image size: intended).
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        warnings.filterwarnings("ignore", message=r"`torch\.jit\.\w+` is deprecated")
        yield


def export_torchscript(model: torch.nn.Module, example: torch.Tensor, path: Path) -> None:
    """Trace ``model`` (eval mode) and save it; the trace works for any batch size.

    Saved through a Python file object, so a failed write is an OSError (with its errno), not a C++ error.
    """
    with quiet_jit():
        traced = torch.jit.trace(model, example, check_trace=False)
        with open(path, "wb") as handle:
            torch.jit.save(traced, handle)
            handle.flush()
            os.fsync(handle.fileno())


def max_difference(outputs: list[torch.Tensor], expected: list[torch.Tensor]) -> float:
    return max(float((got.float() - want.float()).abs().max()) for got, want in zip(outputs, expected))


def run_model(model: Any, batches: list[torch.Tensor]) -> list[torch.Tensor]:
    with torch.no_grad():
        return [model(batch) for batch in batches]


def onnx_parity(model: torch.nn.Module, path: Path, batches: list[torch.Tensor], tolerance: float,
                label: Optional[Path] = None) -> Parity:
    """Run the ONNX file at ``path`` with onnxruntime; errors name ``label`` (default ``path``)."""
    try:
        import onnxruntime
    except ImportError:
        return Parity(None, None, tolerance, f"onnxruntime is not installed ({INSTALL_HINT})")
    try:
        session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        outputs = [torch.from_numpy(session.run([OUTPUT], {INPUT: batch.numpy()})[0]) for batch in batches]
    except Exception as exc:  # noqa: BLE001 - onnxruntime reports load and run failures with many types
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ExportError(f"{label or path}: onnxruntime {onnxruntime.__version__} cannot run the export: {first}") \
            from None
    return Parity(f"onnxruntime {onnxruntime.__version__}", max_difference(outputs, run_model(model, batches)),
                  tolerance)


def torchscript_parity(model: torch.nn.Module, path: Path, batches: list[torch.Tensor],
                       tolerance: float) -> Parity:
    with quiet_jit():
        loaded = torch.jit.load(str(path), map_location="cpu")
    return Parity(f"torch.jit.load (torch {torch.__version__})",
                  max_difference(run_model(loaded, batches), run_model(model, batches)), tolerance)


def describe(generator: LoadedGenerator, path: Path, fmt: Format, size: tuple[int, int], opset: Optional[int],
             parity: Parity, dynamic_size: bool = False) -> dict[str, Any]:
    """The sidecar: everything a pipeline needs to feed the export and read its output.

    Tensors are named only in ONNX; a TorchScript module takes one positional tensor.
    """
    in_channels, out_channels = generator.channels
    choice = generator.spec.model if generator.spec is not None else generator.config.models.generator

    def tensor(name: str, channels: int) -> dict[str, Any]:
        named = {"name": name} if fmt == "onnx" else {}
        sides: list[Any] = ["height", "width"] if dynamic_size else list(size)
        return {**named, "shape": ["batch", channels, *sides], "dtype": "float32", "range": [-1.0, 1.0]}

    built = {"name": choice.name, **choice.options}
    for key, channels in zip(("in_channels", "out_channels"), generator.channels):
        if key in built:
            built[key] = channels  # what it was built with (data's, or the direction's), not the model's default
    return {
        "file": path.name,
        "format": fmt,
        **({"opset": opset} if opset is not None else {}),
        "input": tensor(INPUT, in_channels),
        "output": tensor(OUTPUT, out_channels),
        "normalisation": "input = pixels / max_value * 2 - 1 (channels first, in the training channel order); "
                         "image = (output + 1) / 2 * max_value",
        "size_multiple": generator.size_multiple,
        "dynamic_size": dynamic_size,
        "sizes": (f"any height and width that are multiples of {generator.size_multiple} (checked at "
                  + " and ".join(f"{h}x{w}" for h, w in parity.sizes) + ")") if dynamic_size
        else f"{size[0]}x{size[1]} only",
        "checkpoint": str(generator.checkpoint.resolve()),
        "checkpoint_name": generator.checkpoint.name,
        "epoch": generator.epoch,
        "global_step": generator.global_step,
        "generator": built,
        "direction": generator.direction,
        "network": generator.tracked,
        "parity": parity.as_dict(),
        "torch": torch.__version__,
    }
