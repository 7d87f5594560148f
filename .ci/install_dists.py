"""Install the core and every plugin distribution of this repository, as real distributions.

Globs ``plugins/*/`` and ``tests/plugins/*/`` so a new plugin folder is picked up
without editing tox.ini. One pip call, so sibling requirements (every plugin
needs ``nectargan-core``) resolve to these local folders, never to PyPI.

    python .ci/install_dists.py            # the newest releases (constraints.txt pins torch)
    python .ci/install_dists.py --floors   # the oldest declared ones (constraints-floors.txt)
"""

from __future__ import annotations

import fcntl
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: Optional extras the tests exercise (ONNX export parity through onnxruntime).
EXTRAS = {"nectargan-translate": "[onnx]"}


def main(argv: list[str]) -> int:
    floors = "--floors" in argv
    folders = [ROOT] + sorted(
        p.parent for pattern in ("plugins/*/pyproject.toml", "tests/plugins/*/pyproject.toml")
        for p in ROOT.glob(pattern)
    )
    core_extras = "[test]" if floors else "[test,release,lint]"  # the release and lint tools: not in the floors
    targets = [f"{ROOT}{core_extras}"] + [f"{p}{EXTRAS.get(p.name, '')}" for p in folders[1:]]
    constraints = ROOT / ("constraints-floors.txt" if floors else "constraints.txt")
    print(f"installing ({constraints.name}):", ", ".join(p.name or str(p) for p in folders), flush=True)
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "-c", str(constraints)]
    # setuptools builds in the source folder (build/, *.egg-info): two jobs installing at once (CI runs the
    # floors job beside the default one) would write the same files, and a build/ left from an older tree
    # would put modules that no longer exist into the wheel. So one install at a time, from a clean folder.
    with open(ROOT / ".ci" / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for folder in folders:
            shutil.rmtree(folder / "build", ignore_errors=True)
        subprocess.run(pip + targets, check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
