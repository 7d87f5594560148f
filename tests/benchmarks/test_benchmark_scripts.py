"""The GPU benchmark scripts keep working where CI can run them: their CPU paths and their refusals."""

from __future__ import annotations

import subprocess
import sys

import pytest

from support import ROOT

BENCHMARKS = ROOT / "benchmarks"


def script(name: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(BENCHMARKS / name), *args], capture_output=True, text=True,
                          timeout=timeout)


def test_gpu_refuses_an_unknown_or_empty_section_before_looking_for_a_gpu():
    for only in ("bogus", ""):
        proc = script("gpu.py", "--only", only)
        assert proc.returncode == 2 and proc.stderr.strip().splitlines()[-1].startswith(
            "gpu.py: error: --only: unknown section(s)"), proc.stderr
        assert "first-steps" in proc.stderr  # the sections are listed


def test_gpu_without_a_gpu_has_nothing_to_measure():
    proc = script("gpu.py", "--only", "first-steps")
    assert proc.returncode == 0 and "no CUDA device: nothing to measure" in proc.stdout


@pytest.mark.slow  # three small CycleGAN trainers timed on the CPU: 20-60 s on 2 busy cores
def test_the_cyclegan_step_benchmark_runs_on_a_cpu():
    proc = script("cyclegan_bench.py", "--device", "cpu", "--repeats", "1")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = [line for line in proc.stdout.splitlines() if line.strip().startswith("[6]")]
    assert [row.split(":")[0].split()[-1] for row in rows] == ["reference", "ours", "ours_reference_adam"]
