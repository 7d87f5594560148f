"""Generators of hostile tar archives (and of files that are not tar archives), for the extraction tests.

Nothing binary is stored: each case is built at run time from a kind and a
seed, which vary where the bad member sits among harmless ones, the
compression and the tar format. ``HOSTILE`` maps each kind to its builder; a
builder takes the destination the archive will be extracted into (the
PATH_MAX link chain needs its length) and the folder an escape would reach.
"""

from __future__ import annotations

import io
import os
import random
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

#: (TarInfo, data or None)
Member = tuple[tarfile.TarInfo, Optional[bytes]]
COMPRESSIONS = ("", "gz", "bz2", "xz")
FORMATS = (tarfile.GNU_FORMAT, tarfile.PAX_FORMAT)


def member(name: str, kind: bytes = tarfile.REGTYPE, data: bytes = b"", link: str = "") -> Member:
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.mode, info.mtime = kind, link, 0o644 if kind != tarfile.DIRTYPE else 0o755, 1_700_000_000
    if kind in (tarfile.REGTYPE, tarfile.AREGTYPE, tarfile.GNUTYPE_SPARSE, tarfile.CONTTYPE):
        info.size = len(data)
        return info, data
    return info, None


def folder(name: str) -> Member:
    return member(name, tarfile.DIRTYPE)


def cve_2025_4517_chain(dest: Path, outside: Path) -> list[Member]:
    """Symbolic links whose resolved path passes PATH_MAX, then a link out and a file written through it.

    Each step adds a 247-character folder and a one-letter link to it, so member
    names stay short while the real path grows 248 bytes a step. Once it passes
    PATH_MAX, ``os.path.realpath`` (used by tarfile's ``data`` filter) stops
    resolving and judges the rest lexically, while the kernel follows the links:
    ``escape`` looks inside, but points at ``outside``.
    """
    comp = "d" * 247
    steps = [chr(ord("a") + i) for i in range((4096 - len(str(dest))) // 248 + 2)]
    members: list[Member] = []
    prefix = ""
    for letter in steps:
        members.append(folder(os.path.join(prefix, comp)))
        members.append(member(os.path.join(prefix, letter), tarfile.SYMTYPE, link=comp))
        prefix = os.path.join(prefix, letter)
    members.append(member(prefix, tarfile.SYMTYPE, link="../" * (len(steps) - 1)))  # back to dest, really
    up = len(dest.relative_to(outside).parts)
    members.append(member("escape", tarfile.SYMTYPE, link=prefix + "/" + "../" * up))
    members.append(member("escape/pwned.txt", data=b"written outside the destination"))
    return members


def pax_sparse(name: str) -> list[Member]:
    """A PAX 1.0 sparse file (what GNU tar --sparse --format=pax writes): a REGTYPE header whose data starts
    with the sparse map; tarfile marks it with ``.sparse``, and copying its data out would write the map."""
    data = b"1\n0\n64\n".ljust(512, b"\0") + b"s" * 64
    info, _ = member(name + ".png", data=data)
    info.pax_headers = {"GNU.sparse.major": "1", "GNU.sparse.minor": "0", "GNU.sparse.name": name,
                        "GNU.sparse.realsize": "64"}
    return [(info, data)]


def _long_path(dest: Path) -> str:
    return "/".join(["p" * 200] * ((4096 - len(str(dest))) // 201 + 2)) + "/x.png"


#: kind -> builder(dest, outside) -> the hostile members (harmless ones are mixed in around them).
HOSTILE: dict[str, Callable[[Path, Path], list[Member]]] = {
    "symlink chain past PATH_MAX (CVE-2025-4517)": cve_2025_4517_chain,
    "symlink out": lambda dest, out: [member("set/link", tarfile.SYMTYPE, link="../" * 6),
                                      member("set/link/pwned.txt", data=b"x")],
    "absolute symlink": lambda dest, out: [member("set/link", tarfile.SYMTYPE, link=str(out)),
                                           member("set/link/pwned.txt", data=b"x")],
    "symlink inside": lambda dest, out: [member("set/alias.png", tarfile.SYMTYPE, link="train/0.png")],
    "symlink to a folder then a file through it": lambda dest, out: [
        member("set/t", tarfile.SYMTYPE, link="train"), member("set/t/new.png", data=b"x")],
    "hard link out": lambda dest, out: [member("set/hard", tarfile.LNKTYPE, link=str(out / "victim.txt"))],
    "hard link inside": lambda dest, out: [member("set/hard.png", tarfile.LNKTYPE, link="set/train/0.png")],
    "character device": lambda dest, out: [member("set/null", tarfile.CHRTYPE)],
    "block device": lambda dest, out: [member("set/sda", tarfile.BLKTYPE)],
    "fifo": lambda dest, out: [member("set/pipe", tarfile.FIFOTYPE)],
    "GNU sparse file": lambda dest, out: [member("set/train/sparse.png", tarfile.GNUTYPE_SPARSE, data=b"x" * 64)],
    "PAX sparse file": lambda dest, out: pax_sparse("set/train/sparse.png"),
    "contiguous file": lambda dest, out: [member("set/train/contiguous.png", tarfile.CONTTYPE, data=b"x" * 64)],
    "absolute name": lambda dest, out: [member(str(out / "pwned.txt"), data=b"x")],
    "dot-dot": lambda dest, out: [member("set/../../pwned.txt", data=b"x")],
    "dot-dot after normalisation": lambda dest, out: [member("set/a/./../../../pwned.txt", data=b"x")],
    "leading dot-dot": lambda dest, out: [member("../pwned.txt", data=b"x")],
    "name component over NAME_MAX": lambda dest, out: [member("set/" + "n" * 300 + ".png", data=b"x")],
    "path over PATH_MAX": lambda dest, out: [member("set/" + _long_path(dest), data=b"x")],
    "backslash name": lambda dest, out: [member("set\\..\\..\\pwned.txt", data=b"x")],
    "newline in name": lambda dest, out: [member("set/a\nb.png", data=b"x")],
    "control character in name": lambda dest, out: [member("set/\x1b[31mred.png", data=b"x")],
    "duplicate file": lambda dest, out: [member("set/train/0.png", data=b"second copy")],
    "file then folder of the same name": lambda dest, out: [member("set/clash", data=b"x"),
                                                             member("set/clash/inside.png", data=b"x")],
}


@dataclass(frozen=True)
class Variant:
    """Where the hostile members go among the harmless ones, and how the archive is packed."""

    position: int
    compression: str
    format: int


def variant(seed: int, harmless: int) -> Variant:
    rng = random.Random(seed)
    return Variant(rng.randint(0, harmless), rng.choice(COMPRESSIONS), rng.choice(FORMATS))


def harmless(count: int = 4) -> list[Member]:
    """A small dataset-like tree: set/, set/train/, and ``count`` files."""
    return [folder("set"), folder("set/train")] + [member(f"set/train/{i}.png", data=bytes([i]) * 64)
                                                    for i in range(count)]


def build(path: Path, members: list[Member], compression: str = "gz", fmt: int = tarfile.GNU_FORMAT) -> Path:
    mode = f"w:{compression}" if compression else "w"
    with tarfile.open(path, mode, format=fmt) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


def hostile_archive(path: Path, kind: str, seed: int, dest: Path, outside: Path) -> Path:
    """The archive of ``kind``, varied by ``seed``: harmless members with the hostile ones inserted among them."""
    base = harmless()
    chosen = variant(seed, len(base))
    hostile = HOSTILE[kind](dest, outside)
    members = base[:chosen.position] + hostile + base[chosen.position:]
    if kind.startswith(("duplicate", "file then folder")):  # these need the harmless tree before them
        members = base + hostile
    fmt = tarfile.GNU_FORMAT if kind.startswith(("path over", "name component")) else chosen.format
    fmt = tarfile.PAX_FORMAT if kind.startswith("PAX") else fmt
    return build(path, members, chosen.compression, fmt)


#: kind -> (builder(path), what the one-line error must say)
NOT_TAR: dict[str, tuple[Callable[[Path], None], str]] = {
    "zip": (lambda p: _zip(p), "is a zip archive"),
    "html page": (lambda p: p.write_bytes(b"<!DOCTYPE html><html><body>Not found</body></html>\n"), "is a web page"),
    "empty file": (lambda p: p.write_bytes(b""), "is empty"),
    "random bytes": (lambda p: p.write_bytes(random.Random(7).randbytes(3000)), "is not a tar archive"),
    "gzip of a non-tar": (lambda p: _gzip(p, b"just text, not a tar archive\n" * 40), "is not a tar archive"),
    "truncated tar.gz": (lambda p: _truncated(p), "the archive is incomplete or damaged ("),
}


def _zip(path: Path) -> None:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("set/train/0.png", b"x" * 100)


def _gzip(path: Path, data: bytes) -> None:
    import gzip

    path.write_bytes(gzip.compress(data))


def _truncated(path: Path) -> None:
    full = build(path, harmless(40) + [member(f"set/big{i}.bin", data=random.Random(i).randbytes(20000))
                                       for i in range(5)], "gz")
    data = full.read_bytes()
    path.write_bytes(data[: len(data) * 2 // 3])
