#!/usr/bin/env bash
# The prepared GPU check of issue 21, run from the checkout's root on a lent H100/H200 whose Python has its own
# torch (prepare here first: benchmarks/gpu_prepare.sh). Everything it measures is written under $OUT.
#   bash benchmarks/gpu_check.sh [steps|final]
#     steps: the CUDA tests (real graphs), then benchmarks/gpu.py's graph section (eager vs replayed step,
#            fp32/bf16, 256x1 and 256x16) and the 200-step parity
#     final: benchmarks/e2e.py against the reference's train.py (.gpu/ref2a, commit 2a7afba) on the same data
#            first, then where the first epoch's start goes (gpu.py first-steps: fresh processes, cuDNN
#            autotuning vs heuristics), the CUDA tests, the parity, and the loader alone (data.cache off vs device)
# Worst case about 580 s in all (each part's limit below): run it with the device tool's timeout_s=595.
# Each part has its own time limit, so a slow one costs only its own figures.
set -u
OUT=${OUT:-/tmp/nectargan-gpu-out}
mkdir -p "$OUT"
what=${1:-final}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .gpu/whl/*.whl \
    || { echo "installing the carried wheels failed"; exit 1; }
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 PATH=/tmp/site/bin:$PATH
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
python3 -c "import torch, sys; print('torch', torch.__version__, 'python', sys.version.split()[0])" | tee -a "$OUT/gpu.txt"
status=0
tests() {
    timeout "$1" python3 -m pytest -q -s -p no:cacheprovider --tb=line tests/kit/test_stepgraph_cuda.py \
        tests/cyclegan/test_cyclegan_pool.py tests/translate/test_data_cache.py tests/pix2pix/test_pix2pix_cuda_graphs.py \
        -k "cuda or stepgraph or captured or wait" \
        2>&1 | tee "$OUT/tests.log" | grep -E "^\[graphs\]|passed|failed|FAILED|Error" | tail -25 || status=1
}
if [ "$what" = steps ]; then
    tests 150
    timeout 170 python3 benchmarks/gpu.py --only graphs --quick --json "$OUT/steps.json" 2>&1 | tee "$OUT/steps.log" \
        | grep -v "^$" | tail -40 || status=1
fi
if [ "$what" = final ]; then
    # The table of the goals (each scenario: the reference recipe against the reference itself), then
    # at 256x1 the recipe with cuDNN's heuristics (no autotuning at the start) and the plain defaults.
    reference=(--reference .gpu/ref2a)
    [ -f .gpu/ref2a/train.py ] || { reference=(); echo "no .gpu/ref2a/train.py: timing ours without the reference"; }
    timeout 250 python3 benchmarks/e2e.py --device cuda ${reference[@]+"${reference[@]}"} --run-timeout 70 --work-dir /tmp/e2e \
        --recipe-only --json "$OUT/e2e.json" 2>&1 | tee "$OUT/e2e.log" | grep -vE "^\s*$|^  .* \.\.\.$" | tail -40 \
        || status=1
    timeout 80 python3 benchmarks/e2e.py --device cuda --run-timeout 40 --work-dir /tmp/e2e --scenarios pix2pix-256x1 \
        --no-defaults --variant "recipe-heuristics=--preset pix2pix-reference --set precision.cudnn_benchmark=off" \
        --variant "defaults=--trainer pix2pix" --json "$OUT/e2e-more.json" 2>&1 | tee "$OUT/e2e-more.log" \
        | grep -vE "^\s*$|^  .* \.\.\.$" | tail -12 || status=1
    timeout 95 python3 benchmarks/gpu.py --only first-steps --json "$OUT/first.json" 2>&1 | tee "$OUT/first.log" \
        | grep "\[8\]" || status=1
    tests 60
    timeout 40 python3 benchmarks/gpu.py --only graph-parity --json "$OUT/parity.json" 2>&1 | grep "7b\]" || status=1
    timeout 35 python3 benchmarks/data_cache.py --device cuda --count 480 --batch 16 --workers 4 --epochs 3 \
        --caches off,device 2>&1 | tee "$OUT/cache.log" | tail -8 || status=1
fi
exit $status
