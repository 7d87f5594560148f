"""Checkpoint files: written atomically, verified, and loaded safely.

A checkpoint is written to a temporary file in the same folder, flushed to
disk, then renamed over its final name, so a crash or a full disk never leaves
a half-written checkpoint under a real name. A small JSON sidecar records its
size and SHA-256, so truncation or corruption is detected before loading. A
checkpoint without its sidecar (the process was killed between the two
renames) is checked against the CRC-32 that ``torch.save`` stores for every
member of its zip container.
Loading uses ``torch.load(weights_only=True)``: a file that carries arbitrary
pickled Python objects is refused, never executed.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import pickle
import re
import zipfile
import zlib
from pathlib import Path
from typing import Any, Iterator, Mapping

from .atomic import atomic_write, atomic_write_text, os_error_of
from .errors import CheckpointError
from .jsonfiles import read_json_object

FORMAT = "nectargan-checkpoint"
"""The ``format`` every NectarGAN checkpoint holds (with ``format_version``), to tell it from other ``.pt`` files."""
FORMAT_VERSION = 1
SIDECAR_SUFFIX = ".json"


def sha256_of(path: Path, chunk: int = 1 << 20) -> str:
    """The hex SHA-256 of a file, read in chunks (checkpoint sidecars and exports record it)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def save_checkpoint(payload: Mapping[str, Any], path: str | Path) -> Path:
    """Write ``payload`` (plus format markers) atomically, then its sidecar."""
    import torch

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {"format": FORMAT, "format_version": FORMAT_VERSION, **payload}
    try:
        atomic_write(path, lambda handle: torch.save(data, handle))
        sidecar = {"file": path.name, "size": path.stat().st_size, "sha256": sha256_of(path),
                   "epoch": payload.get("epoch"), "global_step": payload.get("global_step"),
                   "provenance": (payload.get("config") or {}).get("provenance")}  # readable without torch
        atomic_write_text(sidecar_path(path), json.dumps(sidecar, indent=2) + "\n")
    except (OSError, RuntimeError) as exc:  # a full or read-only disk: the temp file is gone, earlier ones intact
        cause = os_error_of(exc)
        if cause is None:
            raise
        fix = "raise the file size limit (ulimit -f)" if cause.errno == errno.EFBIG else "free disk space"
        raise CheckpointError(
            f"{path}: could not write checkpoint ({cause.strerror or cause}); earlier checkpoints are kept; "
            f"{fix} or choose another run.output_dir"
        ) from exc
    return path


def sidecar_path(path: Path) -> Path:
    return path.with_name(path.name + SIDECAR_SUFFIX)


def verify_checkpoint(path: str | Path) -> None:
    """Check size and hash against the sidecar; without one, the CRC-32 of every member of the zip container."""
    path = Path(path)
    side = sidecar_path(path)
    if not side.exists():
        verify_container(path)
        return
    try:
        meta = read_json_object(side)
    except (OSError, ValueError):
        raise CheckpointError(f"{side}: checkpoint record is unreadable; delete it to load {path.name} unverified") from None
    size = path.stat().st_size
    if size != meta.get("size"):
        raise CheckpointError(
            f"{path}: truncated or corrupt checkpoint ({size} bytes, expected {meta.get('size')}); "
            "use an earlier checkpoint"
        )
    if sha256_of(path) != meta.get("sha256"):
        raise CheckpointError(f"{path}: checkpoint contents do not match their checksum; use an earlier checkpoint")


def verify_container(path: Path) -> None:
    """Read every member of the checkpoint's zip container and check it against its stored CRC-32.

    ``torch.save`` writes a zip whose members (the pickle, each tensor's bytes)
    carry a CRC-32; ``torch.load`` never checks them, so without this a flipped
    byte in a tensor loads silently. Costs one read of the file (see docs/reliability.md).
    """
    try:
        with zipfile.ZipFile(path) as container:
            bad = container.testzip()
    except (zipfile.BadZipFile, zlib.error, EOFError, ValueError, NotImplementedError) as exc:
        raise CheckpointError(f"{path}: truncated or not a checkpoint file ({exc}); use an earlier checkpoint") from None
    if bad is not None:
        raise CheckpointError(f"{path}: corrupt checkpoint: member '{bad}' does not match its CRC-32; "
                              "use an earlier checkpoint")


#: ``Missing key(s) in state_dict: "a", "b".`` and friends, in the error of ``Module.load_state_dict``.
_STATE_DICT_PROBLEM = re.compile(r'(Missing key\(s\)|Unexpected key\(s\)) in state_dict: ((?:"[^"]*"(?:, )?)+)')
_SIZE_MISMATCH = re.compile(r"size mismatch for ([^:]+): copying a param with shape (torch.Size\(\[[^\]]*\]\)) "
                            r"from checkpoint, the shape in current model is (torch.Size\(\[[^\]]*\]\))")


def state_problem(exc: BaseException) -> str:
    """The first thing wrong with a checkpoint's contents, from the error restoring them raised, in one line."""
    if isinstance(exc, KeyError):
        return f"it has no {exc.args[0]!r} entry" if exc.args else "an entry is missing"
    text = str(exc)
    found = _STATE_DICT_PROBLEM.search(text)
    if found:
        keys = re.findall(r'"([^"]*)"', found.group(2))
        kind = "missing" if found.group(1).startswith("Missing") else "unexpected"
        more = f" (+{len(keys) - 1} more)" if len(keys) > 1 else ""
        return f"{kind} tensor '{keys[0]}'{more}"
    found = _SIZE_MISMATCH.search(text)
    if found:
        return f"tensor '{found.group(1)}' has shape {found.group(2)}, the network expects {found.group(3)}"
    first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    return f"{type(exc).__name__}: {first}"


class EntryProblem(Exception):
    """An entry of a checkpoint that is there but cannot be restored (a crafted ``rng.numpy: "x"``): its path and why."""

    def __init__(self, entry: str, cause: BaseException) -> None:
        super().__init__(entry)
        self.entry, self.cause = entry, cause


#: What restoring a wrong or missing entry raises (out of memory excepted).
RESTORE_ERRORS = (KeyError, IndexError, TypeError, ValueError, AttributeError, RuntimeError)


@contextlib.contextmanager
def entry(name: str) -> Iterator[None]:
    """Name the entry being restored: an error inside becomes an :class:`EntryProblem` at ``name`` (nested:
    ``rng.numpy``), which :func:`restoring` turns into one line naming the file and the entry."""
    try:
        yield
    except EntryProblem as inner:
        raise EntryProblem(f"{name}.{inner.entry}", inner.cause) from None
    except RESTORE_ERRORS as exc:
        if "out of memory" in str(exc).lower():
            raise
        raise EntryProblem(name, exc) from None


@contextlib.contextmanager
def restoring(what: str | None = None) -> Iterator[None]:
    """Turn an error raised while restoring state from a checkpoint into one line naming ``what`` and the problem.

    A checkpoint that loads can still lack an entry (crafted, or from another
    version): ``KeyError``, ``TypeError`` and the multi-line ``RuntimeError`` of
    ``Module.load_state_dict`` become a :class:`CheckpointError`.
    """
    try:
        yield
    except CheckpointError:
        raise
    except EntryProblem as problem:
        where = f"{what}: " if what else ""
        raise CheckpointError(f"{where}cannot restore entry '{problem.entry}': {state_problem(problem.cause)}; "
                              "the checkpoint is damaged or was written by another trainer or config") from None
    except RESTORE_ERRORS as exc:
        if "out of memory" in str(exc).lower():
            raise
        where = f"{what}: " if what else ""
        raise CheckpointError(f"{where}cannot restore: {state_problem(exc)}; "
                              "the checkpoint is damaged or was written by another trainer or config") from None


def load_checkpoint(path: str | Path, *, verify: bool = True) -> dict[str, Any]:
    """Load a NectarGAN checkpoint onto the CPU, safely, or raise a one-line CheckpointError."""
    import torch

    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: checkpoint file not found")
    if verify:
        verify_checkpoint(path)
    try:
        data = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if "weights_only" in str(exc) or "Unsupported global" in str(exc) or "GLOBAL" in str(exc):
            raise CheckpointError(
                f"{path}: refused to load: the file contains arbitrary Python objects, which could run code; "
                "only load checkpoints written by NectarGAN from a source you trust"
            ) from None
        raise CheckpointError(f"{path}: not a readable checkpoint ({first})") from None
    except Exception as exc:  # noqa: BLE001 - torch raises many types on a damaged or foreign file
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CheckpointError(f"{path}: truncated or not a checkpoint file ({first})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise CheckpointError(
            f"{path}: not a NectarGAN checkpoint (no '{FORMAT}' marker); "
            "weights saved by pytorch-CycleGAN-and-pix2pix convert with nectargan models import FILE --arch NAME"
        )
    if data.get("format_version", 0) > FORMAT_VERSION:
        raise CheckpointError(
            f"{path}: checkpoint format {data['format_version']} is newer than this nectargan-core "
            f"understands ({FORMAT_VERSION}); upgrade nectargan-core"
        )
    return data
