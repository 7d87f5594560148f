#!/usr/bin/env bash
# NectarGAN CycleGAN quickstart, from a fresh clone: install, make two synthetic unpaired domains, train
# CycleGAN on the CPU for a few minutes, test both directions, and print where everything is.
#
#   bash examples/quickstart-cyclegan.sh            (VENV=path to use another virtual environment)
#   TORCH_INDEX=https://download.pytorch.org/whl/cpu bash examples/quickstart-cyclegan.sh
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
    . ./plugins/nectargan-models ./plugins/nectargan-losses ./plugins/nectargan-translate ./plugins/nectargan-pix2pix ./plugins/nectargan-cyclegan
nectargan="$venv/bin/nectargan"

"$nectargan" plugins list

if [ ! -d quickstart/data-unpaired/trainA ]; then
    echo "==> making the synthetic unpaired dataset (A: label maps, B: renderings of other scenes)"
    "$nectargan" data synth quickstart/data-unpaired --unpaired --count 150 --size 64 --seed 0
fi
"$nectargan" data check quickstart/data-unpaired --quick

# one torch thread or one per core, whichever trains faster here now (a busy machine: one)
threads=$("$venv/bin/python" examples/fastest_threads.py)

if "$venv/bin/python" -c "from nectargan_core import latest_run; latest_run('quickstart/runs', 'quickstart-cyclegan')" 2>/dev/null; then
    echo "==> resuming the quickstart-cyclegan run (an interrupted run continues; a finished one is not trained again)"
    "$nectargan" train --resume latest:quickstart-cyclegan --output-dir quickstart/runs --set run.threads="$threads"
else
    echo "==> training (Ctrl-C stops cleanly; running this script again resumes)"
    "$nectargan" train -c examples/quickstart-cyclegan.yaml --set run.threads="$threads"
fi

run_dir=$("$venv/bin/python" -c "from nectargan_core import latest_run; print(latest_run('quickstart/runs', 'quickstart-cyclegan').path)")
echo "==> testing $run_dir in both directions"
"$nectargan" test "$run_dir" --grid

echo
echo "Results in $run_dir:"
echo "  example grids, one per epoch (rows real_A | fake_B | rec_A, then real_B | fake_A | rec_B): $run_dir/examples/"
echo "  test outputs, grids and cycle-reconstruction metrics, per direction:                    $run_dir/test/"
echo "  metrics log (JSON lines):                                                               $run_dir/metrics.jsonl"
echo "  checkpoints:                                                                            $run_dir/checkpoints/"
