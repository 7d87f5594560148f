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
# The reference at the commit issue 21 measured (2a7afba, its 2025 DDP rewrite), for gpu_check.sh final's
# side-by-side table: from a git directory of its history (REFERENCE_GIT, else a mirror brought by the session's
# fetch tool), or a checkout at that commit (REFERENCE_DIR). Without one the table has no reference rows.
REF_COMMIT=2a7afba2895d52556dd5dfe07e8555ef657ced6f
REFERENCE_GIT=${REFERENCE_GIT:-$(ls -d /work/.mirror/junyanz+pytorch-CycleGAN-and-pix2pix* 2>/dev/null | head -1 || true)}
rm -rf .gpu/ref2a
if [ -n "${REFERENCE_DIR:-}" ]; then
    mkdir -p .gpu/ref2a && cp -r "$REFERENCE_DIR"/{train.py,options,models,data,util} .gpu/ref2a/
elif [ -n "$REFERENCE_GIT" ] && git --git-dir="$REFERENCE_GIT" cat-file -e "$REF_COMMIT^{commit}" 2>/dev/null; then
    mkdir -p .gpu/ref2a
    git --git-dir="$REFERENCE_GIT" archive "$REF_COMMIT" train.py options models data util | tar -x -C .gpu/ref2a
else
    echo "note: no reference checkout (set REFERENCE_GIT to a git directory holding $REF_COMMIT, or REFERENCE_DIR" \
         "to a checkout of it): gpu_check.sh final will time ours alone"
fi
ls -la .gpu/whl
du -sh .gpu
