"""``nectargan runs``: every run under a folder, in every state a run can be left in."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from nectargan_core.rundir import RunDir
from nectargan_core.runlock import RunLock
from runs_support import StopAt, make_run
from support import run_cli

HEADER = ["RUN", "STATUS", "EPOCHS", "STEPS", "BEST", "LATEST CHECKPOINT"]


def dead_pid() -> int:
    """The id of a process that has exited and been reaped."""
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Runs left finished, failed, interrupted, killed (status running, process gone) and running.

    "Running" means the run's lock is held (by this process here); a status that says running
    with nobody holding the lock is a killed run.
    """
    root = tmp_path_factory.mktemp("runs") / "runs"
    done = make_run(root, name="done")
    for version in (2, 10):  # versions sort as numbers
        shutil.copytree(done, done.with_name(f"version_{version}"))
    with pytest.raises(RuntimeError, match="toy failure at step 3"):
        make_run(root, name="broken", fail_at_step=3)
    make_run(root, StopAt(6), name="stopped")
    ghost = RunDir(make_run(root, name="ghost", epochs=1))
    ghost.write_status("running", epoch=0, step=0)
    status = json.loads(ghost.status_file.read_text())
    ghost.status_file.write_text(json.dumps({**status, "pid": dead_pid()}))
    live = RunDir(make_run(root, name="live", epochs=1))
    live.write_status("running", epoch=0, step=0)  # this process, which holds the run's lock as a trainer does
    lock = RunLock.acquire(live.path)
    yield root
    lock.release()


def listed(root) -> list[dict]:
    result = run_cli("runs", str(root), "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_table_lists_each_run_by_name_then_version_number(runs):
    result = run_cli("runs", str(runs))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["RUN", "STATUS", "EPOCHS", "STEPS", "BEST", "LATEST", "CHECKPOINT"]
    rows = [line.split("  ") for line in lines[1:]]
    cells = [[cell.strip() for cell in row if cell.strip()] for row in rows]
    assert [row[0] for row in cells] == ["broken/version_0", "done/version_0", "done/version_2",
                                         "done/version_10", "ghost/version_0", "live/version_0",
                                         "stopped/version_0"]
    by_run = {row[0]: row[1:] for row in cells}
    best = min(json.loads(line)["metrics"]["mse"] for line in (runs / "done" / "version_0" / "metrics.jsonl")
               .read_text().splitlines() if '"kind":"val"' in line)
    assert by_run["done/version_0"] == [
        "finished", "3/3", "12", f"val/mse {best:.4g}",
        str(runs / "done" / "version_0" / "checkpoints" / "epoch0003-step00000012.pt")]
    assert by_run["broken/version_0"] == ["failed", "0/3", "2", "-", "-"]
    assert by_run["stopped/version_0"][:3] == ["interrupted", "1/3", "6"]
    assert by_run["stopped/version_0"][4].endswith("epoch0001-step00000006.pt")
    assert by_run["ghost/version_0"][:3] == ["interrupted (process gone)", "1/1", "4"]
    assert by_run["live/version_0"][:3] == ["running", "1/1", "4"]


def test_json_gives_every_field(runs):
    summaries = {f"{s['name']}/{s['version']}": s for s in listed(runs)}
    assert list(summaries) == ["broken/0", "done/0", "done/2", "done/10", "ghost/0", "live/0", "stopped/0"]
    assert set(summaries["done/0"]) == {
        "name", "version", "path", "status", "note", "reason", "error", "updated", "epochs", "epochs_total",
        "steps", "best_metric", "best_mode", "best_value", "latest_checkpoint", "best_checkpoint"}
    done = summaries["done/0"]
    assert (done["status"], done["epochs"], done["steps"], done["best_metric"]) == ("finished", 3, 12, "val/mse")
    assert done["best_checkpoint"] == str(runs / "done" / "version_0" / "checkpoints" / "best.pt")
    assert summaries["broken/0"]["error"] == "RuntimeError: toy failure at step 3"
    assert (summaries["stopped/0"]["status"], summaries["stopped/0"]["reason"]) == ("interrupted", "stopped by test")
    assert (summaries["ghost/0"]["status"], summaries["ghost/0"]["note"]) == ("interrupted", "process gone")
    assert (summaries["live/0"]["status"], summaries["live/0"]["note"]) == ("running", None)


def test_empty_and_missing_folders(tmp_path):
    empty = run_cli("runs", str(tmp_path))
    assert empty.returncode == 0
    assert empty.stdout.strip() == f"no runs under {tmp_path} (runs live in {tmp_path}/NAME/version_N)"
    assert json.loads(run_cli("runs", str(tmp_path), "--json").stdout) == []
    missing = run_cli("runs", cwd=tmp_path)
    assert missing.returncode == 1
    assert missing.stderr.strip().splitlines() == [
        "error: runs: folder not found; runs are written under run.output_dir (default: runs)"]


PROBE = """
import atexit, sys
atexit.register(lambda: sys.stderr.write(
    "HEAVY:" + ",".join(m for m in ("torch", "matplotlib") if m in sys.modules) + "\\n"))
from nectargan_core.cli.main import main
sys.argv = ["nectargan", *sys.argv[1:]]
main()
"""


@pytest.mark.parametrize("args", [["--help"], ["plugins", "list"], ["runs"], ["runs", "--help"],
                                  ["plot", "--help"], ["report", "--help"]])
def test_listing_and_help_import_neither_torch_nor_matplotlib(args, runs):
    result = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=60,
                            cwd=runs.parent)
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip().splitlines()[-1] == "HEAVY:"
