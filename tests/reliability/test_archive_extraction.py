"""Archive extraction is safe on any Python, and downloads are bounded (docs/reliability.md, class 1).

Hostile archives are generated per kind and seed (``hostile_archives.py``) and
served by a real HTTP server on 127.0.0.1 to ``nectargan data download``: each
must be refused with one line, before anything is written, with no file
anywhere outside the destination. The default run takes one seeded variant of
every kind; the slow series takes many. Servers that drip one byte every few
seconds must end at the configured deadline (or the stall limit) with one line.
"""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import sys
import tarfile
import time
from pathlib import Path

import pytest

from fault_locations import one_error_line, run_nectargan
from hostile_archives import HOSTILE, NOT_TAR, build, cve_2025_4517_chain, harmless, hostile_archive, member
from local_servers import DripHandler, RedirectHandler, serve, serve_folder
from support import cli_runner, run_cli
from nectargan_translate.data import DownloadError
from nectargan_translate.data.download import fetch, safe_extract
from nectargan_translate.data_cli import data_group

SEED = int(os.environ.get("NECTARGAN_FAULT_SEED", "20251113"))


def tree(root: Path) -> dict[str, str]:
    """Every path under ``root`` (links not followed) and what it is: the whole observable state."""
    found = {}
    for path in sorted(root.rglob("*")):
        kind = "link" if path.is_symlink() else "dir" if path.is_dir() else f"file:{path.stat().st_size}"
        found[path.relative_to(root).as_posix()] = kind
    return found


def attack(tmp_path: Path, kind: str, seed: int, subprocess: bool = False) -> None:
    """Serve the hostile archive of (kind, seed) and download it: refused, one line, nothing written anywhere."""
    box = tmp_path / "box"  # the escapes aim at box; dest is two levels below it
    dest = box / "datasets" / "dest"
    www = tmp_path / "www"
    www.mkdir()
    box.mkdir()
    hostile_archive(www / "evil.tar", kind, seed, dest, box)
    before = tree(tmp_path)
    with serve_folder(www) as base:
        args = ("data", "download", "evil", "--url", f"{base}/evil.tar", "--dest", dest)
        if subprocess:
            line = one_error_line(run_nectargan(*args))
        else:  # the same command in this process (no interpreter start-up): for the long series
            result = cli_runner().invoke(data_group, [str(a) for a in args[1:]])
            assert isinstance(result.exception, DownloadError), result.output
            line = f"error: {result.exception}"
            assert "\n" not in line
    assert line.startswith(f"error: {base}/evil.tar: refusing to extract "), line
    assert line.endswith("nothing was extracted"), line
    assert tree(tmp_path) == before  # nothing written: no dataset, no temp folder, nothing outside
    assert not (box / "pwned.txt").exists()


@pytest.mark.parametrize("kind", HOSTILE)
def test_hostile_archive_is_refused_before_anything_is_written(tmp_path, kind):
    attack(tmp_path, kind, SEED + sorted(HOSTILE).index(kind))


@pytest.mark.parametrize("kind", ["symlink chain past PATH_MAX (CVE-2025-4517)", "hard link out"])
def test_hostile_archive_through_the_console_script(tmp_path, kind):
    attack(tmp_path, kind, SEED, subprocess=True)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(12))
def test_hostile_archive_series(tmp_path, seed):
    """Every kind again, under other seeds (position among harmless members, compression, tar format)."""
    rng = random.Random(SEED * 100 + seed)
    for kind in rng.sample(sorted(HOSTILE), 6):
        case = tmp_path / f"case-{sorted(HOSTILE).index(kind)}"
        case.mkdir()
        attack(case, kind, rng.randrange(2**32))


def test_the_cve_chain_escapes_the_interpreter_filter_but_not_us(tmp_path):
    """The generator is real: Python's own ``data`` filter lets this archive write outside (on 3.11.7).

    Where the interpreter is patched, its filter refuses it too; ours refuses it either way.
    """
    box = tmp_path / "box"
    dest = box / "datasets" / "dest"
    dest.mkdir(parents=True)
    archive = build(tmp_path / "cve.tar", cve_2025_4517_chain(dest, box), "")
    with pytest.raises(DownloadError, match=r"refusing to extract 'a': it is a symbolic link"):
        safe_extract(archive, dest)
    assert tree(box) == {"datasets": "dir", "datasets/dest": "dir"}
    if not hasattr(tarfile, "data_filter"):
        pytest.skip("this Python has no extraction filters")
    scratch = tmp_path / "scratch"
    shutil.copytree(box, scratch)
    try:
        with tarfile.open(archive) as tar:
            tar.extractall(scratch / "datasets" / "dest", filter="data")
        escaped = (scratch / "pwned.txt").exists()
    except (tarfile.TarError, OSError):
        escaped = False  # a Python with the CVE fixed
    if (3, 11) <= sys.version_info[:2] < (3, 12) and sys.version_info < (3, 11, 13):
        assert escaped, "the generated chain should get past this Python's data filter (CVE-2025-4517)"


def test_a_good_archive_is_extracted_completely_and_exactly(tmp_path):
    members = harmless(6) + [member("set/val/0.png", data=b"v" * 100)]
    archive = build(tmp_path / "good.tar.xz", members, "xz")
    folder = safe_extract(archive, tmp_path / "dest")
    assert folder == tmp_path / "dest" / "set"
    assert tree(tmp_path / "dest") == {"set": "dir", "set/train": "dir", "set/val": "dir",
                                       **{f"set/train/{i}.png": "file:64" for i in range(6)},
                                       "set/val/0.png": "file:100"}
    assert (folder / "train" / "3.png").read_bytes() == bytes([3]) * 64
    assert not any(p.stat().st_mode & 0o7022 for p in (tmp_path / "dest").rglob("*") if p.is_file())


def test_an_archive_without_one_top_folder_goes_into_dest_name(tmp_path):
    archive = build(tmp_path / "flat.tar.gz", [member("train/0.png", data=b"x"), member("val/0.png", data=b"y")])
    folder = safe_extract(archive, tmp_path / "dest", name="mine")
    assert folder == tmp_path / "dest" / "mine"
    assert tree(folder) == {"train": "dir", "train/0.png": "file:1", "val": "dir", "val/0.png": "file:1"}


@pytest.mark.parametrize("kind", NOT_TAR)
def test_files_that_are_not_tar_archives_are_one_line_naming_them(tmp_path, kind):
    make, says = NOT_TAR[kind]
    www = tmp_path / "www"
    www.mkdir()
    make(www / "thing.tar.gz")
    dest = tmp_path / "datasets"
    with serve_folder(www) as base:
        result = run_nectargan("data", "download", "thing", "--url", f"{base}/thing.tar.gz", "--dest", dest)
    line = one_error_line(result)
    assert line.startswith(f"error: {base}/thing.tar.gz: {says}"), line
    assert not dest.exists()


def test_a_local_archive_path_and_a_file_url_work_and_name_the_file(tmp_path):
    archive = build(tmp_path / "local.tar.gz", harmless(2))
    for source in (str(archive), archive.as_uri()):
        dest = tmp_path / f"d{len(source)}"
        result = run_nectargan("data", "download", "set", "--url", source, "--dest", dest)
        assert result.returncode == 0, result.stderr
        assert result.stdout.startswith(f"downloaded set to {dest / 'set'} (sha256 "), result.stdout
        assert (dest / "set" / "train" / "1.png").read_bytes() == bytes([1]) * 64
    NOT_TAR["zip"][0](tmp_path / "x.zip")
    line = one_error_line(run_nectargan("data", "download", "x", "--url", tmp_path / "x.zip", "--dest", tmp_path / "z"))
    assert line.startswith(f"error: {tmp_path / 'x.zip'}: is a zip archive; data download extracts .tar"), line
    line = one_error_line(run_nectargan("data", "download", "x", "--url", tmp_path / "none.tar", "--dest", tmp_path / "z"))
    assert line == f"error: {tmp_path / 'none.tar'}: no such archive file"


def test_a_local_source_that_is_not_a_regular_file_says_what_it_is(tmp_path):
    """A folder, a FIFO or /dev/zero given as --url was 'no such archive file' (issue 13)."""
    folder, fifo = tmp_path / "folder.tar", tmp_path / "pipe.tar"
    folder.mkdir()
    os.mkfifo(fifo)
    for source, what in ((folder, "a folder"), (fifo, "a FIFO"), (Path("/dev/zero"), "a device")):
        line = one_error_line(run_nectargan("data", "download", "x", "--url", source, "--dest", tmp_path / "z"))
        assert line.startswith(f"error: {source}: is {what}, not an archive file; give the path of a .tar"), line
    assert not (tmp_path / "z").exists()


@pytest.mark.skipif(shutil.which("tar") is None, reason="no tar program to make a real sparse archive")
def test_a_real_sparse_archive_is_refused_in_one_line(tmp_path):
    """GNU tar --sparse writes sparse members, which tarfile calls files: refused, not written as their map or 0 bytes."""
    import subprocess

    source = tmp_path / "src" / "set" / "train"
    source.mkdir(parents=True)
    (source / "0.png").write_bytes(b"p" * 64)
    with open(source / "hole.png", "wb") as handle:
        handle.seek(1 << 20)
        handle.write(b"end")
    archives = []
    for fmt in ("gnu", "pax"):
        archive = tmp_path / f"sparse-{fmt}.tar"
        subprocess.run(["tar", "--sparse", f"--format={fmt}", "-cf", str(archive), "-C", str(tmp_path / "src"), "set"],
                       check=True)
        with tarfile.open(archive) as tar:
            if not any(m.sparse is not None or m.type == tarfile.GNUTYPE_SPARSE for m in tar):
                pytest.skip("this file system reports no holes, so tar wrote no sparse member")
        archives.append(archive)
    for archive in archives:
        dest = tmp_path / f"dest-{archive.stem}"
        line = one_error_line(run_nectargan("data", "download", "set", "--url", archive, "--dest", dest))
        assert line == (f"error: {archive}: refusing to extract 'set/train/hole.png': it is a sparse file "
                        "(pack the archive without --sparse); a dataset holds only files and folders; "
                        "nothing was extracted"), line
        assert not dest.exists()


def test_a_checksum_given_by_the_user_is_verified(tmp_path):
    archive = build(tmp_path / "a.tar.gz", harmless(2))
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    ok = run_nectargan("data", "download", "set", "--url", archive, "--dest", tmp_path / "ok", "--sha256", digest)
    assert ok.returncode == 0 and f"(sha256 {digest})" in ok.stdout, ok.stderr
    bad = run_nectargan("data", "download", "set", "--url", archive, "--dest", tmp_path / "bad", "--sha256", "1" * 64)
    assert one_error_line(bad).startswith(f"error: {archive}: SHA-256 mismatch: expected {'1' * 64}, got {digest}")
    assert not (tmp_path / "bad").exists()


def test_plain_http_to_another_machine_without_a_checksum_is_warned_about(tmp_path):
    """192.0.2.1 (TEST-NET-1) is never reachable: the download fails in one line, after the warning."""
    result = run_nectargan("data", "download", "x", "--url", "http://192.0.2.1/x.tar.gz", "--dest", tmp_path / "d",
                           "--deadline", "2", timeout=60)
    one_error_line(result)
    assert result.stderr.splitlines()[0] == ("warning: http://192.0.2.1/x.tar.gz is plain HTTP and no --sha256 is "
                                             "given: nothing proves the archive was not changed on the way")
    archive = build(tmp_path / "a.tar.gz", harmless(1))
    www = tmp_path / "www"
    www.mkdir()
    shutil.copy(archive, www)
    with serve_folder(www) as base:  # loopback: nothing lies on the way, no warning
        quiet = run_nectargan("data", "download", "set", "--url", f"{base}/a.tar.gz", "--dest", tmp_path / "d1")
    assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr


# -- deadlines ---------------------------------------------------------------------------------
@pytest.mark.parametrize("where", ["body", "headers"])
def test_a_server_dripping_bytes_is_stopped_at_the_deadline(tmp_path, where):
    """One byte every 2 s never lets a read time out; a 3 s deadline ends it with one line, leaving nothing."""
    dest = tmp_path / "datasets"
    with serve(DripHandler, interval=2.0) as base:
        started = time.monotonic()
        result = run_nectargan("data", "download", "slow", "--url", f"{base}/{where}", "--dest", dest,
                               "--deadline", "3", timeout=60)
        took = time.monotonic() - started
    line = one_error_line(result)
    assert line == (f"error: {base}/{where}: download took longer than the deadline of 3 s; raise it with "
                    "--deadline SECONDS, or try again later")
    assert took < 20, took  # start-up of the CLI plus the deadline, not the 2000 s the server would take
    assert not dest.exists()


@pytest.mark.parametrize("path, reason", [
    ("loop", "HTTP 302 The HTTP server returned a redirect error that would lead to an infinite loop. The last "
             "30x error message was: Found"),
    ("file", "HTTP 302 Found - Redirection to url 'file:///etc/passwd' is not allowed"),
])
def test_a_redirect_loop_or_a_redirect_to_a_file_is_one_line(tmp_path, path, reason):
    with serve(RedirectHandler) as base:
        done = run_cli("data", "download", "facades", "--url", f"{base}/{path}", "--dest", str(tmp_path / "d"))
    assert done.returncode == 1 and done.stderr == f"error: {base}/{path}: {reason}\n", done.stderr
    assert not (tmp_path / "d").exists()


def test_a_stalled_download_ends_without_waiting_for_the_deadline(tmp_path):
    with serve(DripHandler, interval=0.5, length=40) as base:  # 20 s in all: the test ends even when broken
        started = time.monotonic()
        with pytest.raises(DownloadError) as info:
            fetch(f"{base}/body", tmp_path / "x", deadline=600, stall_s=2, stall_bytes=64)
        took = time.monotonic() - started
    assert str(info.value) == (f"{base}/body: download stalled: less than 64 bytes received in the last 2 s; "
                               "try again later or use a mirror with --url")
    assert took < 6, took
