"""Checkpoint files: round trip, atomic writes, and refusal of bad or unsafe files."""

from __future__ import annotations

import os

import pytest
import torch

from nectargan_core.checkpoint import load_checkpoint, save_checkpoint, sidecar_path
from nectargan_core.errors import CheckpointError


def payload():
    return {"epoch": 2, "global_step": 10, "state": {"w": torch.arange(6.0).reshape(2, 3)},
            "config": {"run": {"name": "x"}}, "rng": {"python": {"version": 3, "state": [1, 2], "gauss": None}}}


def test_round_trip(tmp_path):
    path = save_checkpoint(payload(), tmp_path / "a.pt")
    loaded = load_checkpoint(path)
    assert loaded["format"] == "nectargan-checkpoint" and loaded["format_version"] == 1
    assert torch.equal(loaded["state"]["w"], torch.arange(6.0).reshape(2, 3))
    assert loaded["config"] == {"run": {"name": "x"}}
    assert sidecar_path(path).exists()
    assert not [p for p in tmp_path.iterdir() if ".tmp-" in p.name]


def test_truncated_file_is_detected_by_size(tmp_path):
    path = save_checkpoint(payload(), tmp_path / "a.pt")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match=r"a\.pt: truncated or corrupt checkpoint \(\d+ bytes, expected \d+\)"):
        load_checkpoint(path)


def test_truncated_file_without_sidecar(tmp_path):
    path = save_checkpoint(payload(), tmp_path / "a.pt")
    sidecar_path(path).unlink()
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="truncated or not a checkpoint file"):
        load_checkpoint(path)


def test_corrupt_bytes_are_detected_by_checksum(tmp_path):
    path = save_checkpoint(payload(), tmp_path / "a.pt")
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="do not match their checksum"):
        load_checkpoint(path)


def test_foreign_checkpoint_is_refused(tmp_path):
    path = tmp_path / "weights.pth"
    torch.save({"model": {"w": torch.zeros(2)}}, path)
    with pytest.raises(CheckpointError, match="not a NectarGAN checkpoint"):
        load_checkpoint(path)


def test_not_a_checkpoint_at_all(tmp_path):
    path = tmp_path / "notes.pt"
    path.write_text("hello")
    with pytest.raises(CheckpointError, match="notes.pt: (truncated or )?not a (readable )?checkpoint"):
        load_checkpoint(path)


def test_missing_file(tmp_path):
    with pytest.raises(CheckpointError, match="checkpoint file not found"):
        load_checkpoint(tmp_path / "nope.pt")


class Exploit:
    """Unpickling this would run a shell-free side effect: create a marker file."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_malicious_pickle_is_refused_and_never_executed(tmp_path):
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.pt"
    torch.save({"format": "nectargan-checkpoint", "format_version": 1, "x": Exploit(str(marker))}, path)
    with pytest.raises(CheckpointError, match="refused to load: the file contains arbitrary Python objects"):
        load_checkpoint(path)
    assert not marker.exists()


def test_failed_write_keeps_the_previous_file(tmp_path, monkeypatch):
    path = save_checkpoint(payload(), tmp_path / "a.pt")
    before = path.read_bytes()

    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(torch, "save", full_disk)
    with pytest.raises(CheckpointError, match=r"a\.pt: could not write checkpoint \(No space left on device\)"):
        save_checkpoint({"epoch": 3}, path)
    assert path.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["a.pt", "a.pt.json"]
    monkeypatch.undo()
    assert load_checkpoint(path)["epoch"] == 2


def test_newer_format_asks_for_upgrade(tmp_path):
    path = tmp_path / "future.pt"
    torch.save({"format": "nectargan-checkpoint", "format_version": 99}, path)
    with pytest.raises(CheckpointError, match="format 99 is newer than this nectargan-core understands"):
        load_checkpoint(path)
