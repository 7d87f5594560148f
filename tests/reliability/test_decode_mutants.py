"""No input crashes the process: byte-level mutants of PNG, 16-bit PNG, JPEG and TIFF files.

Each mutant goes through the dataset (read by a DataLoader with 0 and with 2
worker processes) and through ``predict``, in a child process: a decoder that
crashes takes the child down with a signal instead of the test run. Every
mutant must either decode or be refused with one line that names it; no
other output. The mutants are generated (``cases.mutants``), a seeded sample
by default and the long series with ``NECTARGAN_LONG_SERIES=1``.

End to end, a damaged image in a training set stops ``nectargan train`` with
one ``error:`` line naming the file and ``status.json`` saying ``failed``,
whether the image was read in the main process or in a DataLoader worker.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cases import FORMATS, image_bytes, mutants, png_chunks
from series import SEED, long_series
from support import run_cli

PROBE = Path(__file__).with_name("decode_probe.py")
TINY = ("models.generator.name=unet", "models.generator.depth=4", "models.generator.ngf=8",
        "models.discriminator.ndf=8", "data.load_size=32", "data.crop_size=32", "run.device=cpu",
        "visualizers=[]", "examples.every_epochs=null", "loop.log_every_steps=1")


def write_mutants(folder: Path, per_format: int, seed: int) -> list[Path]:
    folder.mkdir(parents=True)
    written = []
    for kind in FORMATS:
        for mutant in mutants(kind, per_format, seed):
            path = folder / f"{mutant.name}{mutant.suffix}"
            path.write_bytes(mutant.data)
            written.append(path)
    return written


def probe(*args: str, timeout: float) -> tuple[list[dict], str]:
    """Run decode_probe.py in a child; its JSON outcomes and its stderr. A crash fails the test here."""
    done = subprocess.run([sys.executable, str(PROBE), *args], capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, (f"the child ended with {done.returncode} (a negative code is a signal: "
                                  f"a decoder crashed the process)\n{done.stderr[-3000:]}")
    return [json.loads(line) for line in done.stdout.splitlines()], done.stderr


def assert_each_decoded_or_named(outcomes: list[dict], names: list[str], stderr: str) -> None:
    """Every file decoded, or refused by one DatasetError line that names it; nothing else printed."""
    assert len(outcomes) == len(names), f"{len(outcomes)} outcomes for {len(names)} files"
    decoded = {Path(o["file"]).name for o in outcomes if o.get("ok")}
    refused = []
    for outcome in outcomes:
        if outcome.get("ok"):
            continue
        message = outcome["message"]
        assert outcome["error"] == "DatasetError", outcome
        assert "\n" not in message and "Traceback" not in message, message
        named = [name for name in names if f"/{name}: cannot read image: " in message]
        assert len(named) == 1, f"the error does not name exactly one file: {message}"
        refused.append(named[0])
    assert sorted([*decoded, *refused]) == sorted(names), "some files were neither decoded nor named"
    assert not stderr.strip(), f"decoding printed more than the errors:\n{stderr[-2000:]}"


def check_dataset_series(tmp_path: Path, per_format: int, seed: int) -> dict[int, list[dict]]:
    """Every mutant through a DataLoader with 0 and with 2 workers (one child process); outcomes by workers."""
    files = write_mutants(tmp_path / "mutants", per_format, seed)
    outcomes, stderr = probe("dataset", "0,2", str(tmp_path / "mutants"), timeout=60 + 4 * len(files))
    by_workers = {workers: [o for o in outcomes if o["workers"] == workers] for workers in (0, 2)}
    for workers, found in by_workers.items():
        assert_each_decoded_or_named(found, [p.name for p in files], stderr)
    return by_workers


@pytest.mark.slow
def test_mutants_through_the_dataset_decode_or_name_the_file(tmp_path: Path) -> None:
    for outcomes in check_dataset_series(tmp_path, 16, SEED).values():
        refused = [o for o in outcomes if not o.get("ok")]
        assert len(refused) >= 16  # the sample is not all harmless: damage was found and reported
        # The class that crashed torchvision: one damaged IDAT byte. Now refused by the checksum, naming the chunk.
        assert any("damaged PNG (the IDAT chunk at byte 33 fails its checksum)" in o["message"] for o in refused)


@long_series
@pytest.mark.parametrize("seed", [101, 202, 303])
def test_long_series_of_mutants_through_the_dataset(tmp_path: Path, seed: int) -> None:
    check_dataset_series(tmp_path, 150, SEED + seed)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory) -> Path:
    """One training step of a tiny pix2pix run, for predict."""
    root = tmp_path_factory.mktemp("mutants_run")
    made = run_cli("data", "synth", str(root / "data"), "--count", "5", "--size", "32", "--val", "0.2", "--test", "0")
    assert made.returncode == 0, made.stderr
    settings = [f"data.root={root / 'data'}", "data.num_workers=0", "loop.max_steps=1", "run.output_dir=runs", *TINY]
    trained = run_cli("train", "--trainer", "pix2pix", *(a for s in settings for a in ("--set", s)), cwd=root)
    assert trained.returncode == 0, trained.stderr
    return root / "runs" / "run" / "version_0"


@pytest.mark.slow
def test_mutants_through_predict_decode_or_name_the_file(tmp_path: Path, tiny_run: Path) -> None:
    files = write_mutants(tmp_path / "mutants", 6, SEED + 7)
    outcomes, stderr = probe("predict", str(tiny_run), str(tmp_path / "mutants"), timeout=120)
    assert_each_decoded_or_named(outcomes, [p.name for p in files], stderr)


@long_series
def test_predict_command_names_the_damaged_input_in_one_line(tmp_path: Path, tiny_run: Path) -> None:
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    (inputs / "a_good.png").write_bytes(image_bytes("png", 16, 16))
    damaged = inputs / "b_damaged.png"
    damaged.write_bytes(image_bytes("png", 16, 16, seed=1))
    flip_idat_bit(damaged)
    result = run_cli("predict", str(tiny_run), str(inputs), "-o", str(tmp_path / "out"))
    assert result.returncode == 1, result.stderr
    assert result.stderr.strip().splitlines() == [
        f"error: {damaged}: cannot read image: damaged PNG (the IDAT chunk at byte 33 fails its checksum); "
        "the file is corrupt: copy or export it again"]


def flip_idat_bit(path: Path) -> None:
    """Flip one bit in the middle of a PNG's image data: the damage that crashed torchvision's decoder."""
    data = bytearray(path.read_bytes())
    offset, _, length = next(c for c in png_chunks(bytes(data)) if c[1] == b"IDAT")
    data[offset + 8 + length // 2] ^= 0x10
    path.write_bytes(bytes(data))


def damaged_training_set(root: Path) -> Path:
    """A synthetic dataset whose first training image has one flipped bit in its image data."""
    made = run_cli("data", "synth", str(root), "--count", "7", "--size", "32", "--val", "0.15", "--test", "0")
    assert made.returncode == 0, made.stderr
    first = sorted((root / "train").iterdir())[0]
    flip_idat_bit(first)
    return first


@pytest.mark.slow
@pytest.mark.parametrize("workers", [0, 2])
def test_a_damaged_image_stops_training_with_one_line_and_status_failed(tmp_path: Path, workers: int) -> None:
    damaged = damaged_training_set(tmp_path / "data")
    settings = [f"data.root={tmp_path / 'data'}", f"data.num_workers={workers}", "data.shuffle=false",
                "loop.epochs=1", "run.output_dir=runs", *TINY]
    result = run_cli("train", "--trainer", "pix2pix", *(a for s in settings for a in ("--set", s)), cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert errors == [f"error: {damaged}: cannot read image: damaged PNG (the IDAT chunk at byte 33 fails its "
                      "checksum); the file is corrupt: copy or export it again"], result.stderr
    assert "Traceback" not in result.stderr and "DataLoader worker" not in result.stderr
    status = json.loads((tmp_path / "runs" / "run" / "version_0" / "status.json").read_text())
    assert status["status"] == "failed" and str(damaged) in status["error"]
