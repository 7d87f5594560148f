"""Install the core and every plugin distribution of this repository, as real distributions.

Globs ``plugins/*/`` and ``tests/plugins/*/`` so a new plugin folder is picked up
without editing tox.ini. One pip call, so sibling requirements (every plugin
needs ``nectargan-core``) resolve to these local folders, never to PyPI.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: Optional extras the tests exercise (ONNX export parity through onnxruntime).
EXTRAS = {"nectargan-pix2pix": "[onnx]"}


def main() -> int:
    folders = [ROOT] + sorted(
        p.parent for pattern in ("plugins/*/pyproject.toml", "tests/plugins/*/pyproject.toml")
        for p in ROOT.glob(pattern)
    )
    targets = [f"{ROOT}[test]"] + [f"{p}{EXTRAS.get(p.name, '')}" for p in folders[1:]]
    print("installing:", ", ".join(p.name or str(p) for p in folders), flush=True)
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "-c", str(ROOT / "constraints.txt")]
    # torch and torchvision resolve to the pinned versions in constraints.txt.
    subprocess.run(pip + targets, check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
