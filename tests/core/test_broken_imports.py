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
from support import installed_package, run_cli


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    return make_run(tmp_path_factory.mktemp("broken") / "runs", GanLosses(), name="gan", epochs=1)


def broken_matplotlib(root):
    """An installed matplotlib that fails the way 3.6 does under numpy 2 (installed: a stray matplotlib folder
    hiding the installed one is another error, see tests/reliability/test_torch_limits.py)."""
    return installed_package(root, "matplotlib", "raise ImportError('numpy.core.multiarray failed to import')\n")


@pytest.mark.parametrize("command", ["plot", "report"])
def test_a_broken_dependency_is_one_line_naming_it(finished_run, tmp_path, command):
    env = {"PYTHONPATH": str(broken_matplotlib(tmp_path / "site"))}
    result = run_cli(command, str(finished_run), "-o", str(tmp_path / "out"), env=env)
    assert (result.returncode, result.stderr) == (1, (
        "error: importing matplotlib failed: numpy.core.multiarray failed to import; install a version of "
        "matplotlib that works with the installed packages (usually a newer one: pip install -U matplotlib)\n")), result.stderr
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


def test_the_package_whose_module_failed_is_blamed_not_the_callers_on_the_way(tmp_path, monkeypatch):
    """matplotlib built for numpy 1, imported by torchmetrics during validation, called through pluggy: the
    message blamed pluggy (the outermost foreign frame), then torchmetrics."""
    (tmp_path / "fakeplot").mkdir()
    (tmp_path / "fakeplot" / "__init__.py").write_text("raise ImportError('numpy.core.multiarray failed to import')\n")
    (tmp_path / "fakemetrics.py").write_text("def compute():\n    import fakeplot\n    return fakeplot\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import pluggy

    from nectargan_core import hookimpl
    from nectargan_core.hookspecs import PROJECT_NAME, RunSpecs

    class Validation:
        @hookimpl
        def on_validation_end(self, epoch):
            import fakemetrics

            fakemetrics.compute()

    manager = pluggy.PluginManager(PROJECT_NAME)
    manager.add_hookspecs(RunSpecs)
    manager.register(Validation())
    caller = {"__name__": "nectargan_core.engine", "hook": manager.hook}
    exec("try:\n    hook.on_validation_end(trainer=None, epoch=0, metrics={})\n"  # noqa: S102
         "except ImportError as exc:\n    error = exc\n", caller)
    assert failed_package(caller["error"]) == "fakeplot"
    assert describe(caller["error"]).startswith("importing fakeplot failed: numpy.core.multiarray failed to import;")


def test_a_torchvision_built_for_another_torch_is_one_line(tmp_path):
    """torch 2.13 (CPU build) beside torchvision 0.29: importing torchvision raised a RuntimeError, and every
    command that needs it printed a 30-frame traceback."""
    fake = tmp_path / "site" / "torchvision"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise RuntimeError('operator torchvision::nms does not exist')\n")
    made = run_cli("data", "synth", "data", "--count", "8", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    result = run_cli("train", "--preset", "pix2pix-tiny", "--set", "data.root=data", cwd=tmp_path,
                     env={"PYTHONPATH": str(tmp_path / "site")})
    assert result.returncode == 1 and len(result.stderr.splitlines()) == 1, result.stderr
    assert result.stderr.startswith("error: torchvision ") and result.stderr.endswith(
        " (operator torchvision::nms does not exist); install the torchvision built for this torch, from the same "
        "index or channel as torch\n"), result.stderr
    assert " does not fit torch " in result.stderr
