"""Distributed liveness: a hung rank, a killed launcher, and timeouts that cannot work.

Real ``nectargan train --nproc 2`` runs of the toy trainer on gloo:

* one rank stops itself with SIGSTOP (a hung process) at a chosen point, so
  that the other waits in the control group (where it once waited 6 hours)
  or in the gradient all-reduce: the run ends everywhere within
  ``distributed.timeout_s`` plus a margin, the last line names the rank that
  stopped answering, no rank is left behind, and ``status.json`` says
  ``failed``;
* the launcher is killed with SIGKILL (``kill -9``, the OOM killer): within
  seconds no rank is left, and they stopped gracefully (a checkpoint,
  ``status.json`` interrupted) instead of training on as orphans;
* ``distributed.timeout_s`` values that cannot work are refused at config time.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from nectargan_core.checkpoint import load_checkpoint
from series import long_series
from support import alive, make_fake_dist, rank_pids, run_cli, start_cli, state

pytestmark = pytest.mark.skipif(not torch.distributed.is_available(), reason="torch.distributed unavailable")

TIMEOUT_S = 5
#: What ending may take beyond the timeout: finding the silent rank (2.5 heartbeats), the failed
#: rank's exit, the agent noticing and stopping the others, and interpreter teardown, on a busy machine.
MARGIN_S = 40


def start(tmp_path: Path, *settings: str) -> tuple[subprocess.Popen, dict[int, int]]:
    """A long 2-process toy run; returns once both ranks run and the checkpoint of step 5 is written."""
    base = ["run.device=cpu", "visualizers=[]", "toy.samples=64", "toy.batch_size=4", "loop.epochs=1000",
            "checkpoint.every_steps=5", f"distributed.timeout_s={TIMEOUT_S}", "toy.step_sleep=0.05", *settings]
    launcher = start_cli("train", "--trainer", "toy", *(a for s in base for a in ("--set", s)), "--nproc", "2",
                         cwd=tmp_path, until=tmp_path / "runs/run/version_0/checkpoints")
    ranks = rank_pids(launcher.pid)
    assert sorted(ranks) == [0, 1]
    return launcher, ranks


def finish(launcher: subprocess.Popen, ranks: dict[int, int]) -> None:
    """Make sure nothing of a run outlives the test, whatever happened."""
    for pid in ranks.values():
        if alive(pid):
            os.kill(pid, signal.SIGKILL)
    if launcher.poll() is None:
        launcher.kill()
        launcher.communicate()


def wait_for_the_end(launcher: subprocess.Popen, ranks: dict[int, int]) -> tuple[str, float, list[int]]:
    """After a rank stopped answering: the launcher's stderr, the seconds it took to end, and the ranks left."""
    began = time.monotonic()
    try:
        _, stderr = launcher.communicate(timeout=TIMEOUT_S + MARGIN_S + 60)
    except subprocess.TimeoutExpired:
        pytest.fail("the run did not end after a rank stopped answering")
    took = time.monotonic() - began
    gone = time.monotonic() + 5
    while any(alive(pid) for pid in ranks.values()) and time.monotonic() < gone:
        time.sleep(0.1)
    return stderr, took, [rank for rank, pid in ranks.items() if alive(pid)]


def stop_one_rank(tmp_path: Path, stopped: int, where: str) -> None:
    """Rank ``stopped`` SIGSTOPs itself in step 7 (after the checkpoint of step 5), at ``where``:
    ``before_backward`` leaves the other rank waiting in the gradient all-reduce (the data plane),
    ``after_update`` in the end-of-step stop agreement (the gloo control group, which once waited 6 h)."""
    launcher, ranks = start(tmp_path, "toy.stop_at_step=7", f"toy.stop_rank={stopped}", f"toy.stop_where={where}",
                            "loop.log_every_steps=1000")
    other = 1 - stopped
    try:
        deadline = time.monotonic() + 60
        while state(ranks[stopped]) != "T":
            assert time.monotonic() < deadline and launcher.poll() is None, "the rank did not stop itself"
            time.sleep(0.05)
        stderr, took, left = wait_for_the_end(launcher, ranks)
    finally:
        finish(launcher, ranks)
    assert launcher.returncode == 1, stderr
    assert took < TIMEOUT_S + MARGIN_S, f"the run took {took:.0f} s to end after rank {stopped} stopped"
    assert not left, f"rank(s) {left} outlived the run"
    assert "Traceback" not in stderr
    last = stderr.strip().splitlines()[-1]
    assert last.startswith("error: rank "), stderr
    assert f"rank {stopped} (pid {ranks[stopped]} on " in last and "stopped answering" in last, last
    assert "its process is stopped (SIGSTOP; last seen at step" in last, last
    assert f"(found by rank {other})" in last, last
    status = json.loads((tmp_path / "runs/run/version_0/status.json").read_text())
    assert status["status"] == "failed", status
    assert f"rank {stopped} (pid {ranks[stopped]}" in status["error"], status
    for checkpoint in (tmp_path / "runs/run/version_0/checkpoints").glob("epoch*.pt"):
        load_checkpoint(checkpoint)


@pytest.mark.slow
def test_a_rank_stopped_while_the_other_waits_in_the_control_group_ends_the_run_naming_it(tmp_path: Path) -> None:
    stop_one_rank(tmp_path, stopped=1, where="after_update")


STOPPER = """
import os
import signal

from nectargan_core import hookimpl


class Stopper:
    '''SIGSTOPs rank STOP_RANK as epoch STOP_EPOCH starts (after the ranks agreed to go on).'''

    @hookimpl
    def on_epoch_start(self, trainer, epoch):
        if epoch == int(os.environ["STOP_EPOCH"]) and os.environ.get("RANK") == os.environ["STOP_RANK"]:
            os.kill(os.getpid(), signal.SIGSTOP)


@hookimpl
def register_callbacks(register):
    register("sigstop", "sigstop_plugin:Stopper", description="SIGSTOPs a rank as an epoch starts")
"""


@pytest.mark.slow
def test_a_pix2pix_rank_stopped_before_a_forward_pass_ends_the_run_naming_it(tmp_path: Path) -> None:
    """pix2pix's networks hold BatchNorm buffers, so the other rank next waits in DDP's buffer broadcast of the
    forward pass, whose error ("Application timeout caused pair closure") names no transport: the run ended
    with a traceback and a last line naming no rank (a stranger's SIGSTOP, 3 of 4 tries)."""
    made = run_cli("data", "synth", str(tmp_path / "data"), "--count", "24", "--size", "32", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    site = make_fake_dist(tmp_path / "site", "nectargan-sigstop", "sigstop_plugin", STOPPER, "sigstop")
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])),
           "STOP_EPOCH": "3", "STOP_RANK": "1"}
    settings = ["data.root=data", "visualizers=[]", "callbacks={sigstop: {}}", "loop.epochs=1000",
                "checkpoint.every_epochs=1", f"distributed.timeout_s={TIMEOUT_S}", "loop.log_every_steps=1000"]
    launcher = start_cli("train", "--preset", "pix2pix-tiny", *(a for s in settings for a in ("--set", s)),
                         "--nproc", "2", cwd=tmp_path, until=tmp_path / "runs/run/version_0/checkpoints", env=env)
    ranks = rank_pids(launcher.pid)
    try:
        assert sorted(ranks) == [0, 1]
        stderr, _, left = wait_for_the_end(launcher, ranks)
    finally:
        finish(launcher, ranks)
    assert launcher.returncode == 1 and not left, stderr
    assert "Traceback" not in stderr, stderr
    last = stderr.strip().splitlines()[-1]
    assert last.startswith("error: rank ") and f"rank 1 (pid {ranks[1]} on " in last, stderr
    assert "its process is stopped (SIGSTOP; last seen at step" in last, last
    status = json.loads((tmp_path / "runs/run/version_0/status.json").read_text())
    assert status["status"] == "failed" and f"rank 1 (pid {ranks[1]}" in status["error"], status


@long_series
@pytest.mark.parametrize("stopped, where", [(1, "before_backward"), (0, "before_backward"), (0, "after_update")])
def test_long_series_of_stopped_ranks(tmp_path: Path, stopped: int, where: str) -> None:
    stop_one_rank(tmp_path, stopped, where)


@pytest.mark.slow
def test_killing_the_launcher_stops_every_rank_gracefully(tmp_path: Path) -> None:
    launcher, ranks = start(tmp_path)
    try:
        os.kill(launcher.pid, signal.SIGKILL)
        launcher.communicate(timeout=60)  # the ranks hold its pipes until they are gone
        killed = time.monotonic()
        while any(alive(pid) for pid in ranks.values()) and time.monotonic() - killed < 20:
            time.sleep(0.1)
        took = time.monotonic() - killed
        left = [rank for rank, pid in ranks.items() if alive(pid)]
    finally:
        finish(launcher, ranks)
    assert not left and took < 20, f"rank(s) {left} outlived the launcher ({took:.0f} s)"
    status = json.loads((tmp_path / "runs/run/version_0/status.json").read_text())
    assert status["status"] == "interrupted" and status["reason"] == "SIGTERM", status
    saved = load_checkpoint(tmp_path / status["checkpoint"])
    assert saved["global_step"] == status["step"] and len(saved["ranks"]) == 2


@pytest.mark.parametrize("value, message", [
    ("0.001", "distributed.timeout_s: Input should be greater than or equal to 1 (got 0.001)"),
    ("Infinity", 'distributed.timeout_s: must be a finite number (got "Infinity")'),
    ("nan", 'distributed.timeout_s: must be a finite number (got "nan")'),
    (".inf", "distributed.timeout_s: Input should be a finite number (got inf)"),
    ("1e30", "distributed.timeout_s: Input should be less than or equal to 604800 (got 1e+30)"),
])
def test_timeouts_that_cannot_work_are_refused_at_config_time(tmp_path: Path, value: str, message: str) -> None:
    config = tmp_path / "run.yaml"
    config.write_text("trainer: toy\n")
    result = run_cli("config", "validate", str(config), "--set", f"distributed.timeout_s={value}")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [f"error: --set distributed.timeout_s={value}: {message}"]


HEARTBEAT_AT_EXIT = """
import os, sys, time
import torch.distributed as dist
from nectargan_core.distributed import Liveness
master = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(master.port))
liveness = Liveness.start(0, 2, "test/alive", timeout_s=2)
assert liveness is not None
liveness.interval = 0  # write without pause: the thread is almost always inside the store call


class SlowTeardown:
    # Deleted as the interpreter finalizes; sleeping there (without the GIL) lets the heartbeat come out
    # of its store call at the moment CPython ends such threads: the abort becomes certain, not likely.
    def __del__(self, sleep=time.sleep):
        sleep(0.5)


slow_teardown = SlowTeardown()
time.sleep(0.2)
if sys.argv[1] == "stop":
    liveness.stop()
    assert not liveness._thread.is_alive()
elif sys.argv[1] == "raise":
    raise SystemExit(3)
"""


@pytest.mark.parametrize("how", ["stop", "exit", "raise"])
def test_the_heartbeat_never_aborts_the_process_at_exit(tmp_path: Path, how: str) -> None:
    """A daemon thread still in a C++ store call when the interpreter finalizes is unwound by CPython,
    and the process dies with SIGABRT ("terminate called without an active exception") after a run
    that had finished (it failed CI once). Whether the run closes the heartbeat (stop), simply exits
    (exit), or exits on an error without closing it (raise), the process ends with its own code."""
    codes = {"stop": 0, "exit": 0, "raise": 3}
    for _ in range(2):
        done = subprocess.run([sys.executable, "-c", HEARTBEAT_AT_EXIT, how], capture_output=True, text=True,
                              timeout=60)
        assert "terminate called" not in done.stderr
        assert done.returncode == codes[how], done.stderr


def test_a_rank_alive_but_slower_than_the_timeout_is_named_as_a_possible_cause(tmp_path: Path) -> None:
    """Both ranks beat at the same step, so no rank can be named as stopped: the line says that a rank may have
    been slower than distributed.timeout_s (it said "another rank probably failed", and none had)."""
    settings = ("run.device=cpu", "visualizers=[]", "loop.epochs=2", "distributed.timeout_s=1",
                "toy.sleep_at_step=3", "toy.sleep_rank=1", "toy.sleep_s=6")
    done = run_cli("train", "--trainer", "toy", *(a for s in settings for a in ("--set", s)), "--nproc", "2",
                   cwd=tmp_path, timeout=180)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert "or took longer than distributed.timeout_s=1 s to get here: raise it if a step, validation, a " \
           "checkpoint or starting DataLoader workers can take that long" in last, done.stderr
    assert json.loads((tmp_path / "runs/run/version_0/status.json").read_text())["status"] == "failed"
