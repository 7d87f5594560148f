"""Helpers of the plugin-author-kit tests: building plugins as a user would, without touching this environment."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path


def pip_install_target(site: Path, *folders: Path) -> None:
    """Build and install distributions into ``site`` only (no network: the core is already installed)."""
    isolation = [] if importlib.util.find_spec("setuptools") is None else ["--no-build-isolation"]
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", *isolation,
                    "--target", str(site), *map(str, folders)],
                   check=True, capture_output=True, text=True, timeout=300)


def pytest_in(site: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    """Run pytest in a new process that sees the distributions installed in ``site``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NECTARGAN_")}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args], cwd=cwd,
                          env={**env, "PYTHONPATH": str(site)}, capture_output=True, text=True, timeout=300)


def doc_files(text: str) -> dict[str, str]:
    """Files embedded in a page as ``<!-- file: PATH -->`` followed by a fenced block (as in authoring.md)."""
    return dict(re.findall(r"<!-- file: (\S+) -->\n```\w*\n(.*?)```", text, re.S))
