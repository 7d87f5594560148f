"""Double faults under ``--nproc``: a rank stopped (or killed) and then the launcher killed or stopped.

Real ``nectargan train --nproc 2`` runs of the toy trainer on gloo. A stopped
process cannot act on the SIGTERM its launcher's death sends it: one rank
stopped with ``kill -STOP`` and then the launcher killed left that rank
stopped for good (state T, parent 1), the other printed about 110 lines of
C++ backtraces from its heartbeat writing to the dead launcher's store, and
the last line named no rank. Every test here checks, from ``/proc``, that no
process of the run (ranks, their guards, anything they started) outlives it,
in any state; that no C++ backtrace reaches the terminal; that the last line
names the rank concerned; and that ``status.json`` is not left ``running``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from nectargan_core.checkpoint import load_checkpoint, verify_checkpoint
from support import make_fake_dist, rank_pids, run_cli, start_cli, state

pytestmark = pytest.mark.skipif(not torch.distributed.is_available() or not sys.platform.startswith("linux"),
                                reason="torch.distributed and /proc needed")

TIMEOUT_S = 5
#: How long every process of the run may take to end after the launcher died (a stopped rank is woken within
#: 0.2 s; then one step, the stop agreement, a checkpoint and interpreter teardown, on a busy 2-core machine).
END_S = 30
CPP_TEXT = ("frame #", "Exception raised from", "TCPStore.cpp", "(most recent call first)", "Traceback")


def descendants(root: int) -> set[int]:
    """Every process below ``root`` now (ranks, their guards, DataLoader workers), from ``/proc``."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry.name))
    found, todo = set(), [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def living(pids: set[int]) -> dict[int, str]:
    """Those of ``pids`` that still exist and are not zombies, with their state (stopped ones included)."""
    return {pid: s for pid in pids if (s := state(pid)) not in ("gone", "Z")}


class Run:
    """A background ``--nproc 2`` toy run and every process it made; :meth:`kill_all` leaves nothing behind."""

    def __init__(self, tmp_path: Path, *settings: str, env: dict[str, str] | None = None) -> None:
        base = ["run.device=cpu", "visualizers=[]", "toy.samples=64", "toy.batch_size=4", "loop.epochs=1000",
                "checkpoint.every_steps=5", f"distributed.timeout_s={TIMEOUT_S}", "toy.step_sleep=0.05",
                "loop.log_every_steps=1000", *settings]
        self.dir = tmp_path / "runs/run/version_0"
        self.launcher = start_cli("train", "--trainer", "toy", *(a for s in base for a in ("--set", s)),
                                  "--nproc", "2", cwd=tmp_path, until=self.dir / "checkpoints", env=env)
        self.ranks = rank_pids(self.launcher.pid)
        assert sorted(self.ranks) == [0, 1]
        deadline = time.monotonic() + 10  # each rank's guard starts as the rank joins the group
        while len(descendants(self.launcher.pid)) < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        self.processes = descendants(self.launcher.pid)
        self.stderr = ""

    def kill_launcher(self, sig: int = signal.SIGKILL) -> float:
        """Send the launcher ``sig``; returns when it is gone, and the time it was sent."""
        self.processes |= descendants(self.launcher.pid)
        sent = time.monotonic()
        os.kill(self.launcher.pid, sig)
        self.launcher.wait(timeout=60)
        return sent

    def wait_for_the_end(self, since: float, limit: float = END_S) -> tuple[float, dict[int, str]]:
        """Seconds until no process of the run was left (at most ``limit``), and those left then."""
        while living(self.processes) and time.monotonic() - since < limit:
            time.sleep(0.05)
        took = time.monotonic() - since
        left = living(self.processes)
        self.stderr = self.launcher.stderr.read() if not left else ""  # the ranks hold the pipe until they end
        return took, left

    def kill_all(self) -> None:
        """SIGKILL whatever is left (a stopped process too), so a failing test leaves no process behind."""
        for pid in living(self.processes | (descendants(self.launcher.pid) if self.launcher.poll() is None
                                            else set())):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        if self.launcher.poll() is None:
            self.launcher.kill()
        self.launcher.communicate()

    def status(self) -> dict:
        return json.loads((self.dir / "status.json").read_text())

    def checkpoints_intact(self) -> list[Path]:
        """Every checkpoint of the run verifies and loads; no temp file of a write is left in the folder."""
        folder = self.dir / "checkpoints"
        saved = sorted(folder.glob("*.pt"))
        for path in saved:
            verify_checkpoint(path)
            load_checkpoint(path)
        assert sorted(p.name for p in folder.iterdir()) == sorted([p.name for p in saved]
                                                                  + [p.name + ".json" for p in saved])
        return saved


@pytest.fixture
def runs():
    started: list[Run] = []
    yield started
    for run in started:
        run.kill_all()


def assert_quiet(stderr: str) -> list[str]:
    """No C++ backtrace, no traceback, and a handful of lines at most; returns the lines."""
    for text in CPP_TEXT:
        assert text not in stderr, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) <= 6, stderr
    return lines


def launcher_died(run: Run, tmp_path: Path) -> str:
    """The line the launcher's watchman prints once every rank has ended after the launcher died."""
    return (f"error: the launcher of this --nproc 2 run (pid {run.launcher.pid}) died (killed, or the out-of-memory "
            "killer) and every rank ended with it; checkpoints already written are kept: continue with nectargan "
            f"train --resume {tmp_path / 'runs/run/version_0'} --nproc 2")


def stopped_rank_woken(tmp_path: Path, runs: list, stopped: list[int]) -> None:
    """The issue's case: ranks ``stopped`` get SIGSTOP, then the launcher SIGKILL."""
    run = Run(tmp_path)
    runs.append(run)
    for rank in stopped:
        os.kill(run.ranks[rank], signal.SIGSTOP)
    while any(state(run.ranks[rank]) != "T" for rank in stopped):
        time.sleep(0.01)
    time.sleep(0.5)  # the others now wait for them in a collective
    took, left = run.wait_for_the_end(run.kill_launcher())
    assert not left, f"left behind after the launcher died (pid: state): {left}"
    assert took < END_S
    lines = assert_quiet(run.stderr)
    assert lines[-len(stopped) - 1] == launcher_died(run, tmp_path), run.stderr
    for rank, line in zip(stopped, lines[-len(stopped):]):
        assert line == (f"note: rank {rank} (pid {run.ranks[rank]}) was stopped (SIGSTOP) when its launcher (pid "
                        f"{run.launcher.pid}) died: sent it SIGTERM and SIGCONT so that it stopped with the others"), \
            run.stderr
    status = run.status()
    assert status["status"] == "interrupted" and status["reason"] == "SIGTERM", status
    saved = load_checkpoint(tmp_path / status["checkpoint"])
    assert saved["global_step"] == status["step"] and len(saved["ranks"]) == 2
    run.checkpoints_intact()


def test_a_rank_stopped_when_the_launcher_is_killed_is_woken_and_stops_with_the_other(tmp_path, runs) -> None:
    """Before: rank 1 stayed stopped for good (T, parent 1), rank 0 printed 153 lines (110 ``frame #``) and
    ended on its emergency-checkpoint line, its error line (naming no rank) recorded for a launcher that was gone,
    status ``failed``."""
    stopped_rank_woken(tmp_path, runs, [1])


@pytest.mark.parametrize("stopped", [pytest.param([0], marks=pytest.mark.slow), [0, 1]], ids=["rank0", "both"])
def test_stopped_rank_0_or_both_ranks_are_woken_when_the_launcher_is_killed(tmp_path, runs, stopped) -> None:
    """Before: rank 0 stopped for good and status.json ``running`` (rank 1 printed 151 lines of backtraces);
    with both stopped, nothing at all was left to act: both stayed stopped, status ``running``."""
    stopped_rank_woken(tmp_path, runs, stopped)


def test_a_rank_killed_with_the_launcher_is_named_by_the_survivor(tmp_path, runs) -> None:
    """Rank 1 and the launcher SIGKILLed together: the store is gone, so rank 0 names rank 1 from ``/proc``
    (it said "lost contact ... (the launcher names it)", to no launcher, and read the dead store)."""
    run = Run(tmp_path)
    runs.append(run)
    os.kill(run.ranks[1], signal.SIGKILL)
    took, left = run.wait_for_the_end(run.kill_launcher())
    assert not left, left
    lines = assert_quiet(run.stderr)
    assert lines[-2].startswith(f"error: rank 0: rank 1 (pid {run.ranks[1]} on "), run.stderr
    assert "has exited (" in lines[-2], lines[-2]  # "(its launcher, pid N, died)": the store was gone
    assert lines[-1] == launcher_died(run, tmp_path), run.stderr  # the watchman's line, with the resume command
    status = run.status()
    assert status["status"] == "failed" and f"rank 1 (pid {run.ranks[1]} on " in status["error"], status
    run.checkpoints_intact()


@pytest.mark.parametrize("sig", [signal.SIGTERM, pytest.param(signal.SIGINT, marks=pytest.mark.slow)],
                         ids=["SIGTERM", "SIGINT"])
def test_a_stop_signal_to_the_launcher_wakes_a_stopped_rank(tmp_path, runs, sig) -> None:
    """The launcher alive but asked to stop while rank 1 is stopped: the agent's SIGTERM cannot reach a stopped
    process, so rank 0 waited in vain; with the default timeout_s (600 s) the agent's SIGKILL (after 120 s)
    came first and left status.json ``running``. Now the launcher wakes it: a graceful stop, a checkpoint,
    and a last line naming the rank."""
    run = Run(tmp_path)
    runs.append(run)
    os.kill(run.ranks[1], signal.SIGSTOP)
    while state(run.ranks[1]) != "T":
        time.sleep(0.01)
    time.sleep(0.5)
    sent = time.monotonic()
    os.kill(run.launcher.pid, sig)
    run.launcher.wait(timeout=60)
    took, left = run.wait_for_the_end(sent)
    assert not left, left
    assert run.launcher.returncode == {signal.SIGTERM: 143, signal.SIGINT: 130}[sig], run.stderr
    lines = assert_quiet(run.stderr)
    assert lines[-1] == (f"note: rank 1 (pid {run.ranks[1]}) was stopped (SIGSTOP) when the run was asked to stop: "
                         "sent it SIGCONT so that it stopped with the others"), run.stderr
    status = run.status()
    assert status["status"] == "interrupted" and status["reason"] == sig.name, status
    run.checkpoints_intact()


def test_a_rank_that_fails_while_the_launcher_stops_the_run_is_named(tmp_path) -> None:
    """SIGTERM to the launcher (sent by rank 0 after step 6), and rank 0 fails in that same step (a NaN loss):
    the launcher exited 1 without a word, as the agent hands no failures to a launcher stopped by a signal."""
    settings = ("run.device=cpu", "visualizers=[]", "loop.epochs=3", f"distributed.timeout_s={TIMEOUT_S}",
                "toy.signal_at_step=6", "toy.signal_to=launcher", "toy.nan_at_step=6")
    done = run_cli("train", "--trainer", "toy", *(a for s in settings for a in ("--set", s)), "--nproc", "2",
                   cwd=tmp_path, timeout=180)
    assert done.returncode == 1, done.stderr
    lines = assert_quiet(done.stderr)
    assert lines[-1].startswith("error: rank 0 (pid ") and " failed while stopping: non-finite loss " in lines[-1], \
        done.stderr
    assert "checkpoints already written are kept: continue with nectargan train --resume " in lines[-1], lines[-1]
    assert json.loads((tmp_path / "runs/run/version_0/status.json").read_text())["status"] == "failed"


SLOW_SAVE = """
import collections
import os
import time
from pathlib import Path

from nectargan_core import hookimpl


class Slow:
    '''Pickled inside torch.save: rank 0 is in the middle of writing the checkpoint until GO_FILE appears.'''

    def __reduce__(self):
        Path(os.environ["WRITING_FILE"]).write_text(str(os.getpid()))
        deadline = time.monotonic() + 30
        while not Path(os.environ["GO_FILE"]).exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        return (collections.OrderedDict, ())


class SlowSave:
    @hookimpl
    def on_save_checkpoint(self, trainer, checkpoint):
        if trainer.global_step == int(os.environ["SLOW_STEP"]) and os.environ.get("RANK") == "0":
            checkpoint.setdefault("plugins", {})["slow"] = Slow()


@hookimpl
def register_callbacks(register):
    register("slowsave", "slowsave_plugin:SlowSave", description="rank 0 writes one checkpoint slowly")
"""


def test_the_launcher_killed_while_rank_0_writes_a_checkpoint_and_rank_1_is_stopped(tmp_path, runs) -> None:
    """Rank 0 in the middle of writing the checkpoint of step 10, rank 1 stopped, then the launcher SIGKILLed:
    the checkpoint is completed (nothing half-written, the earlier ones intact), then both stop with a checkpoint."""
    site = make_fake_dist(tmp_path / "site", "nectargan-slowsave", "slowsave_plugin", SLOW_SAVE, "slowsave")
    writing, go = tmp_path / "writing", tmp_path / "go"
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])),
           "SLOW_STEP": "10", "WRITING_FILE": str(writing), "GO_FILE": str(go)}
    run = Run(tmp_path, "callbacks={slowsave: {}}", "distributed.timeout_s=20", env=env)
    runs.append(run)
    deadline = time.monotonic() + 60
    while not writing.exists():
        assert time.monotonic() < deadline and run.launcher.poll() is None, "rank 0 never wrote step 10"
        time.sleep(0.01)
    folder = run.dir / "checkpoints"
    assert not list(folder.glob("*-step00000010.pt"))  # it is being written, under a temp name
    assert list(folder.glob(f".epoch*-step00000010.pt.tmp-{run.ranks[0]}"))
    os.kill(run.ranks[1], signal.SIGSTOP)
    while state(run.ranks[1]) != "T":
        time.sleep(0.01)
    sent = run.kill_launcher()
    time.sleep(1.0)
    go.write_text("")
    took, left = run.wait_for_the_end(sent)
    assert not left, left
    lines = assert_quiet(run.stderr)
    assert lines[-1].startswith(f"note: rank 1 (pid {run.ranks[1]}) was stopped (SIGSTOP) when its launcher"), \
        run.stderr
    status = run.status()
    assert status["status"] == "interrupted", status
    saved = {path.name.split("-")[1]: path for path in run.checkpoints_intact()}
    assert load_checkpoint(saved["step00000010.pt"])["global_step"] == 10, saved


UNSTOPPABLE_RANK = """
import os, signal, sys, time
from pathlib import Path

from nectargan_core.checkpoint import save_checkpoint
from nectargan_core.launchfolder import note_run_dir
from nectargan_core.orphans import start_guard
from nectargan_core.rundir import RunDir
from nectargan_core.runlock import RunLock

signal.signal(signal.SIGTERM, signal.SIG_IGN)  # hung where no signal is acted on
run = RunDir(Path(sys.argv[1]))
lock = RunLock.acquire(run.path)
run.write_status("running", epoch=0, step=5)
note_run_dir(run.path)
save_checkpoint({"global_step": 5}, run.checkpoints / "epoch0000-step00000005.pt")
start_guard(int(os.environ["NECTARGAN_LAUNCHER_PID"]), 0, float(sys.argv[2]))


class Forever:
    def __reduce__(self):
        Path(sys.argv[3]).write_text("")
        while True:
            time.sleep(1)


save_checkpoint({"global_step": 6, "slow": Forever()}, run.checkpoints / "epoch0000-step00000006.pt")
"""

FAKE_LAUNCHER = """
import os, subprocess, sys, time
os.environ["NECTARGAN_LAUNCHER_PID"] = str(os.getpid())
os.environ["RANK"] = "0"
rank = subprocess.Popen([sys.executable, "-c", sys.argv[1], *sys.argv[2:]])
print(rank.pid, flush=True)
time.sleep(600)
"""


def test_a_rank_that_does_not_stop_after_its_launcher_died_is_killed_within_the_grace_period(tmp_path) -> None:
    """A rank 0 that is stopped and would not act on SIGTERM when woken (hung in a checkpoint write): its guard
    kills it (SIGKILL) once the grace period after the launcher's death is over, says so naming the rank, marks
    status.json ``failed``; the checkpoint it was writing is absent, not half-written, the earlier one intact."""
    from nectargan_core.rundir import RunDir

    run = RunDir.create(tmp_path / "runs", "run")
    (run.path / "config.yaml").write_text("trainer: toy\n")
    codes = tmp_path / "codes"
    codes.mkdir()
    writing, grace = tmp_path / "writing", 2.0
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("NECTARGAN_")},
           "NECTARGAN_EXIT_CODE_DIR": str(codes)}
    launcher = subprocess.Popen([sys.executable, "-c", FAKE_LAUNCHER, UNSTOPPABLE_RANK, str(run.path), str(grace),
                                 str(writing)], cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
    processes: set[int] = set()
    try:
        rank = int(launcher.stdout.readline())
        deadline = time.monotonic() + 60
        while not writing.exists():
            assert time.monotonic() < deadline and state(rank) not in ("gone", "Z"), "the rank never began its write"
            time.sleep(0.02)
        processes = descendants(launcher.pid)
        assert len(processes) == 2  # the rank and its guard
        os.kill(rank, signal.SIGSTOP)
        killed = time.monotonic()
        launcher.kill()
        launcher.wait()
        while living(processes) and time.monotonic() - killed < grace + 10:
            time.sleep(0.02)
        took = time.monotonic() - killed
        assert not living(processes), living(processes)
        stderr = launcher.stderr.read()
    finally:
        for pid in living(processes):
            os.kill(pid, signal.SIGKILL)
        if launcher.poll() is None:
            launcher.kill()
        launcher.wait()
    assert grace <= took < grace + 5, took
    lines = assert_quiet(stderr)
    assert lines[-1] == (f"error: rank 0 (pid {rank}) did not stop within 2 s after its launcher (pid {launcher.pid}) "
                         "died: killed it (SIGKILL); checkpoints already written are kept; "
                         f"{run.status_file} says failed"), stderr
    status = run.read_status()
    assert status["status"] == "failed" and status["step"] == 5 and f"rank 0 (pid {rank})" in status["error"], status
    assert not (run.checkpoints / "epoch0000-step00000006.pt").exists()
    verify_checkpoint(run.checkpoints / "epoch0000-step00000005.pt")


def start_launcher(tmp_path: Path) -> subprocess.Popen:
    """A ``--nproc 2`` toy run that has only just been started (no waiting for a checkpoint)."""
    base = ["run.device=cpu", "visualizers=[]", "toy.samples=64", "toy.batch_size=4", "loop.epochs=1000",
            "checkpoint.every_steps=5", f"distributed.timeout_s={TIMEOUT_S}", "toy.step_sleep=0.05"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("NECTARGAN_")}
    return subprocess.Popen([str(Path(sys.executable).with_name("nectargan")), "train", "--trainer", "toy",
                             *(a for s in base for a in ("--set", s)), "--nproc", "2"], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def guards_of(launcher: int) -> list[int]:
    found = []
    for pid in descendants(launcher):
        try:
            if b"import guard" in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(pid)
        except OSError:
            continue
    return found


def wait_until(condition, what: str, launcher: subprocess.Popen, limit: float = 60) -> None:
    deadline = time.monotonic() + limit
    while not condition():
        if launcher.poll() is not None or time.monotonic() > deadline:
            launcher.kill()
            pytest.fail(f"{what} never happened: {launcher.communicate()[1]}")
        time.sleep(0.005)


def end_after_launcher_killed(launcher: subprocess.Popen) -> tuple[str, float]:
    """SIGKILL the launcher; returns its terminal's output once every process of the run has ended, and how
    long that took (the test fails, leaving nothing behind, if any process is still there after END_S)."""
    processes = descendants(launcher.pid)
    killed = time.monotonic()
    launcher.kill()
    launcher.wait()
    while living(processes) and time.monotonic() - killed < END_S:
        time.sleep(0.05)
    took, left = time.monotonic() - killed, living(processes)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left, f"left behind after the launcher died (pid: state): {left}"
    return launcher.stderr.read(), took


def test_ranks_stopped_before_their_guards_start_end_with_the_launcher(tmp_path) -> None:
    """Both ranks SIGSTOPped in their first moments, before each starts its guard (after torch's import), then
    the launcher killed: the launcher's watchman wakes and ends them (they stayed stopped for good), and says
    that the launcher died and which ranks it found stopped."""
    launcher = start_launcher(tmp_path)
    wait_until(lambda: len(rank_pids(launcher.pid)) == 2, "both ranks starting", launcher)
    ranks = rank_pids(launcher.pid)
    for pid in ranks.values():
        os.kill(pid, signal.SIGSTOP)
    assert not guards_of(launcher.pid), "a guard had started already: this is not the case under test"
    time.sleep(0.5)
    stderr, took = end_after_launcher_killed(launcher)
    lines = assert_quiet(stderr)
    assert lines[-3] == (f"error: the launcher of this --nproc 2 run (pid {launcher.pid}) died (killed, or the "
                         "out-of-memory killer) and every rank ended with it; it died while the processes were "
                         "starting: run the same command again"), stderr
    for rank in (0, 1):
        assert lines[-2 + rank] == (f"note: rank {rank} (pid {ranks[rank]}) was stopped (SIGSTOP) when its launcher "
                                    f"(pid {launcher.pid}) died: sent it SIGTERM and SIGCONT so that it stopped with "
                                    "the others"), stderr
    assert took < 10, took


def test_a_launcher_killed_as_the_guards_start_leaves_a_line(tmp_path) -> None:
    """The launcher killed as soon as the ranks' guards run (the ranks are still starting up): before, nothing
    was printed at all. A run directory that exists by then is not left ``running`` or without a status."""
    launcher = start_launcher(tmp_path)
    wait_until(lambda: len(guards_of(launcher.pid)) == 2, "both guards starting", launcher)
    stderr, _ = end_after_launcher_killed(launcher)
    lines = assert_quiet(stderr)
    assert lines and lines[-1].startswith(f"error: the launcher of this --nproc 2 run (pid {launcher.pid}) died "
                                          "(killed, or the out-of-memory killer) and every rank ended with it; "), stderr
    for status_file in tmp_path.glob("runs/*/*/status.json"):
        assert json.loads(status_file.read_text())["status"] in ("failed", "interrupted"), status_file.read_text()
    for run_dir in tmp_path.glob("runs/*/*"):
        assert (run_dir / "status.json").exists(), f"{run_dir} has no status.json"


def test_rank_0_s_error_line_is_shown_when_the_launcher_dies_before_printing_it(tmp_path, runs) -> None:
    """Rank 1 stopped; rank 0 reports it after ``timeout_s`` and leaves its line for the launcher, which is
    killed while it waits for the stopped rank to end: the line (naming rank 1) reached only status.json."""
    run = Run(tmp_path)
    runs.append(run)
    environ = Path(f"/proc/{run.ranks[0]}/environ").read_bytes().split(b"\0")
    folder = Path(next(i for i in environ if i.startswith(b"NECTARGAN_EXIT_CODE_DIR=")).split(b"=", 1)[1].decode())
    os.kill(run.ranks[1], signal.SIGSTOP)
    deadline = time.monotonic() + 60
    while not list(folder.glob("error-*-0")):
        assert time.monotonic() < deadline, "rank 0 never reported rank 1"
        time.sleep(0.02)
    time.sleep(0.3)
    took, left = run.wait_for_the_end(run.kill_launcher())
    assert not left, left
    lines = assert_quiet(run.stderr)  # rank 0 had woken rank 1 already ("sent it SIGTERM and SIGCONT")
    assert lines[-1].startswith(f"error: rank 0 (pid {run.ranks[0]}) failed: rank 1 (pid {run.ranks[1]} on "), \
        run.stderr
    assert "stopped answering" in lines[-1] and lines[-1].endswith(
        f"; its launcher (pid {run.launcher.pid}) died before printing this; checkpoints already written are kept: "
        f"continue with nectargan train --resume {run.dir} --nproc 2"), lines[-1]
    assert run.status()["status"] == "failed"
    assert not folder.exists(), "the launcher's folder was left behind"
    run.checkpoints_intact()


def test_the_watchman_finds_each_rank_s_guard_and_its_grace_period() -> None:
    """The watchman leaves a guarded rank to its guard (with the guard's grace period) and ends only ranks that
    have none: a rank it took for unguarded would be killed after 120 s whatever its distributed.timeout_s."""
    from nectargan_core.orphans import _guard_grace

    code = ("import os, sys, time; from nectargan_core.orphans import start_guard; "
            "start_guard(os.getppid(), 0, 7.5) if sys.argv[1] == 'guarded' else None; print(flush=True); "
            "time.sleep(60)")
    found = {}
    for kind in ("guarded", "alone"):
        rank = subprocess.Popen([sys.executable, "-c", code, kind], stdout=subprocess.PIPE, text=True)
        try:
            rank.stdout.readline()
            deadline = time.monotonic() + 10
            while (found.setdefault(kind, _guard_grace(rank.pid)) is None and kind == "guarded"
                   and time.monotonic() < deadline):
                found.pop(kind)
                time.sleep(0.05)
        finally:
            rank.kill()
            rank.wait()
    assert found == {"guarded": 7.5, "alone": None}


def test_a_rank_stopped_while_the_processes_join_is_named_in_one_line(tmp_path) -> None:
    """Rank 1 stopped in its first moments, the launcher alive: rank 0's rendezvous timed out with a 47-line
    traceback (DistStoreError) and the launcher's line blamed rank 0. Now rank 0 names rank 1 and its state."""
    launcher = start_launcher(tmp_path)
    wait_until(lambda: len(rank_pids(launcher.pid)) == 2, "both ranks starting", launcher)
    ranks = rank_pids(launcher.pid)
    os.kill(ranks[1], signal.SIGSTOP)
    processes = descendants(launcher.pid)
    try:
        _, stderr = launcher.communicate(timeout=120)
    finally:
        for pid in living(processes | descendants(launcher.pid)):
            os.kill(pid, signal.SIGKILL)
    assert launcher.returncode == 1
    lines = assert_quiet(stderr)
    assert lines[-1].startswith(f"error: rank 0 (pid {ranks[0]}) failed: the processes of this run did not all join "
                                f"within distributed.timeout_s={TIMEOUT_S} s ("), stderr
    assert f"): rank 1 (pid {ranks[1]}) is stopped (SIGSTOP or a debugger); run the same command again" in lines[-1]
    assert not living(processes)


def test_the_watchman_finds_ranks_it_never_saw_by_their_environment() -> None:
    """Ranks of a restart that appeared just before the launcher died were not known to the watchman: they
    printed after its last line. It finds them by the launcher's pid in their environment, not their workers."""
    from nectargan_core.orphans import _orphans_of

    fake_launcher = 999_999_999
    code = ("import subprocess, sys, time; print(subprocess.Popen([sys.executable, '-c', 'import time; "
            "time.sleep(60)']).pid, flush=True); time.sleep(60)")
    env = {**os.environ, "NECTARGAN_LAUNCHER_PID": str(fake_launcher), "RANK": "3"}
    rank = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)
    try:
        worker = int(rank.stdout.readline())
        assert _orphans_of(fake_launcher) == {rank.pid: 3}
        assert worker not in _orphans_of(fake_launcher)
    finally:
        for pid in (worker, rank.pid):
            os.kill(pid, signal.SIGKILL)
        rank.wait()


def test_a_launcher_killed_after_the_run_finished_says_the_results_are_complete(tmp_path) -> None:
    """The launcher killed once the run had finished: the watchman's line said to resume a finished run."""
    base = ["run.device=cpu", "visualizers=[]", "toy.samples=16", "toy.batch_size=4", "loop.epochs=2",
            f"distributed.timeout_s={TIMEOUT_S}"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("NECTARGAN_")}
    launcher = subprocess.Popen([str(Path(sys.executable).with_name("nectargan")), "train", "--trainer", "toy",
                                 *(a for s in base for a in ("--set", s)), "--nproc", "2"], cwd=tmp_path, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    status_file = tmp_path / "runs/run/version_0/status.json"
    wait_until(lambda: status_file.exists() and '"finished"' in status_file.read_text(), "the run finishing",
               launcher)
    stderr, _ = end_after_launcher_killed(launcher)
    lines = assert_quiet(stderr)
    assert lines[-1] == (f"note: the launcher of this --nproc 2 run (pid {launcher.pid}) died after the run had "
                         "finished; its results are complete"), stderr
    assert json.loads(status_file.read_text())["status"] == "finished"
