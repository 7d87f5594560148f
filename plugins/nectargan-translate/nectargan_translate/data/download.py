"""Downloading the public pix2pix datasets, and extracting tar archives safely on any Python.

The archives come from the pix2pix authors' server over HTTPS. The server
publishes no checksums, and none can be pinned here without downloading them,
so pass ``sha256`` to pin one (the digest of every download is returned).

A download is bounded: an overall deadline, and a stall limit (less than
``STALL_BYTES`` received in ``STALL_S`` seconds), each ending it with one line.

Extraction never relies on the interpreter's ``tarfile`` filters (CVE-2025-4517
got past Python 3.11.7's ``data`` filter with a chain of symbolic links). A
dataset needs nothing but plain files and folders, so every member is checked
before anything is written, and the whole archive is refused if one member is
a link, a device, a FIFO, has an absolute name, a ``..`` component, a name that
leaves the destination once normalised, a control character, a backslash, or a
name longer than the file system allows. The members are then written by
this module (never through a link: none exists), into a temp folder beside the
destination that is renamed into place only when complete: a killed download
or extraction leaves no partial dataset, and the next run cleans up after it.
"""

from __future__ import annotations

import bz2
import gzip
import hashlib
import http.client
import ipaddress
import lzma
import os
import posixpath
import re
import shutil
import stat
import socket
import tarfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Callable, Optional

from nectargan_core import commit_folder, describe_os_error, file_kind, output_taken, staging

from .errors import DownloadError

BASE_URL = "https://efrosgans.eecs.berkeley.edu/pix2pix/datasets"
DATASETS = ("cityscapes", "edges2handbags", "edges2shoes", "facades", "maps", "night2day")
CHUNK = 1 << 20
#: Seconds to connect, and the longest a single read may wait for data.
TIMEOUT_S = 30
#: The default overall deadline of a download: edges2handbags (8 GB) at 400 kB/s.
DEADLINE_S = 6 * 3600
#: A download that receives less than STALL_BYTES in any STALL_S seconds is stalled.
STALL_S, STALL_BYTES = 60.0, 16 * 1024
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
TAR_SUFFIXES = ".tar, .tar.gz, .tgz, .tar.bz2 or .tar.xz"
CONTROL = re.compile(r"[\x00-\x1f\x7f]")

#: ``progress(bytes_done, bytes_total_or_None)``, called after every chunk.
Progress = Callable[[int, Optional[int]], None]


def dataset_url(name: str) -> str:
    """The archive URL of a public pix2pix dataset."""
    if name not in DATASETS:
        raise DownloadError(f"unknown dataset '{name}': known are {', '.join(DATASETS)}; "
                            "for another archive pass --url")
    return f"{BASE_URL}/{name}.tar.gz"


def plain_http(url: str) -> bool:
    """Whether ``url`` is unencrypted HTTP to another machine (its contents could be changed on the way)."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme != "http":
        return False
    host = parts.hostname or ""
    try:
        return not ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host != "localhost"


def download_dataset(name: str, dest: Path, *, url: Optional[str] = None, sha256: Optional[str] = None,
                     deadline: float = DEADLINE_S, progress: Optional[Progress] = None) -> tuple[Path, str]:
    """Download ``name`` (or ``url``: http(s), file://, or a local path), check it, extract it into ``dest``.

    Returns (dataset folder, SHA-256 of the archive). The archive is kept only
    while extracting, in a temp folder in ``dest``.
    """
    if not NAME_PATTERN.match(name):
        raise DownloadError(f"invalid dataset name {name!r}: use letters, digits, '_', '.' and '-'")
    source = url or dataset_url(name)
    if output_taken(dest / name):
        raise DownloadError(f"{dest / name}: already exists; remove it or choose another --dest")
    created = [folder for folder in (dest, *dest.parents) if not folder.exists()]  # removed again on failure
    try:
        dest.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DownloadError(f"--dest {dest}: cannot create it: {describe_os_error(exc, with_file=False) or exc}") \
            from None
    try:
        with staging(dest / f"{name}.download") as stage:
            local = local_archive(source)
            if local is not None:
                archive, digest = local, _sha256_of(local, source)
            else:
                archive = stage / "archive"
                digest = fetch(source, archive, progress, deadline=deadline)
            if sha256 is not None and digest != sha256.lower():
                raise DownloadError(f"{source}: SHA-256 mismatch: expected {sha256.lower()}, got {digest}; "
                                    "the file is corrupt or not the expected archive")
            folder = safe_extract(archive, dest, source=source, name=name)
    except OSError as exc:  # the temp folder in dest could not be made, or the archive not saved
        problem = describe_os_error(exc, with_file=False)
        if problem is None:
            raise
        raise DownloadError(f"--dest {dest}: cannot save the download: {problem}") from None
    finally:
        for made in created:  # a failed download leaves no trace
            if made.is_dir() and not any(made.iterdir()):
                made.rmdir()
    return folder, digest


def local_archive(source: str) -> Optional[Path]:
    """The file a ``file://`` URL or a plain path names; None for a network URL."""
    parts = urllib.parse.urlsplit(source)
    if parts.scheme in ("http", "https"):
        return None
    if parts.scheme == "file":
        path = Path(urllib.request.url2pathname(parts.path))
    elif parts.scheme and len(parts.scheme) > 1:  # not a Windows drive letter
        raise DownloadError(f"{source}: unsupported URL scheme '{parts.scheme}'; use https://, http://, "
                            "file:// or a local path")
    else:
        path = Path(source)
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise DownloadError(f"{path}: no such archive file") from None
    except OSError as exc:
        raise DownloadError(f"{path}: cannot be read: {exc.strerror or exc}") from None
    if not stat.S_ISREG(mode):
        raise DownloadError(f"{path}: is {file_kind(mode)}, not an archive file; give the path of a .tar, .tar.gz, .tar.bz2 "
                            "or .tar.xz file")
    return path


def _sha256_of(path: Path, label: str) -> str:
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as handle:
            while block := handle.read(CHUNK):
                digest.update(block)
    except OSError as exc:
        raise DownloadError(f"{label}: cannot read: {exc.strerror or exc}") from None
    return digest.hexdigest()


# -- fetching -----------------------------------------------------------------------------------
class Watchdog:
    """Ends a download that passes its deadline or stalls, by shutting its sockets down from a thread.

    A socket timeout alone cannot: a server that sends a byte every 20 s never
    lets one read time out. Shutting the socket down wakes the blocked read
    (during the response headers as well as the body).
    """

    def __init__(self, deadline: float, stall_s: float = STALL_S, stall_bytes: int = STALL_BYTES) -> None:
        self.deadline, self.stall_s, self.stall_bytes = deadline, stall_s, stall_bytes
        self.received = 0
        self.reason: Optional[str] = None
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="nectargan-download-watchdog", daemon=True)

    def __enter__(self) -> "Watchdog":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()

    def add(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.append(sock)
            if self.reason is not None:
                self._shut(sock)

    def _watch(self) -> None:
        start = time.monotonic()
        window_start, window_bytes = start, 0
        tick = min(1.0, self.deadline / 4, self.stall_s / 4)
        while not self._done.wait(tick):
            now = time.monotonic()
            if now - start >= self.deadline:
                self._expire(f"took longer than the deadline of {self.deadline:g} s; "
                             "raise it with --deadline SECONDS, or try again later")
                return
            if now - window_start >= self.stall_s:
                if self.received - window_bytes < self.stall_bytes:
                    amount = (f"{self.stall_bytes // 1024} KiB" if self.stall_bytes % 1024 == 0
                              else f"{self.stall_bytes} bytes")
                    self._expire(f"stalled: less than {amount} received in the last {self.stall_s:g} s; "
                                 "try again later or use a mirror with --url")
                    return
                window_start, window_bytes = now, self.received

    def _expire(self, reason: str) -> None:
        with self._lock:
            self.reason = reason
            for sock in self._sockets:
                self._shut(sock)

    @staticmethod
    def _shut(sock: socket.socket) -> None:
        try:
            socket.socket.shutdown(sock, socket.SHUT_RDWR)  # the plain socket's, also under TLS
        except OSError:
            pass


def _opener(watchdog: Watchdog) -> urllib.request.OpenerDirector:
    """urllib (proxies and redirects included) with every connection it opens handed to ``watchdog``."""

    class WatchedHTTP(http.client.HTTPConnection):
        def connect(self) -> None:
            super().connect()
            watchdog.add(self.sock)

    class WatchedHTTPS(http.client.HTTPSConnection):
        def connect(self) -> None:
            super().connect()
            watchdog.add(self.sock)

    class HTTPHandler(urllib.request.HTTPHandler):
        def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
            return self.do_open(WatchedHTTP, req)

    class HTTPSHandler(urllib.request.HTTPSHandler):
        def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
            return self.do_open(WatchedHTTPS, req, context=self._context)

    return urllib.request.build_opener(HTTPHandler, HTTPSHandler)


def fetch(url: str, target: Path, progress: Optional[Progress] = None, *, deadline: float = DEADLINE_S,
          stall_s: float = STALL_S, stall_bytes: int = STALL_BYTES) -> str:
    """Stream ``url`` into ``target`` within ``deadline`` seconds; return its SHA-256.

    Network failures, a deadline passed, a stall and a short download become one-line errors.
    """
    digest = hashlib.sha256()
    done, total = 0, None
    with Watchdog(deadline, stall_s, stall_bytes) as watchdog:
        try:
            with _opener(watchdog).open(url, timeout=min(TIMEOUT_S, deadline)) as response, \
                    open(target, "wb") as out:
                final = response.geturl()
                if urllib.parse.urlsplit(url).scheme == "https" and urllib.parse.urlsplit(final).scheme != "https":
                    raise DownloadError(f"{url}: redirected to unencrypted {final}; refused")
                length = response.headers.get("Content-Length")
                total = int(length) if length and length.isdigit() else None
                while chunk := response.read1(CHUNK):
                    out.write(chunk)
                    digest.update(chunk)
                    done += len(chunk)
                    watchdog.received = done
                    if progress is not None:
                        progress(done, total)
        except DownloadError:
            raise
        except urllib.error.HTTPError as exc:
            reason = " ".join(str(exc.reason).split())  # urllib's redirect-loop reason spans three lines
            raise DownloadError(f"{url}: HTTP {exc.code} {reason}") from None
        except (OSError, http.client.HTTPException, ValueError) as exc:
            if watchdog.reason is not None:
                raise DownloadError(f"{url}: download {watchdog.reason}") from None
            if describe_os_error(exc) is not None and not isinstance(exc, urllib.error.URLError):
                raise  # writing the archive failed (full or read-only disk): the caller names the folder
            if isinstance(exc, http.client.IncompleteRead):  # a chunked body that ended early
                raise DownloadError(f"{url}: download incomplete (the connection closed before the end of the "
                                    "data); try again") from None
            reason = exc.reason if isinstance(exc, urllib.error.URLError) else f"{type(exc).__name__}: {exc}"
            reason = " ".join(str(reason).split())  # a server's bad status line may hold CR LF
            raise DownloadError(f"cannot download {url}: {reason}; check the network connection, "
                                "or pass --url to a reachable mirror") from None
    if watchdog.reason is not None and (total is None or done != total):
        raise DownloadError(f"{url}: download {watchdog.reason}")
    if total is not None and done != total:
        raise DownloadError(f"{url}: download incomplete ({done} of {total} bytes); try again")
    return digest.hexdigest()


# -- extracting ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Entry:
    """A member that passed every check: its normalised relative name, and whether it is a folder."""

    member: tarfile.TarInfo
    name: str
    is_dir: bool


def _existing(path: Path) -> Path:
    """``path`` or its nearest existing ancestor (what a folder about to be created will live on)."""
    return next((p for p in (path, *path.parents) if p.exists()), Path("."))


def _limits(dest: Path) -> tuple[int, int]:
    """(longest file name, longest path) on the file system of ``dest``, in bytes."""
    try:
        return os.pathconf(_existing(dest), "PC_NAME_MAX"), os.pathconf(_existing(dest), "PC_PATH_MAX")
    except (OSError, ValueError, AttributeError):  # pragma: no cover - platforms without pathconf
        return 255, 4096


#: The only member types a dataset archive holds: regular files (the old and the POSIX code) and folders.
#: ``TarInfo.isfile()`` is also true of GNU sparse and contiguous files, which are not extracted as plain bytes.
PLAIN_TYPES = frozenset({tarfile.REGTYPE, tarfile.AREGTYPE, tarfile.DIRTYPE})


def _kind(member: tarfile.TarInfo) -> str:
    if member.type == tarfile.GNUTYPE_SPARSE or member.sparse is not None:
        return "a sparse file (pack the archive without --sparse)"
    if member.type == tarfile.CONTTYPE:
        return "a contiguous file"
    if member.issym():
        return f"a symbolic link (to {member.linkname!r})"
    if member.islnk():
        return f"a hard link (to {member.linkname!r})"
    if member.ischr() or member.isblk():
        return "a device file"
    if member.isfifo():
        return "a FIFO"
    return f"a member of tar type {member.type!r}"


def member_problem(member: tarfile.TarInfo, name_max: int = 255, path_max: int = 4096,
                   base: int = 0) -> Optional[str]:
    """Why ``member`` may not be extracted, or None when it is a plain file or folder safely inside.

    ``base``: the length in bytes of the folder it is extracted into (with the separator).
    """
    if member.type not in PLAIN_TYPES or member.sparse is not None:
        return f"it is {_kind(member)}; a dataset holds only files and folders"
    raw = member.name
    if not raw:
        return "empty name"
    if CONTROL.search(raw):
        return "a control character in its name"
    if "\\" in raw:
        return "a backslash in its name"
    if raw.startswith("/") or re.match(r"^[A-Za-z]:", raw):
        return "absolute path"
    if ".." in raw.split("/"):
        return "'..' in its path"
    normal = posixpath.normpath(raw)
    if normal.startswith(("/", "..")):
        return "its name leaves the destination once normalised"
    encoded = [os.fsencode(part) for part in normal.split("/")]
    if any(len(part) > name_max for part in encoded):
        return f"a name longer than {name_max} bytes"
    if base + len(os.fsencode(normal)) >= path_max:
        return f"its path would be longer than {path_max} bytes"
    return None


def plan_extraction(tar: tarfile.TarFile, dest: Path, label: str) -> list[Entry]:
    """Every member checked (see :func:`member_problem`, plus duplicates and file/folder clashes); nothing written."""
    name_max, path_max = _limits(dest)
    base = len(os.fsencode(str(dest.absolute()))) + 64  # the temp folder's name and one top-level folder
    entries: list[Entry] = []
    files: set[str] = set()
    folders: set[str] = set()
    for member in tar:
        problem = member_problem(member, name_max, path_max, base)
        normal = posixpath.normpath(member.name) if problem is None else ""
        if problem is None and normal == "." and not member.isdir():
            problem = "a file without a name"
        if problem is None and normal != ".":
            parents = {"/".join(normal.split("/")[:i]) for i in range(1, normal.count("/") + 1)}
            if normal in files or (member.isfile() and normal in folders):
                problem = "it appears twice (or as both a file and a folder)"
            elif parents & files:
                problem = "a folder of its path is also a file"
            folders.update(parents)
            (folders if member.isdir() else files).add(normal)
        if problem is not None:
            raise DownloadError(f"{label}: refusing to extract {member.name!r}: {problem}; "
                                "nothing was extracted")
        if normal != ".":
            entries.append(Entry(member, normal, member.isdir()))
    if all(entry.is_dir for entry in entries):  # nothing, or folders alone: no dataset
        raise DownloadError(f"{label}: the archive holds no files; nothing was extracted: check the URL or file")
    return entries


def check_whole(tar: tarfile.TarFile, label: str) -> None:
    """Refuse an archive that is not whole, after :func:`plan_extraction` read every member header.

    Python's tarfile stops without a word where the archive ends early (a
    download cut short, a server that sent no Content-Length) and where a
    member header in the middle is damaged, so a part of the dataset would be
    extracted as if it were all. What follows the last member must be the
    end-of-archive marker (two zero blocks), and the compressed stream is read
    to its end, where gzip, bzip2 and xz check their CRC and length.
    """
    stream = tar.fileobj
    assert stream is not None
    try:
        stream.seek(tar.offset)
        marker = stream.read(2 * tarfile.BLOCKSIZE)
        if marker.strip(b"\0"):
            raise DownloadError(f"{label}: the archive is damaged: the member header at byte {tar.offset} is not "
                                "valid, so the members after it cannot be read; nothing was extracted: download it "
                                "again")
        if len(marker) < 2 * tarfile.BLOCKSIZE:
            raise DownloadError(f"{label}: the archive is incomplete: it ends after {len(tar.getmembers())} "
                                "member(s) without the end-of-archive marker (cut short); nothing was extracted: "
                                "download it again")
        while stream.read(CHUNK):  # to the end of the compressed data: its trailer and CRC are checked there
            pass
    except (EOFError, OSError, zlib.error, lzma.LZMAError) as exc:
        raise DownloadError(f"{label}: the archive is incomplete or damaged ({type(exc).__name__}: {exc}); nothing "
                            "was extracted: download it again") from None


def _tar_checksum_fits(block: bytes) -> bool:
    """Whether a 512-byte block is a tar header by its checksum (old tars have no ``ustar`` magic)."""
    if len(block) < tarfile.BLOCKSIZE:
        return False
    try:
        stored = int(block[148:156].replace(b"\0", b" ").strip() or b"-1", 8)
    except ValueError:
        return False
    unsigned = sum(block[:148]) + 8 * 32 + sum(block[156:512])
    return stored == unsigned


def not_a_tar(path: Path, label: str) -> DownloadError:
    """The one-line error for a file that is not a tar archive, saying what it looks like."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(512)
    except OSError:
        head = b""
    # a compressed archive cut early enough is not recognised as a tar at all
    compressed = next((kind for magic, kind in ((b"\x1f\x8b", "gzip"), (b"BZh", "bzip2"), (b"\xfd7zXZ\x00", "xz"))
                       if head.startswith(magic)), None)
    if compressed is not None:
        opener = {"gzip": gzip.open, "bzip2": bz2.open, "xz": lzma.open}[compressed]
        try:
            with opener(path, "rb") as stream:
                while stream.read(CHUNK):
                    pass
        except (EOFError, OSError, zlib.error, lzma.LZMAError):
            return DownloadError(f"{label}: is {compressed} data cut short or damaged; nothing was extracted: "
                                 "download it again")
        try:
            with opener(path, "rb") as stream:
                inner = stream.read(tarfile.BLOCKSIZE)
        except (EOFError, OSError, zlib.error, lzma.LZMAError):
            inner = b""
        if inner[257:262] == b"ustar" or _tar_checksum_fits(inner):  # whole compression of a tar cut short
            return DownloadError(f"{label}: is a tar archive cut short or damaged at its start ({compressed}); "
                                 "nothing was extracted: download it again")
        what, hint = f"is not a tar archive (it is {compressed} data of something else)", ""
        return DownloadError(f"{label}: {what}; data download extracts {TAR_SUFFIXES} files{hint}")
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06", b"PK\x07\x08")):
        what, hint = "is a zip archive", ": unzip it yourself, or repack it as a .tar.gz"
    elif head.lstrip()[:1] == b"<":
        what, hint = "is a web page (HTML or XML), not an archive", ": check the URL"
    elif not head:
        return DownloadError(f"{label}: is empty (0 bytes); nothing was extracted: download it again, or check the "
                             "URL")
    elif head[257:262] == b"ustar" or _tar_checksum_fits(head):  # a tar whose first header is cut or damaged
        return DownloadError(f"{label}: is a tar archive cut short or damaged at its start; nothing was extracted: "
                             "download it again")
    else:
        what, hint = "is not a tar archive", ""
    return DownloadError(f"{label}: {what}; data download extracts {TAR_SUFFIXES} files{hint}")


def safe_extract(archive: Path, dest: Path, *, source: Optional[str] = None, name: Optional[str] = None) -> Path:
    """Extract a tar archive (any compression) into ``dest``, refusing unsafe members; return its folder.

    The folder is ``dest/TOP`` when every member lies under one top-level
    folder TOP (as in the pix2pix archives), ``dest/NAME`` otherwise (NAME:
    ``name``, else the archive's name without its suffixes). It appears only
    when complete, and an existing non-empty one is never overwritten.
    Errors name ``source`` (default: the archive).
    """
    label = source or str(archive)
    try:
        tar = tarfile.open(archive)
    except tarfile.ReadError:
        raise not_a_tar(archive, label) from None
    except (tarfile.TarError, EOFError, OSError, zlib.error, lzma.LZMAError) as exc:
        raise DownloadError(f"{label}: the archive is incomplete or damaged ({' '.join(str(exc).split())}); "
                            "nothing was extracted: download it again") from None
    with tar:
        try:
            entries = plan_extraction(tar, dest, label)
        except (tarfile.TarError, EOFError, OSError, zlib.error, lzma.LZMAError, ValueError, OverflowError) as exc:
            # ValueError/OverflowError: a member size no file can have (base-256 or pax) seeks past any offset
            raise DownloadError(f"{label}: the archive is incomplete or damaged ({' '.join(str(exc).split())}); "
                                "nothing was extracted: download it again") from None
        check_whole(tar, label)
        tops = {entry.name.split("/")[0] for entry in entries}
        top = next(iter(tops))
        single = len(tops) == 1 and any(e.name == top and e.is_dir or e.name.startswith(top + "/") for e in entries)
        folder = dest / top if single else dest / (name or archive.name.split(".")[0])
        if output_taken(folder):
            raise DownloadError(f"{folder}: already exists; remove it or choose another --dest")
        needed = sum(entry.member.size for entry in entries)
        free = shutil.disk_usage(_existing(dest)).free
        if needed > free:
            raise DownloadError(f"{dest}: the archive holds {_amount(needed)}, only {_amount(free)} are free there; "
                                "free disk space or choose another --dest")
        try:
            with staging(folder) as stage:
                for entry in entries:
                    _write(tar, entry, stage)
                commit_folder(stage / top if single else stage, folder)
        except (tarfile.TarError, EOFError, zlib.error, lzma.LZMAError) as exc:
            raise DownloadError(f"{label}: the archive is incomplete or damaged ({' '.join(str(exc).split())}); "
                                "nothing was extracted: download it again") from None
        except OSError as exc:
            raise DownloadError(f"{label}: cannot extract into {dest}: {describe_os_error(exc, with_file=False) or exc} "
                                "(nothing was extracted)") from None
    return folder


def _amount(size: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} bytes"


def _write(tar: tarfile.TarFile, entry: Entry, stage: Path) -> None:
    """Create one checked member under ``stage``: folders and new regular files only, never through a link."""
    target = stage / entry.name
    if entry.is_dir:
        target.mkdir(mode=0o755, parents=True, exist_ok=True)
        return
    target.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
    source: Optional[IO[bytes]] = tar.extractfile(entry.member)
    if source is None:  # pragma: no cover - isfile() members always have data
        raise DownloadError(f"{entry.name}: no data in the archive")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    with source, os.fdopen(os.open(target, flags, 0o644), "wb") as out:
        shutil.copyfileobj(source, out, CHUNK)
    mtime = entry.member.mtime
    if isinstance(mtime, (int, float)) and 0 <= mtime < 2**33:
        os.utime(target, (mtime, mtime))
