"""``nectargan data download`` against a server on 127.0.0.1: success, checksums, offline, unsafe archives."""

from __future__ import annotations

import functools
import hashlib
import http.server
import io
import socket
import tarfile
import threading
from pathlib import Path

import pytest

from nectargan_translate.data import DownloadError
from nectargan_translate.data.download import dataset_url, download_dataset, safe_extract
from nectargan_translate.data_cli import data_group
from data_helpers import aligned_dataset, run_data_cli
from support import cli_runner


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - the base class's signature
        pass


@pytest.fixture
def served(tmp_path):
    """A folder served over HTTP on a free loopback port; yields (folder, base URL)."""
    folder = tmp_path / "www"
    folder.mkdir()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(QuietHandler, directory=folder))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield folder, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join()


def make_archive(path: Path, source: Path, arcname: str) -> str:
    with tarfile.open(path, "w:gz") as tar:
        tar.add(source, arcname=arcname)
    return hashlib.sha256(path.read_bytes()).hexdigest()


def everything(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*"))


def test_known_names_use_the_pix2pix_server():
    assert dataset_url("facades") == "https://efrosgans.eecs.berkeley.edu/pix2pix/datasets/facades.tar.gz"
    with pytest.raises(DownloadError, match="unknown dataset 'faces': known are cityscapes, edges2handbags"):
        dataset_url("faces")


def test_download_checks_the_checksum_and_extracts(served, tmp_path):
    folder, base = served
    source = aligned_dataset(tmp_path / "src", {"train": 2, "val": 1}, size=8)
    digest = make_archive(folder / "facades.tar.gz", source, "facades")
    dest = tmp_path / "datasets"
    result = cli_runner().invoke(data_group, ["download", "facades", "--url", f"{base}/facades.tar.gz",
                                             "--dest", str(dest), "--sha256", digest.upper()])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == (f"downloaded facades to {dest / 'facades'} (sha256 {digest}); "
                                     f"check it with: nectargan data check {dest / 'facades'}")
    assert everything(dest) == ["facades", "facades/train", "facades/train/000.png", "facades/train/001.png",
                                "facades/val", "facades/val/000.png"]
    assert (dest / "facades" / "train" / "001.png").read_bytes() == (source / "train" / "001.png").read_bytes()
    again = cli_runner().invoke(data_group, ["download", "facades", "--url", f"{base}/facades.tar.gz",
                                            "--dest", str(dest)])
    assert str(again.exception) == f"{dest / 'facades'}: already exists; remove it or choose another --dest"


def test_checksum_mismatch_leaves_nothing(served, tmp_path):
    folder, base = served
    make_archive(folder / "maps.tar.gz", aligned_dataset(tmp_path / "src", {"train": 1}, size=8), "maps")
    dest = tmp_path / "datasets"
    with pytest.raises(DownloadError) as info:
        download_dataset("maps", dest, url=f"{base}/maps.tar.gz", sha256="0" * 64)
    assert str(info.value).startswith(f"{base}/maps.tar.gz: SHA-256 mismatch: expected {'0' * 64}, got ")
    assert not dest.exists()


def test_offline_and_missing_files_are_one_line_errors(served, tmp_path):
    _, base = served
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    url = f"http://127.0.0.1:{closed}/facades.tar.gz"
    dest = tmp_path / "datasets"
    with pytest.raises(DownloadError) as info:
        download_dataset("facades", dest, url=url)
    assert str(info.value).startswith(f"cannot download {url}: ") and "\n" not in str(info.value)
    assert "refused" in str(info.value).lower()
    with pytest.raises(DownloadError, match=r"/nothing.tar.gz: HTTP 404"):
        download_dataset("nothing", dest, url=f"{base}/nothing.tar.gz")
    assert not dest.exists()


def test_offline_through_the_console_script(tmp_path):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    result = run_data_cli("download", "facades", "--url", f"http://127.0.0.1:{closed}/f.tar.gz", "--dest", tmp_path / "d")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.startswith(f"error: cannot download http://127.0.0.1:{closed}/f.tar.gz: ")
    assert len(result.stderr.strip().splitlines()) == 1


def tar_with(path: Path, *members: tuple[tarfile.TarInfo, bytes]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for info, data in members:
            info.size = len(data) if info.isfile() else 0
            tar.addfile(info, io.BytesIO(data) if info.isfile() else None)
    return path


def entry(name: str, kind: bytes = tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, link
    return info


BENIGN = (entry("evil/ok.txt"), b"fine")
MALICIOUS = {
    "absolute path": (entry("/tmp/nectargan-pwned.txt"), b"x"),
    "dot-dot": (entry("evil/../../escaped.txt"), b"x"),
    "symlink out": (entry("evil/link", tarfile.SYMTYPE, "../../outside"), b""),
    "absolute symlink": (entry("evil/link", tarfile.SYMTYPE, "/etc/passwd"), b""),
    "hardlink out": (entry("evil/hard", tarfile.LNKTYPE, "../outside.txt"), b""),
    "device": (entry("evil/dev", tarfile.CHRTYPE), b""),
}


@pytest.mark.parametrize("case", MALICIOUS)
def test_unsafe_archives_are_refused_before_anything_is_written(tmp_path, case):
    archive = tar_with(tmp_path / "evil.tar.gz", BENIGN, MALICIOUS[case])
    dest = tmp_path / "box" / "dest"
    dest.mkdir(parents=True)
    with pytest.raises(DownloadError) as info:
        safe_extract(archive, dest)
    assert f"refusing to extract {MALICIOUS[case][0].name!r}" in str(info.value)
    assert everything(tmp_path / "box") == ["dest"]
    assert not Path("/tmp/nectargan-pwned.txt").exists()


def test_malicious_download_is_refused_and_cleaned_up(served, tmp_path):
    folder, base = served
    tar_with(folder / "evil.tar.gz", BENIGN, MALICIOUS["dot-dot"])
    dest = tmp_path / "box" / "dest"
    result = cli_runner().invoke(data_group, ["download", "evil", "--url", f"{base}/evil.tar.gz",
                                             "--dest", str(dest)])
    assert isinstance(result.exception, DownloadError)
    assert str(result.exception).startswith(f"{base}/evil.tar.gz: refusing to extract 'evil/../../escaped.txt'")
    assert everything(tmp_path / "box") == []


def test_even_links_inside_the_archive_are_refused(tmp_path):
    """A dataset needs no links; refusing them all closes the link-chain class (CVE-2025-4517) for good."""
    for link in ((entry("evil/alias", tarfile.SYMTYPE, "ok.txt"), b""), (entry("evil/copy", tarfile.LNKTYPE, "evil/ok.txt"), b"")):
        archive = tar_with(tmp_path / "ok.tar.gz", BENIGN, link)
        with pytest.raises(DownloadError, match=r"refusing to extract 'evil/(alias|copy)': it is a (symbolic|hard) link"):
            safe_extract(archive, tmp_path / "dest")
        assert not (tmp_path / "dest").exists() or everything(tmp_path / "dest") == []


def test_corrupt_archive(tmp_path):
    bad = tmp_path / "bad.tar.gz"
    bad.write_bytes(b"\x1f\x8b not really gzip")
    with pytest.raises(DownloadError, match=r"bad.tar.gz: is gzip data cut short or damaged; nothing was extracted"):
        safe_extract(bad, tmp_path / "dest")
