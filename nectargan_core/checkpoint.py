"""Checkpoint files: written atomically, verified, and loaded safely.

A checkpoint is written to a temporary file in the same folder, flushed to
disk, then renamed over its final name, so a crash or a full disk never leaves
a half-written checkpoint under a real name. A small JSON sidecar records its
size and SHA-256, so truncation or corruption is detected before loading.
Loading uses ``torch.load(weights_only=True)``: a file that carries arbitrary
pickled Python objects is refused, never executed.
"""

from __future__ import annotations

import errno
import hashlib
import json
import pickle
from pathlib import Path
from typing import Any, Mapping

from .atomic import atomic_write, atomic_write_text
from .errors import CheckpointError

FORMAT = "nectargan-checkpoint"
FORMAT_VERSION = 1
SIDECAR_SUFFIX = ".json"


def sha256_of(path: Path, chunk: int = 1 << 20) -> str:
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


def os_error_of(exc: BaseException) -> OSError | None:
    """``exc`` if it is an OSError, else the OSError it was raised from or during, if any.

    ``torch.save`` reports a failed ``write()`` (ENOSPC, EFBIG) of the file it writes to as a
    RuntimeError ("unexpected pos ..."), with the OSError as its context.
    """
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, OSError):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
    return None


def sidecar_path(path: Path) -> Path:
    return path.with_name(path.name + SIDECAR_SUFFIX)


def verify_checkpoint(path: str | Path) -> None:
    """Check size and hash against the sidecar, when there is one."""
    path = Path(path)
    side = sidecar_path(path)
    if not side.exists():
        return
    try:
        meta = json.loads(side.read_text())
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
            "to start from foreign weights, convert them to a state_dict and load them in your trainer"
        )
    if data.get("format_version", 0) > FORMAT_VERSION:
        raise CheckpointError(
            f"{path}: checkpoint format {data['format_version']} is newer than this nectargan-core "
            f"understands ({FORMAT_VERSION}); upgrade nectargan-core"
        )
    return data
