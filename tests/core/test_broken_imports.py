"""A dependency that is missing or broken by another is one line naming it, never a traceback.

Found by an outside packager: matplotlib 3.6 under numpy 2 (both inside the
declared ranges) ended `nectargan plot` and `report` in an ImportError
traceback; an environment installed with --no-deps and no torch ended every
training command in `ModuleNotFoundError: No module named 'torch'`.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from nectargan_core.brokenimports import describe, failed_package
from runs_support import GanLosses, make_run
from support import run_cli


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    return make_run(tmp_path_factory.mktemp("broken") / "runs", GanLosses(), name="gan", epochs=1)


def broken_matplotlib(root):
    """A matplotlib that fails the way 3.6 does under numpy 2."""
    package = root / "matplotlib"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(
        "raise ImportError('numpy.core.multiarray failed to import')\n")
    return root


@pytest.mark.parametrize("command", ["plot", "report"])
def test_a_broken_dependency_is_one_line_naming_it(finished_run, tmp_path, command):
    env = {"PYTHONPATH": str(broken_matplotlib(tmp_path / "site"))}
    result = run_cli(command, str(finished_run), "-o", str(tmp_path / "out"), env=env)
    assert (result.returncode, result.stderr) == (1, (
        "error: importing matplotlib failed: numpy.core.multiarray failed to import; install a matplotlib that "
        "works with the other installed packages (pip check says which conflict)\n")), result.stderr
    shown = run_cli("--traceback", command, str(finished_run), "-o", str(tmp_path / "out"), env=env)
    assert "Traceback (most recent call last)" in shown.stderr and "matplotlib/__init__.py" in shown.stderr


def test_a_missing_torch_is_one_line_saying_how_to_install_it():
    try:
        exec("import torch_not_here_for_this_test as torch", {})  # noqa: S102 - a real ModuleNotFoundError
    except ModuleNotFoundError as caught:
        caught.name = "torch"  # as `import torch` raises it where torch is not installed
        line = describe(caught)
    assert line == ("torch is not installed (No module named 'torch_not_here_for_this_test'); install it: pip install "
                    "torch torchvision, or the build for your machine (README: 'Your own torch'; CPU only: "
                    "--index-url https://download.pytorch.org/whl/cpu)")


def test_our_own_import_errors_are_not_blamed_on_a_dependency(tmp_path, monkeypatch):
    (tmp_path / "nectargan_fake_own.py").write_text("from json import no_such_name\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    caller = {"__name__": "nectargan_core.cli.main"}  # caught where the CLI catches it
    exec("try:\n    __import__('nectargan_fake_own')\nexcept ImportError as exc:\n    error = exc\n", caller)  # noqa: S102
    assert failed_package(caller["error"]) is None and describe(caller["error"]) is None
    missing = subprocess.run([sys.executable, "-c", "import nectargan_not_installed_plugin"], capture_output=True,
                             text=True)
    assert "ModuleNotFoundError" in missing.stderr  # a missing plugin of ours is not a dependency to pip install
    assert failed_package(ModuleNotFoundError("x", name="nectargan_not_installed_plugin")) is None
