"""`nectargan plugins install/uninstall`: a real pip install of a rendered scaffold into this environment."""

from __future__ import annotations

import subprocess
import sys

import pytest

from nectargan_core.scaffold import render
from support import run_cli

DISTRIBUTION = "nectargan-authkit-probe"


@pytest.fixture
def probe(tmp_path):
    """A freshly rendered loss plugin; whatever the test does, it is not left installed."""
    folder = render("authkit_probe", "loss", tmp_path)
    yield folder
    subprocess.run([sys.executable, "-m", "pip", "uninstall", "--yes", "--quiet", DISTRIBUTION],
                   capture_output=True, timeout=120)


def test_install_verifies_the_plugin_loads_and_uninstall_removes_it(probe):
    installed = run_cli("plugins", "install", "--quiet", "--no-deps", "--no-build-isolation", str(probe))
    assert installed.returncode == 0, installed.stdout + installed.stderr
    assert installed.stdout == f"authkit_probe ({DISTRIBUTION} 0.1.0) [loaded]\n  provides: loss: authkit_probe\n"
    assert installed.stderr == ""  # no conflict with what is installed
    assert "authkit_probe" in run_cli("plugins", "list").stdout

    removed = run_cli("plugins", "uninstall", "authkit_probe")
    assert removed.returncode == 0, removed.stdout + removed.stderr
    assert f"uninstalled: {DISTRIBUTION}\n" in removed.stdout
    assert "authkit_probe" not in run_cli("plugins", "list", "--all").stdout


def test_reinstalling_a_changed_plugin_of_the_same_version_reports_it_as_changed(probe):
    args = ("plugins", "install", "--quiet", "--no-deps", "--no-build-isolation", str(probe))
    assert run_cli(*args).returncode == 0
    plugin = probe / "nectargan_authkit_probe" / "plugin.py"
    plugin.write_text(plugin.read_text() + (
        "\n\n@hookimpl\ndef register_schedules(register):\n"
        "    register('authkit_probe_flat', 'nectargan_authkit_probe.loss:CharbonnierLoss')\n"))
    again = run_cli(*args)  # the version stays 0.1.0: pip reinstalls the folder all the same
    assert again.returncode == 0, again.stdout + again.stderr
    assert again.stdout == (f"authkit_probe ({DISTRIBUTION} 0.1.0) [loaded]\n  provides: loss: authkit_probe; "
                            "schedule: authkit_probe_flat\n")


def test_install_of_a_distribution_without_a_plugin_fails(tmp_path):
    folder = tmp_path / "not-a-plugin"
    folder.mkdir()
    (folder / "pyproject.toml").write_text('[project]\nname = "authkit-not-a-plugin"\nversion = "1.0"\n'
                                           '[tool.setuptools]\npy-modules = []\n')
    try:
        installed = run_cli("plugins", "install", "--quiet", "--no-deps", "--no-build-isolation", str(folder))
        assert installed.returncode == 1
        assert "but no new nectargan plugin appeared" in installed.stderr
    finally:
        subprocess.run([sys.executable, "-m", "pip", "uninstall", "--yes", "--quiet", "authkit-not-a-plugin"],
                       capture_output=True, timeout=120)


def test_install_reports_pip_failure():
    failed = run_cli("plugins", "install", "--no-index", "nectargan-authkit-does-not-exist")
    assert failed.returncode == 1
    assert "error: pip install failed with exit code 1" in failed.stderr


def test_uninstalling_what_another_plugin_needs_names_the_plugin_that_no_longer_loads(probe, tmp_path):
    """The way nectargan-cyclegan stopped loading, silently, once nectargan-pix2pix was uninstalled."""
    dependent = tmp_path / "dependent"
    (dependent / "nectargan_authkit_dependent").mkdir(parents=True)
    (dependent / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=77"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "nectargan-authkit-dependent"\nversion = "0.1.0"\n'
        '[project.entry-points.nectargan]\nauthkit_dependent = "nectargan_authkit_dependent.plugin"\n')
    (dependent / "nectargan_authkit_dependent" / "__init__.py").write_text("")
    (dependent / "nectargan_authkit_dependent" / "plugin.py").write_text(
        "import nectargan_authkit_probe  # needs the probe plugin\nfrom nectargan_core import hookimpl\n\n"
        "@hookimpl\ndef register_losses(register):\n"
        "    register('authkit_dependent', 'nectargan_authkit_probe.loss:CharbonnierLoss')\n")
    try:
        for folder in (probe, dependent):
            installed = run_cli("plugins", "install", "--quiet", "--no-deps", "--no-build-isolation", str(folder))
            assert installed.returncode == 0, installed.stdout + installed.stderr
        removed = run_cli("plugins", "uninstall", "authkit_probe")
        assert removed.returncode == 1
        assert removed.stdout.split("Successfully uninstalled nectargan-authkit-probe-0.1.0\n")[-1].startswith(
            f"uninstalled: {DISTRIBUTION}\n"
                                         "no longer loads: authkit_dependent (nectargan-authkit-dependent 0.1.0)\n"
                                         "  error: import of 'nectargan_authkit_dependent.plugin' failed: "
                                         "ModuleNotFoundError: No module named 'nectargan_authkit_probe'"), removed.stdout
        assert removed.stderr == ("error: uninstalled, but nectargan-authkit-dependent needed it (see above): "
                                  "uninstall that too, or install again what it needs\n")
    finally:
        subprocess.run([sys.executable, "-m", "pip", "uninstall", "--yes", "--quiet", "nectargan-authkit-dependent"],
                       capture_output=True, timeout=120)


def test_uninstalling_what_another_plugin_requires_names_it_even_when_it_still_loads(probe, tmp_path):
    """pix2pix still loads without nectargan-models, but its presets name models nobody provides any more."""
    dependent = tmp_path / "requiring"
    (dependent / "nectargan_authkit_requiring").mkdir(parents=True)
    (dependent / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=77"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "nectargan-authkit-requiring"\nversion = "0.1.0"\n'
        f'dependencies = ["{DISTRIBUTION}"]\n'
        '[project.entry-points.nectargan]\nauthkit_requiring = "nectargan_authkit_requiring.plugin"\n')
    (dependent / "nectargan_authkit_requiring" / "__init__.py").write_text("")
    (dependent / "nectargan_authkit_requiring" / "plugin.py").write_text(
        "from nectargan_core import hookimpl\n\n@hookimpl\ndef register_presets(register):\n"
        "    register('authkit_requiring', {'trainer': 'toy'})\n")
    try:
        for folder in (probe, dependent):
            installed = run_cli("plugins", "install", "--quiet", "--no-deps", "--no-build-isolation", str(folder))
            assert installed.returncode == 0, installed.stdout + installed.stderr
        removed = run_cli("plugins", "uninstall", DISTRIBUTION)
        assert removed.returncode == 1, removed.stdout + removed.stderr
        assert removed.stdout.endswith(f"uninstalled: {DISTRIBUTION}\n"
                                       f"no longer works: nectargan-authkit-requiring requires {DISTRIBUTION}\n")
        assert removed.stderr == ("error: uninstalled, but nectargan-authkit-requiring needed it (see above): "
                                  "uninstall that too, or install again what it needs\n")
    finally:
        subprocess.run([sys.executable, "-m", "pip", "uninstall", "--yes", "--quiet", "nectargan-authkit-requiring"],
                       capture_output=True, timeout=120)


def test_uninstall_refuses_unknown_names_and_the_core():
    unknown = run_cli("plugins", "uninstall", "authkit_never_installed")
    assert (unknown.returncode, unknown.stderr) == (
        1, "error: no installed plugin named authkit-never-installed; see 'nectargan plugins list'\n")
    core = run_cli("plugins", "uninstall", "core")
    assert core.returncode == 1 and "cannot be uninstalled" in core.stderr


def test_install_prints_the_load_error_of_a_broken_plugin(tmp_path):
    folder = render("authkit_broken", "loss", tmp_path / "src")
    plugin = folder / "nectargan_authkit_broken" / "plugin.py"
    text = plugin.read_text().replace("@hookimpl\ndef register_losses", "@hookimpl\ndef register_lossess")
    plugin.write_text(text)
    line = text.splitlines().index("def register_lossess(register):")  # the @hookimpl line above it, 1-based
    site = tmp_path / "site"  # pip's --target passes through, so this test leaves the environment alone
    installed = run_cli("plugins", "install", "--quiet", "--no-deps", "--no-build-isolation", "--target", str(site),
                        str(folder), env={"PYTHONPATH": str(site)})
    assert installed.returncode == 1
    assert installed.stdout.endswith("authkit_broken (nectargan-authkit-broken 0.1.0) [error]\n  error: "
                                     f"nectargan_authkit_broken/plugin.py:{line}: hook 'register_lossess' is not a "
                                     "nectargan hook; did you mean 'register_losses'?\n")
    assert installed.stderr.endswith("error: installed, but a plugin does not load (see above)\n")


def test_install_checks_the_run_hooks_of_a_visualizer(tmp_path):
    folder = render("authkit_badviz", "visualizer", tmp_path / "src")
    source = folder / "nectargan_authkit_badviz" / "visualizer.py"
    text = source.read_text().replace("def on_log(self, record):", "def on_log(self, recrod):")
    source.write_text(text)
    line = text.splitlines().index("    def on_log(self, recrod):")  # the @hookimpl line above it, 1-based
    site = tmp_path / "site"
    installed = run_cli("plugins", "install", "--quiet", "--no-deps", "--no-build-isolation", "--target", str(site),
                        str(folder), env={"PYTHONPATH": str(site)})
    assert installed.returncode == 1
    assert installed.stdout == (
        "authkit_badviz (nectargan-authkit-badviz 0.1.0) [error]\n  error: visualizer 'authkit_badviz' "
        f"(nectargan_authkit_badviz/visualizer.py:{line}): on_log(recrod): argument 'recrod' is not in the spec "
        "on_log(trainer, record); did you mean 'record'?\n")
