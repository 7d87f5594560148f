#!/usr/bin/env bash
# The prepared GPU check of issue 21, run from the checkout's root on a lent H100/H200 whose Python has its own
# torch (prepare here first: benchmarks/gpu_prepare.sh). Everything it measures is written under $OUT.
#   bash benchmarks/gpu_check.sh [steps|e2e|all]
#     steps: the CUDA tests (real graphs), then benchmarks/gpu.py's graph section (eager vs replayed step,
#            fp32/bf16, 256x1 and 256x16, 200-step parity)
#     e2e:   benchmarks/e2e.py against the reference's train.py (.gpu/ref) on the same data
set -u
OUT=${OUT:-/tmp/nectargan-gpu-out}
mkdir -p "$OUT"
what=${1:-all}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .gpu/whl/*.whl \
    || { echo "installing the carried wheels failed"; exit 1; }
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 PATH=/tmp/site/bin:$PATH
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
python3 -c "import torch, sys; print('torch', torch.__version__, 'python', sys.version.split()[0])" | tee -a "$OUT/gpu.txt"
status=0
if [ "$what" = steps ] || [ "$what" = all ]; then
    timeout 150 python3 -m pytest -q -s -p no:cacheprovider --tb=line tests/kit/test_stepgraph_cuda.py \
        tests/cyclegan/test_cyclegan_pool.py 2>&1 | tee "$OUT/tests.log" | grep -vE "^\s*$|^\.+$" | tail -30 || status=1
    timeout 170 python3 benchmarks/gpu.py --only graphs --quick --json "$OUT/steps.json" 2>&1 | tee "$OUT/steps.log" \
        | grep -v "^$" | tail -40 || status=1
fi
if [ "$what" = e2e ] || [ "$what" = all ]; then
    timeout 420 python3 benchmarks/e2e.py --device cuda --reference .gpu/ref --json "$OUT/e2e.json" 2>&1 \
        | tee "$OUT/e2e.log" | tail -60 || status=1
fi
exit $status
