"""Who may import whom: the layers of pyproject.toml's ``[tool.importlinter]``, checked with ``lint-imports``.

The trainers (pix2pix, CycleGAN) sit on the image-translation layer, which
sits on the parts (networks, losses, visualizers), which sit on the core; a
layer never imports one above it, and siblings never import each other.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from support import ROOT

LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint_imports(config: Path, cwd: Path, pythonpath: str | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    return subprocess.run([str(LINT_IMPORTS), "--no-cache", "--no-logo", str(config)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def test_the_installed_distributions_keep_the_contracts():
    result = lint_imports(ROOT / "pyproject.toml", ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Contracts: 1 kept, 0 broken." in result.stdout, result.stdout


def test_the_contracts_catch_a_sibling_import_and_a_core_that_imports_a_plugin(tmp_path):
    """The same [tool.importlinter] table, over stand-in packages that break it twice."""
    table = (ROOT / "pyproject.toml").read_text()
    config = tmp_path / "pyproject.toml"
    config.write_text(table[table.index("[tool.importlinter]"):])
    packages = re.findall(r'"(nectargan_[a-z0-9]+)"', config.read_text().split("[[tool.importlinter.contracts]]")[0])
    assert len(packages) == 8, packages
    for name in packages:
        (tmp_path / "src" / name).mkdir(parents=True)
        (tmp_path / "src" / name / "__init__.py").write_text("")
    (tmp_path / "src" / "nectargan_cyclegan" / "trainer.py").write_text("from nectargan_pix2pix import options\n")
    (tmp_path / "src" / "nectargan_core" / "run.py").write_text("import nectargan_translate\n")
    result = lint_imports(config, tmp_path, pythonpath=str(tmp_path / "src"))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "nectargan_cyclegan.trainer -> nectargan_pix2pix" in result.stdout, result.stdout
    assert "nectargan_core.run -> nectargan_translate" in result.stdout, result.stdout
