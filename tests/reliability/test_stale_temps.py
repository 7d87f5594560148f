"""Every writer deletes the temp files a killed run of it left (docs/reliability.md, "Every output is complete
or absent, and re-runnable").

Each command is SIGKILLed just before the k-th ``os.fsync`` (every atomic write
fsyncs its temp file before renaming it, so a complete ``.NAME.tmp-PID`` is
left behind, as a kill or a power loss mid-write leaves it); the same command
run again must succeed and leave no ``.tmp-`` file anywhere in what it writes.
``data split --copy`` and ``test`` left theirs for good before (issue 13).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Callable

import pytest

from fault_locations import run_nectargan
from kill_points import kill_at_call, tiny_pix2pix_run
from nectargan_translate.data_cli import data_group
from support import cli_runner


def temps(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if ".tmp-" in p.name)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    return tiny_pix2pix_run(tmp_path_factory)


@pytest.fixture(scope="module")
def flat_folder(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("flat")
    made = cli_runner().invoke(data_group, ["synth", str(root / "set"), "--count", "12", "--size", "16",
                                           "--val", "0", "--test", "0"])
    assert made.exit_code == 0, made.output
    return root / "set" / "train"


#: name -> (arguments given the run dir, a prepared folder and the output root; the fsync to kill at;
#: where the killed run's temp must be, relative to the output root)
CASES: dict[str, tuple[Callable[[Path, Path, Path], tuple], int, str]] = {
    # fsync 1 and 2: the split plan and its folder; 3: the first copied image
    "data split --copy": (lambda run, flat, out: ("data", "split", shutil.copytree(flat, out / "set"), "--copy",
                                                  "--seed", "1"), 3, "set/"),
    # test builds its results in a staging folder beside --out (.o.tmp-PID) and renames it into place whole
    "test --grid": (lambda run, flat, out: ("test", run, "--split", "train", "--out", out / "o", "--grid",
                                            "--device", "cpu"), 1, ".o.tmp-"),
    "predict": (lambda run, flat, out: ("predict", run, flat, "-o", out / "p", "--device", "cpu"), 1, "p/"),
    "report": (lambda run, flat, out: ("report", run, "-o", out / "r" / "report.html"), 1, "r/"),
    "plot": (lambda run, flat, out: ("plot", run, "-o", out / "plots"), 1, "plots/"),
    "config init": (lambda run, flat, out: ("config", "init", "-o", out / "c" / "run.yaml"), 1, "c/"),
}


#: Commands that start torch twice take tens of seconds on a shared 2-core machine: the long series only.
SLOW = {"predict", "plot"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n for n in CASES])
def test_a_rerun_deletes_the_temp_files_its_killed_run_left(name, run_dir, flat_folder, tmp_path):
    args, at, where = CASES[name]
    out = tmp_path / "out"
    out.mkdir()
    command = args(run_dir, flat_folder, out)
    assert kill_at_call(command, "os:fsync", at), f"{name} finished before the kill point"
    left = temps(out)
    assert left and all(path.startswith(where) for path in left), left  # the kill left a temp where it writes
    again = run_nectargan(*command)
    assert again.returncode == 0, again.stderr[-2000:]
    assert temps(out) == [], f"{name} left the killed run's temp files"


def test_a_test_killed_between_its_two_renames_loses_no_results(tmp_path):
    """Killed after moving the earlier results aside (``.o.old-PID``) and before renaming the new ones in:
    the next test puts the earlier results back where nothing took their place, and deletes them where
    the new results did."""
    import subprocess
    import sys

    from nectargan_translate.tester import recover_moved_aside

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True)
    pid = int(dead.stdout)
    out = tmp_path / "o"
    aside = tmp_path / f".o.old-{pid}"
    aside.mkdir()
    (aside / "metrics.json").write_text("earlier")
    recover_moved_aside(out)
    assert (out / "metrics.json").read_text() == "earlier" and not aside.exists()

    aside.mkdir()
    (aside / "metrics.json").write_text("older still")
    recover_moved_aside(out)
    assert (out / "metrics.json").read_text() == "earlier" and not aside.exists()
