"""An environment without torch (installed with --no-deps): what needs no torch works, the rest says one line.

`nectargan --help`, `plugins list` and the data tools import no torch, so they
work; a command that trains or builds a network says that torch is missing
and how to install it, instead of ending in a ModuleNotFoundError traceback.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys

import pytest

from support import ROOT

pytestmark = pytest.mark.slow

LIGHT = ["pluggy", "importlib-metadata", "click", "pydantic", "pyyaml", "rich", "jinja2", "numpy", "pillow",
         "matplotlib"]
MISSING_TORCH = ("error: torch is not installed (No module named 'torch'); install it: pip install torch torchvision, "
                 "or the build for your machine (README: 'Your own torch'; CPU only: --index-url "
                 "https://download.pytorch.org/whl/cpu)\n")


def test_without_torch_the_light_commands_work_and_the_rest_name_what_to_install(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_CONSTRAINT", "PYTHONPATH", "NECTARGAN_"))}
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet"]
    folders = [str(ROOT)] + [str(ROOT / "plugins" / name) for name in
                             ("nectargan-models", "nectargan-losses", "nectargan-translate", "nectargan-pix2pix")]
    # pip builds in the source folders: one build at a time with .ci/install_dists.py and .ci/release.py
    with open(ROOT / ".ci" / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = subprocess.run(pip + ["--no-deps", *folders], env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    done = subprocess.run(pip + LIGHT, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    assert subprocess.run([str(venv / "bin" / "python"), "-c", "import torch"], capture_output=True).returncode == 1

    def nectargan(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(venv / "bin" / "nectargan"), *args], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=300)

    assert nectargan("--help").returncode == 0
    listed = nectargan("plugins", "list")
    assert listed.returncode == 0 and "pix2pix (nectargan-pix2pix 0.1.0) [loaded]" in listed.stdout, listed.stderr
    assert nectargan("data", "synth", "data", "--count", "8").returncode == 0
    for args in (["train", "--preset", "pix2pix-tiny", "--set", "data.root=data"], ["models", "list"]):
        failed = nectargan(*args)
        assert (failed.returncode, failed.stderr, failed.stdout) == (1, MISSING_TORCH, ""), args
    assert not (tmp_path / "runs").exists()  # refused before a run directory exists
