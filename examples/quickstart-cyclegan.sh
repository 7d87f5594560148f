#!/usr/bin/env bash
# NectarGAN CycleGAN quickstart, from a fresh clone: install, make two synthetic unpaired domains, train
# CycleGAN on the CPU for a few minutes, test both directions, and print where everything is.
#
#   bash examples/quickstart-cyclegan.sh            (VENV=path to use another virtual environment)
set -euo pipefail
cd "$(dirname "$0")/.."

venv="${VENV:-.venv}"
if [ ! -x "$venv/bin/python" ]; then
    echo "==> creating $venv"
    python3 -m venv "$venv"
fi
echo "==> installing nectargan-core and the plugins (torch is pinned by constraints.txt)"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -c constraints.txt \
    . ./plugins/nectargan-models ./plugins/nectargan-losses ./plugins/nectargan-translate ./plugins/nectargan-pix2pix ./plugins/nectargan-cyclegan
nectargan="$venv/bin/nectargan"

"$nectargan" plugins list

if [ ! -d quickstart/data-unpaired/trainA ]; then
    echo "==> making the synthetic unpaired dataset (A: label maps, B: renderings of other scenes)"
    "$nectargan" data synth quickstart/data-unpaired --unpaired --count 150 --size 64 --seed 0
fi
"$nectargan" data check quickstart/data-unpaired --quick

echo "==> training (Ctrl-C stops cleanly; resume with: $nectargan train --resume latest --output-dir quickstart/runs)"
"$nectargan" train -c examples/quickstart-cyclegan.yaml

run_dir=$("$venv/bin/python" -c "from nectargan_core import latest_run; print(latest_run('quickstart/runs', 'quickstart-cyclegan').path)")
for direction in AtoB BtoA; do
    echo "==> testing $run_dir, $direction"
    "$nectargan" test "$run_dir" --direction "$direction" --grid
done

echo
echo "Results in $run_dir:"
echo "  example grids, one per epoch (rows real_A | fake_B | rec_A, then real_B | fake_A | rec_B): $run_dir/examples/"
echo "  test outputs, grids and cycle-reconstruction metrics, per direction:                    $run_dir/test/"
echo "  metrics log (JSON lines):                                                               $run_dir/metrics.jsonl"
echo "  checkpoints:                                                                            $run_dir/checkpoints/"
