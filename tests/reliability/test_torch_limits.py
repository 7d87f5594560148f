"""Failures before the first line of our code (issue 25, class 7): under an address-space limit (``ulimit -v``)
below what ``import torch`` maps, a command died with an ImportError traceback ("failed to map segment") or an
abort with no message at all. Commands that need torch check the limit first and say in one line what to raise;
the commands that need no torch keep working under it."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from kill_points import tiny_pix2pix_run
from support import installed_package
from translation_fixtures import TINY_MODELS as TINY
from nectargan_core.torchload import TORCH_ADDRESS_SPACE

#: 3 GiB: where the import aborted in the C runtime (2 GiB: an ImportError), below what torch needs.
LIMIT = 3 * 1024 ** 3


def limited(*args: str, cwd: Path, limit: int = LIMIT) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).with_name("nectargan")
    env = {k: v for k, v in os.environ.items() if not k.startswith("NECTARGAN_")}
    return subprocess.run([str(exe), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120,
                          preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (limit, limit)))


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    return tiny_pix2pix_run(tmp_path_factory)


def commands(run_dir: Path, tmp_path: Path) -> dict[str, list[str]]:
    image = next((run_dir.parents[2] / "data" / "test").glob("*.png"))
    return {
        "nectargan train": ["train", "--resume", str(run_dir), "--set", "loop.epochs=2"],
        "nectargan test": ["test", str(run_dir), "--out", str(tmp_path / "t")],
        "nectargan predict": ["predict", str(run_dir), str(image), "-o", str(tmp_path / "p")],
        "nectargan export": ["export", str(run_dir), "--format", "onnx", "-o", str(tmp_path / "g.onnx")],
        "nectargan models show": ["models", "show", "unet"],
    }


@pytest.mark.parametrize("name", ["nectargan train", "nectargan test", "nectargan predict", "nectargan export",
                                  "nectargan models show"])
def test_a_command_that_needs_torch_says_what_limit_to_raise(run_dir, tmp_path, name):
    done = limited(*commands(run_dir, tmp_path)[name], cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert done.stderr == (f"error: {name}: the address-space limit (ulimit -v) is {LIMIT // 1024} KiB, below the "
                           f"{TORCH_ADDRESS_SPACE // 1024} KiB torch needs to load"
                           f"{', and training needs more' if name == 'nectargan train' else ''}; raise it "
                           "(ulimit -v unlimited) or run where it is higher\n")
    assert not [p for p in tmp_path.iterdir()]  # nothing written


def test_the_commands_that_need_no_torch_work_under_the_limit(run_dir, tmp_path):
    for args in (["runs", str(run_dir.parents[1])], ["plugins", "list"], ["--help"],
                 ["data", "synth", str(tmp_path / "s"), "--count", "4", "--size", "16"],
                 ["data", "check", str(run_dir.parents[2] / "data")], ["config", "validate", str(run_dir / "config.yaml")]):
        done = limited(*args, cwd=tmp_path, limit=2 * 1024 ** 3)
        assert done.returncode == 0 and "Traceback" not in done.stderr, (args, done.stderr)


@pytest.mark.parametrize("raises", ["RuntimeError('Unable to instantiate PyTypeObject')", "MemoryError()",
                                    "SystemExit(3)", "ImportError('libcudart.so.13: cannot open shared object')"])
def test_a_torch_that_fails_to_import_is_one_line(run_dir, tmp_path, raises):
    installed_package(tmp_path / "broken", "torch", f"raise {raises}\n")  # the installed torch, broken
    exe = Path(sys.executable).with_name("nectargan")
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("NECTARGAN_")},
           "PYTHONPATH": str(tmp_path / "broken")}
    done = subprocess.run([str(exe), "test", str(run_dir), "--out", str(tmp_path / "t")], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    (line,) = done.stderr.splitlines()
    if raises.startswith("ImportError"):  # the import-error line of every command: what to install
        assert line.startswith("error: importing torch failed: libcudart.so.13: cannot open shared object"), line
    else:
        assert line.startswith("error: nectargan test: torch cannot be imported (") and "reinstall it" in line, line
    assert not (tmp_path / "t").exists()


@pytest.mark.parametrize("shape", ["torch/__init__.py", "torch.py", "torch/nn/__init__.py", "raising torch.py"])
@pytest.mark.parametrize("name", ["nectargan train", "nectargan test", "nectargan models show"])
def test_a_file_named_torch_that_hides_the_installed_one_is_named(run_dir, tmp_path, shape, name):
    """A ``torch.py`` or ``torch/`` earlier on the path imports, but is no PyTorch: ``models`` printed a
    traceback ("cannot import name 'nn' from 'torch'"), ``test`` said torch was not installed, ``train`` said to
    install it; torch is installed, and what to do is to move the file that hides it."""
    fake = tmp_path / "shadow" / shape.removeprefix("raising ")
    fake.parent.mkdir(parents=True)
    fake.write_text("raise ImportError('fake')\n" if shape.startswith("raising") else "__version__ = '2.14.1'\n")
    if shape == "torch/nn/__init__.py":  # torch.nn imports, but holds no Module: an AttributeError, no ImportError
        (fake.parent.parent / "__init__.py").write_text("")
        fake = fake.parent.parent / "__init__.py"
    exe = Path(sys.executable).with_name("nectargan")
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("NECTARGAN_")},
           "PYTHONPATH": os.pathsep.join([str(tmp_path / "shadow"), os.environ.get("PYTHONPATH", "")])}
    args = commands(run_dir, tmp_path)[name]
    if name == "nectargan train":
        args = ["train", "--trainer", "pix2pix", "--set", f"data.root={run_dir.parents[2] / 'data'}"]
    done = subprocess.run([str(exe), *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    (line,) = done.stderr.splitlines()
    assert f"torch is installed, but Python imported {fake} instead (" in line, line
    assert line.endswith("a file or folder named torch in the current folder or on PYTHONPATH hides it; rename it "
                         "or take it off PYTHONPATH"), line


def worker_run(tmp_path: Path, run_dir: Path, limit: int, value: int) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).with_name("nectargan")
    env = {k: v for k, v in os.environ.items() if not k.startswith("NECTARGAN_")}
    settings = [f"data.root={run_dir.parents[2] / 'data'}", "data.load_size=32", "data.crop_size=32",
                "data.num_workers=2", "data.cache=off", "loop.epochs=1", "run.device=cpu", "visualizers=[]",
                "run.output_dir=runs", "examples.every_epochs=null", *TINY]
    return subprocess.run([str(exe), "train", "--trainer", "pix2pix", *(a for s in settings for a in ("--set", s))],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240,
                          preexec_fn=lambda: resource.setrlimit(limit, (value, value)))


def test_an_open_file_limit_too_low_for_the_workers_is_one_line(run_dir, tmp_path):
    """``ulimit -n 32`` with 2 workers: thousands of lines of tracebacks, or a hang after ``finished``. A soft
    limit alone is raised up to the hard one; a hard limit too low is one line with what the workers need."""
    done = worker_run(tmp_path, run_dir, resource.RLIMIT_NOFILE, 32)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.splitlines()[-1].startswith(
        "error: the open-file limit (ulimit -n) is 32, and 2 data loader worker process(es) need at least 64 (each "
        "batch comes from its worker as open files); raise it (ulimit -n 1024) or set data.num_workers=0"), done.stderr
    assert '"status": "failed"' in (tmp_path / "runs/run/version_0/status.json").read_text()


def test_a_file_size_limit_too_low_for_a_batch_from_the_workers_is_one_line(run_dir, tmp_path):
    """``ulimit -f 10`` with workers: their shared-memory files cannot grow to a batch ("unable to resize file ...
    File too large"), which came as two tracebacks; without workers the checkpoint write was one line already."""
    done = worker_run(tmp_path, run_dir, resource.RLIMIT_FSIZE, 10 * 1024)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.splitlines()[-1].startswith(
        "error: a data loader worker could not hand over a batch: the file size limit (ulimit -f) is 10 KiB, below "
        "one batch in shared memory; raise it (ulimit -f unlimited) or set data.num_workers=0"), done.stderr
