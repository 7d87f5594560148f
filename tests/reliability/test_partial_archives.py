"""Partial archives (issue 25, class 1): ``data download`` extracted an archive that ends early (no end-of-archive
blocks, a member header damaged in the middle, a compressed stream cut short or with a wrong CRC, an HTTP body cut
without a Content-Length) and exited 0 with part of the dataset. A download proves it is whole or fails in one line
and leaves nothing."""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import os
import random
import tarfile

import pytest

from local_servers import CutShortHandler, serve
from support import run_cli

FILES = 6


def whole_tar() -> bytes:
    buffer = io.BytesIO()
    rng = random.Random(7)
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for i in range(FILES):
            data = bytes(rng.getrandbits(8) for _ in range(1500 + 300 * i))
            info = tarfile.TarInfo(f"set/train/{i}.png")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def member_offset(raw: bytes, index: int) -> int:
    return tarfile.open(fileobj=io.BytesIO(raw)).getmembers()[index].offset


def damaged() -> dict[str, tuple[str, bytes, str]]:
    """name -> (file name, bytes, what the error line says)"""
    raw = whole_tar()
    third = member_offset(raw, 3)
    header = bytearray(raw)
    header[third + 148:third + 150] = b"99"  # its checksum field: tarfile stops here without a word
    gz, xz, bz = gzip.compress(raw), lzma.compress(raw), bz2.compress(raw)
    crc = bytearray(gz)
    crc[-8] ^= 0xFF
    end = len(raw) - 2 * tarfile.BLOCKSIZE
    while not raw[end - tarfile.BLOCKSIZE:end].strip(b"\0"):  # the end of the last member's data
        end -= tarfile.BLOCKSIZE
    incomplete = "the archive is incomplete"
    return {
        "cut at a member boundary": ("a.tar", raw[:third], f"{incomplete}: it ends after 3 member(s) without the "
                                                           "end-of-archive marker (cut short)"),
        "cut after the last member": ("b.tar", raw[:end], f"{incomplete}: it ends after {FILES} member(s) without "
                                                          "the end-of-archive marker (cut short)"),
        "one end block of two": ("c.tar", raw[:end + tarfile.BLOCKSIZE], f"{incomplete}: it ends after {FILES} "
                                                                         "member(s) without the end-of-archive marker"),
        "damaged header": ("d.tar", bytes(header), f"the archive is damaged: the member header at byte {third} is "
                                                   "not valid"),
        "gzip without its trailer": ("e.tar.gz", gz[:-8], "incomplete or damaged (EOFError"),
        "gzip with a wrong CRC": ("f.tar.gz", bytes(crc), "incomplete or damaged (BadGzipFile: CRC check failed"),
        "xz cut short": ("g.tar.xz", xz[:-12], "incomplete or damaged (EOFError"),
        "bzip2 cut short": ("h.tar.bz2", bz[:-12], "is bzip2 data cut short or damaged; nothing was extracted"),
        "gzip cut in the middle": ("i.tar.gz", gz[:len(gz) // 2], "Compressed file ended before the end-of-stream"),
        "cut inside a member's data": ("j.tar", raw[:member_offset(raw, 2) + tarfile.BLOCKSIZE + 100],
                                       "the archive is incomplete or damaged (unexpected end of data)"),
        "pax cut inside its global header": ("k.tar", pax_tar()[:812], "is a tar archive cut short or damaged at "
                                                                        "its start"),
        "gzip of a tar cut in its first header": ("l.tar.gz", gzip.compress(raw[:300]), "is a tar archive cut short "
                                                                                         "or damaged at its start"),
    }


def test_an_archive_of_folders_alone_holds_no_dataset(tmp_path):
    """A tar holding only a folder was extracted as an empty dataset, exit 0."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        info = tarfile.TarInfo("set")
        info.type = tarfile.DIRTYPE
        tar.addfile(info)
    archive = tmp_path / "folders.tar"
    archive.write_bytes(buffer.getvalue())
    line = one_error(run_cli("data", "download", "set", "--url", str(archive), "--dest", str(tmp_path / "d")))
    assert line == f"error: {archive}: the archive holds no files; nothing was extracted: check the URL or file"
    assert not (tmp_path / "d").exists()


def pax_tar() -> bytes:
    """A PAX archive whose global header holds 600 bytes (cut inside it, it read as "not a tar archive")."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT, pax_headers={"comment": "g" * 600}) as tar:
        info = tarfile.TarInfo("set/train/0.png")
        info.size = 10
        tar.addfile(info, io.BytesIO(b"0123456789"))
    return buffer.getvalue()


def one_error(done) -> str:
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    (line,) = done.stderr.strip().splitlines()
    return line


@pytest.mark.parametrize("case", sorted(damaged()))
def test_a_partial_local_archive_is_refused_and_nothing_is_extracted(tmp_path, case):
    name, data, says = damaged()[case]
    archive = tmp_path / name
    archive.write_bytes(data)
    dest = tmp_path / "datasets"
    line = one_error(run_cli("data", "download", "set", "--url", str(archive), "--dest", str(dest)))
    assert line.startswith(f"error: {archive}: ") and says in line, line
    assert line.endswith("download it again"), line
    assert not dest.exists() or not any(dest.iterdir())  # nothing, not even a staging folder


@pytest.mark.parametrize("cut", [0.3, 0.7, 0.999])
def test_a_download_cut_short_without_a_content_length_is_refused(tmp_path, cut):
    body = gzip.compress(whole_tar())
    with serve(CutShortHandler, body=body, keep=int(len(body) * cut)) as base:
        done = run_cli("data", "download", "set", "--url", f"{base}/set.tar.gz", "--dest", str(tmp_path / "d"),
                       timeout=120)
    line = one_error(done)
    assert "Compressed file ended before the end-of-stream marker was reached" in line, line
    assert not (tmp_path / "d").exists() or not any((tmp_path / "d").iterdir())


def test_whole_archives_of_every_compression_still_extract(tmp_path):
    raw = whole_tar()
    for name, data in {"w.tar": raw, "w.tar.gz": gzip.compress(raw), "w.tar.xz": lzma.compress(raw),
                       "w.tar.bz2": bz2.compress(raw)}.items():
        (tmp_path / name).write_bytes(data)
        dest = tmp_path / f"out-{name}"
        done = run_cli("data", "download", "set", "--url", str(tmp_path / name), "--dest", str(dest))
        assert done.returncode == 0, done.stderr
        assert sorted(p.name for p in (dest / "set" / "train").iterdir()) == [f"{i}.png" for i in range(FILES)]
    with serve(CutShortHandler, body=gzip.compress(raw), keep=len(gzip.compress(raw))) as base:  # whole, no length
        done = run_cli("data", "download", "set", "--url", f"{base}/w.tar.gz", "--dest", str(tmp_path / "http"))
    assert done.returncode == 0, done.stderr
    assert len(os.listdir(tmp_path / "http" / "set" / "train")) == FILES


def test_a_member_size_no_file_can_have_is_one_line(tmp_path):
    """A base-256 size field of about 2**95 with a valid checksum: tarfile's seek raised ValueError (a traceback)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for i in range(3):
            info = tarfile.TarInfo(f"set/{i}.png")
            info.size = 600
            tar.addfile(info, io.BytesIO(b"x" * 600))
    raw = bytearray(buffer.getvalue())
    offset = member_offset(bytes(raw), 1)
    raw[offset + 124:offset + 136] = b"\x80" + b"\0" * 3 + b"\x7f" + b"\xff" * 7
    raw[offset + 148:offset + 156] = b" " * 8
    raw[offset + 148:offset + 156] = ("%06o\0 " % sum(raw[offset:offset + 512])).encode()
    (tmp_path / "huge.tar").write_bytes(bytes(raw))
    line = one_error(run_cli("data", "download", "x", "--url", str(tmp_path / "huge.tar"), "--dest",
                             str(tmp_path / "out")))
    assert line.startswith(f"error: {tmp_path / 'huge.tar'}: the archive is incomplete or damaged ("), line
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
