"""Downloading the public pix2pix datasets, and extracting archives safely.

The archives come from the pix2pix authors' server over plain HTTP, which
publishes no checksums: pass ``sha256`` to pin one (the digest of every
download is returned so you can). Extraction refuses the whole archive if any
member could write outside the destination (an absolute path, a ``..``
component, a link pointing out, a device file) before anything is written, and
then extracts with tarfile's ``data`` filter where Python has it, as a second guard.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import posixpath
import re
import tarfile
import urllib.error
import urllib.request
import zlib
from pathlib import Path, PurePosixPath
from typing import Callable, Optional

from .errors import DownloadError

BASE_URL = "http://efrosgans.eecs.berkeley.edu/pix2pix/datasets"
DATASETS = ("cityscapes", "edges2handbags", "edges2shoes", "facades", "maps", "night2day")
CHUNK = 1 << 20
TIMEOUT_S = 30
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")

#: ``progress(bytes_done, bytes_total_or_None)``, called after every chunk.
Progress = Callable[[int, Optional[int]], None]


def dataset_url(name: str) -> str:
    """The archive URL of a public pix2pix dataset."""
    if name not in DATASETS:
        raise DownloadError(f"unknown dataset '{name}': known are {', '.join(DATASETS)}; "
                            "for another archive pass --url")
    return f"{BASE_URL}/{name}.tar.gz"


def download_dataset(name: str, dest: Path, *, url: Optional[str] = None, sha256: Optional[str] = None,
                     progress: Optional[Progress] = None) -> tuple[Path, str]:
    """Download ``name`` (or ``url``), check it, extract it into ``dest``; return (dataset folder, SHA-256).

    The archive is kept only while extracting, as a hidden file in ``dest``.
    """
    if not NAME_PATTERN.match(name):
        raise DownloadError(f"invalid dataset name {name!r}: use letters, digits, '_', '.' and '-'")
    url = url or dataset_url(name)
    created = not dest.exists()
    dest.mkdir(parents=True, exist_ok=True)
    archive = dest / f".{name}.download"
    try:
        digest = fetch(url, archive, progress)
        if sha256 is not None and digest != sha256.lower():
            raise DownloadError(f"{url}: SHA-256 mismatch: expected {sha256.lower()}, got {digest}; "
                                "the file is corrupt or not the expected archive")
        folder = safe_extract(archive, dest, source=url)
    finally:
        archive.unlink(missing_ok=True)
        if created and not any(dest.iterdir()):
            dest.rmdir()  # a failed download leaves no trace
    return folder, digest


def fetch(url: str, target: Path, progress: Optional[Progress] = None) -> str:
    """Stream ``url`` into ``target``; return its SHA-256. Network failures become one-line errors."""
    digest = hashlib.sha256()
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response, open(target, "wb") as out:
            length = response.headers.get("Content-Length")
            total = int(length) if length and length.isdigit() else None
            done = 0
            while chunk := response.read(CHUNK):
                out.write(chunk)
                digest.update(chunk)
                done += len(chunk)
                if progress is not None:
                    progress(done, total)
    except urllib.error.HTTPError as exc:
        raise DownloadError(f"{url}: HTTP {exc.code} {exc.reason}") from None
    except urllib.error.URLError as exc:
        raise DownloadError(f"cannot download {url}: {exc.reason}; check the network connection, "
                            "or pass --url to a reachable mirror") from None
    except (OSError, http.client.HTTPException) as exc:
        raise DownloadError(f"cannot download {url}: {type(exc).__name__}: {exc}") from None
    if total is not None and done != total:
        raise DownloadError(f"{url}: download incomplete ({done} of {total} bytes); try again")
    return digest.hexdigest()


def safe_extract(archive: Path, dest: Path, *, source: Optional[str] = None) -> Path:
    """Extract a tar archive (any compression) into ``dest``, refusing unsafe members; return its folder.

    The folder is ``dest/TOP`` when every member lies under one top-level
    folder TOP (as in the pix2pix archives), ``dest`` otherwise. An existing
    ``dest/TOP`` is never overwritten. Errors name ``source`` (default: the archive).
    """
    label = source or str(archive)
    try:
        with tarfile.open(archive) as tar:
            members = tar.getmembers()
            for member in members:
                problem = unsafe(member)
                if problem:
                    raise DownloadError(f"{label}: refusing to extract {member.name!r}: {problem}; "
                                        "the archive may be malicious, nothing was extracted")
            tops = sorted({PurePosixPath(m.name).parts[0] for m in members if PurePosixPath(m.name).parts})
            for top in tops:
                if (dest / top).exists():
                    raise DownloadError(f"{dest / top}: already exists; remove it or choose another --dest")
            if hasattr(tarfile, "data_filter"):
                tar.extractall(dest, members=members, filter="data")
            else:  # Python without extraction filters: the checks above are the guard
                tar.extractall(dest, members=members)
    except (tarfile.TarError, EOFError, OSError, zlib.error) as exc:
        raise DownloadError(f"{label}: cannot extract: {exc}") from None
    return dest / tops[0] if len(tops) == 1 and (dest / tops[0]).is_dir() else dest


def unsafe(member: tarfile.TarInfo) -> Optional[str]:
    """Why ``member`` could escape the destination, or None when it is safe to extract."""
    name = member.name
    if name.startswith(("/", "\\")) or os.path.isabs(name) or re.match(r"^[A-Za-z]:", name):
        return "absolute path"
    if ".." in PurePosixPath(name.replace("\\", "/")).parts:
        return "'..' in its path"
    if member.issym():
        target = posixpath.normpath(posixpath.join(posixpath.dirname(name), member.linkname))
        if member.linkname.startswith("/") or target == ".." or target.startswith("../"):
            return f"symbolic link to {member.linkname!r} points outside the destination"
    elif member.islnk():
        target = posixpath.normpath(member.linkname)
        if member.linkname.startswith("/") or target == ".." or target.startswith("../"):
            return f"hard link to {member.linkname!r} points outside the destination"
    elif not (member.isfile() or member.isdir()):
        return "device, FIFO or other special file"
    return None
