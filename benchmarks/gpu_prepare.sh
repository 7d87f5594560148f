#!/usr/bin/env bash
# Prepare the GPU check (benchmarks/gpu_check.sh) here, for a lent GPU machine that has its own torch
# (2.11, Python 3.12) and no package index: wheels of this checkout's distributions and of the pure-Python
# (or cp312) dependencies that machine lacks go to .gpu/whl; the reference checkout, if any, is .gpu/ref.
# .gpu/ is git-ignored locally (.git/info/exclude) and carried to the machine.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-python3}
rm -rf .gpu/whl && mkdir -p .gpu/whl
"$PY" -m pip wheel -q --no-deps --no-build-isolation -w .gpu/whl . plugins/nectargan-models plugins/nectargan-losses \
    plugins/nectargan-translate plugins/nectargan-pix2pix plugins/nectargan-cyclegan tests/plugins/nectargan-toy
rm -rf build plugins/*/build tests/plugins/*/build
# What the GPU image lacks (its package list: the device README's KINDS.md): pydantic and its parts, the
# importlib-metadata backport the core imports, dominate (the reference's util/html.py).
read -r PYD PYDC < <("$PY" -c "import pydantic, pydantic_core; print(pydantic.VERSION, pydantic_core.__version__)")
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .gpu/whl \
    "pydantic==$PYD" "pydantic-core==$PYDC" annotated-types typing-inspection importlib-metadata lazy-importer dominate
ls -la .gpu/whl
du -sh .gpu
