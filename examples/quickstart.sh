#!/usr/bin/env bash
# NectarGAN quickstart, from a fresh clone: install, make a synthetic paired dataset, train pix2pix
# on the CPU for a few minutes, evaluate it on the test split, and print where everything is.
#
#   bash examples/quickstart.sh            (VENV=path to use another virtual environment)
#   TORCH_INDEX=https://download.pytorch.org/whl/cpu bash examples/quickstart.sh
#                                           (no GPU: PyTorch's CPU build; PyPI's default brings ~4 GB of CUDA)
# Run it again after an interruption: it resumes the run (a finished run is not trained again).
set -euo pipefail
cd "$(dirname "$0")/.."

venv="${VENV:-.venv}"
if [ ! -x "$venv/bin/python" ]; then
    echo "==> creating $venv"
    python3 -m venv "$venv"
fi
echo "==> installing nectargan-core and the plugins (torch is pinned by constraints.txt)"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -c constraints.txt \
    ${TORCH_INDEX:+--extra-index-url "$TORCH_INDEX"} \
    . ./plugins/nectargan-models ./plugins/nectargan-losses ./plugins/nectargan-translate ./plugins/nectargan-pix2pix
nectargan="$venv/bin/nectargan"

"$nectargan" plugins list

if [ ! -d quickstart/data/train ]; then
    echo "==> making the synthetic dataset"
    "$nectargan" data synth quickstart/data --count 400 --size 64 --seed 0
fi

# one torch thread or one per core, whichever trains faster here now (a busy machine: one)
threads=$("$venv/bin/python" examples/fastest_threads.py)

if "$venv/bin/python" -c "from nectargan_core import latest_run; latest_run('quickstart/runs', 'quickstart')" 2>/dev/null; then
    echo "==> resuming the quickstart run (an interrupted run continues; a finished one is not trained again)"
    "$nectargan" train --resume latest:quickstart --output-dir quickstart/runs --set run.threads="$threads"
else
    echo "==> training (Ctrl-C stops cleanly; running this script again resumes)"
    "$nectargan" train -c examples/quickstart.yaml --set run.threads="$threads"
fi

run_dir=$("$venv/bin/python" -c "from nectargan_core import latest_run; print(latest_run('quickstart/runs', 'quickstart').path)")
echo "==> evaluating $run_dir on the test split"
"$nectargan" test "$run_dir" --checkpoint best --split test

echo
echo "Results in $run_dir:"
echo "  example grids (input | output | target), one per epoch: $run_dir/examples/"
echo "  test metrics and outputs:                              $run_dir/test/"
echo "  metrics log (JSON lines):                              $run_dir/metrics.jsonl"
echo "  checkpoints:                                           $run_dir/checkpoints/"
