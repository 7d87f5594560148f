"""The processes of a ``--nproc`` run whose launcher died: none may outlive it, whatever its state.

A rank ends with its launcher by the SIGTERM of ``PR_SET_PDEATHSIG``, unless
it is stopped (SIGSTOP, a debugger): a stopped process cannot act on it. Two
kinds of small watching processes, each in its own session (out of reach of
signals to the run's process groups), cover that: each rank's *guard*, which
wakes and, after a grace period, kills its rank once the launcher is gone;
and the launcher's *watchman*, started before the ranks, which does the same
for a rank that has no guard yet and, once every rank has ended, prints the
lines the launcher would have printed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Optional, Sequence

from .launchfolder import (EXIT_CODE_DIR_ENV, LAUNCHER_PID_ENV, RUN_DIR_FILE, RUNNING, SHUTDOWN_TIMEOUT_S,
                           STOPPED_NOTE, speak_for_the_launcher)
from .procfs import children, command_line, proc_state, wake

#: The guard's program (``python -c GUARD_CODE WORKER LAUNCHER RANK GRACE_S``), by which the watchman finds it.
GUARD_CODE = "import sys; from nectargan_core.orphans import guard; guard(sys.argv[1:])"
#: How often a worker's guard looks whether its launcher is still there (the bound on waking a stopped worker).
GUARD_POLL_S = 0.2
#: What the launcher tells its watchman as it ends normally; the pipe closing without it is the launcher's death.
WATCHMAN_DONE = b"done"


def start_guard(launcher: int, rank: int, grace_s: float) -> Optional[subprocess.Popen]:
    """Start this worker's :func:`guard`: a small process that ends the worker if its launcher dies while it is stopped.

    Only the main thread may start it: it ends on its own once this process
    is gone (it watches its parent pid rather than relying on
    ``PR_SET_PDEATHSIG``, which fires when the thread that started it ends).
    Its own session keeps it out of signals to this worker's process group
    (``kill -STOP -PGID``, the agent's SIGTERM): it must still run when they
    stop or end the worker. None when it cannot be started.
    """
    code = GUARD_CODE
    try:
        return subprocess.Popen([sys.executable, "-c", code, str(os.getpid()), str(launcher), str(rank),
                                 f"{grace_s:g}"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                start_new_session=True, close_fds=True)
    except OSError:
        return None


def guard(argv: Sequence[str]) -> None:
    """Watch one worker (the parent of this process) and its launcher; after the launcher dies, end the worker.

    ``argv``: the worker's pid, its launcher's pid, its rank and the grace
    period in seconds. A worker ends with its launcher by the SIGTERM of
    ``PR_SET_PDEATHSIG``, unless it is stopped (SIGSTOP, a debugger, Ctrl-Z
    of its group): a stopped process cannot act on it and stayed stopped for
    good, and the others waited for it. Within :data:`GUARD_POLL_S` of the
    launcher's death the guard sends the worker SIGTERM and SIGCONT (so it
    stops gracefully with the others, and a stopped rank 0 still writes its
    checkpoint and ``status.json``), wakes it again whenever it is stopped
    again, and kills it (SIGKILL, with its process group) if it is still
    there ``grace_s`` later. It never waits longer, whatever state the
    worker is in.
    """
    worker, launcher, rank, grace_s = int(argv[0]), int(argv[1]), int(argv[2]), float(argv[3])
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)  # the guard ends with its worker, not with a signal meant for others
    while True:
        if os.getppid() != worker:
            return  # the worker has ended: nothing to guard
        state, parent = proc_state(worker)
        if parent != launcher:
            break
        time.sleep(GUARD_POLL_S)
    _see_off({worker: rank}, launcher, grace_s, lambda pid: os.getppid() == pid, {worker: state})


def _see_off(workers: dict[int, int], launcher: int, grace_s: float, alive: Any,
             states: Optional[dict[int, str]] = None) -> None:
    """End ``workers`` (pid -> rank), whose launcher died: SIGTERM and SIGCONT now, SIGKILL after ``grace_s``.

    Each is sent SIGTERM (as ``PR_SET_PDEATHSIG`` sent it, in case that did
    not: a stop changes nothing) and woken, so that it stops gracefully with
    the others; one found stopped leaves a note for the last lines; one
    stopped again is woken again; one still ``alive(pid)`` after ``grace_s``
    is killed with its process group.
    """
    left = {}
    for worker, rank in workers.items():
        state = (states or {}).get(worker) or proc_state(worker)[0]
        try:
            os.kill(worker, signal.SIGTERM)
        except OSError:
            continue
        wake(worker)
        if state == "T":
            _leave_note(rank, f"rank {rank} (pid {worker}) was stopped (SIGSTOP) when its launcher (pid {launcher}) "
                        "died: sent it SIGTERM and SIGCONT so that it stopped with the others")
        elif state == "t":  # ptrace: no signal moves it until the debugger lets go
            _leave_note(rank, f"rank {rank} (pid {worker}) was held by a debugger when its launcher (pid {launcher}) "
                        f"died: it cannot be woken, and is killed if it is still there {grace_s:g} s later")
        left[worker] = rank
    _await_ranks(left, {worker: grace_s for worker in left}, launcher, alive, rewake=True)


def _await_ranks(ranks: dict[int, int], graces: dict[int, float], launcher: int, alive: Any, *,
                 rewake: bool) -> None:
    """Wait until each of ``ranks`` (pid -> rank) is no longer ``alive``; kill one still there ``graces[pid]``
    seconds from now, with its process group. ``rewake``: wake one found stopped again meanwhile (a stopped
    process must not outlive its launcher either); without it the rank's own guard does that."""
    start, left = time.monotonic(), dict(ranks)
    while left:
        for pid, rank in list(left.items()):
            if not alive(pid):
                del left[pid]
            elif time.monotonic() - start >= graces[pid]:
                _kill_worker(pid, rank, f"rank {rank} (pid {pid})", launcher, graces[pid])
                del left[pid]
            elif rewake and proc_state(pid)[0] in ("T", "t"):
                wake(pid)
        if left:
            time.sleep(GUARD_POLL_S)


def start_watchman(folder: Path, nproc: int) -> Optional[tuple[subprocess.Popen, int]]:
    """Start the launcher's :func:`watchman`; returns it and the pipe to end it with (:func:`end_watchman`).

    Started before the ranks, in its own session (signals to the launcher's
    group do not reach it), it covers what the ranks' guards cannot: a rank
    stopped before its guard started, and the launcher's last lines. None
    when it cannot be started (the guards and ``PR_SET_PDEATHSIG`` remain).
    """
    read, write = os.pipe()
    code = "import sys; from nectargan_core.orphans import watchman; watchman(sys.argv[1:])"
    try:
        process = subprocess.Popen([sys.executable, "-c", code, str(os.getpid()), str(folder), str(nproc)],
                                   stdin=read, stdout=subprocess.DEVNULL, start_new_session=True, close_fds=True)
    except OSError:
        os.close(write)
        return None
    finally:
        os.close(read)
    return process, write


def end_watchman(handle: Optional[tuple[subprocess.Popen, int]]) -> None:
    """Tell the watchman the launcher ends normally (it then ends without a word), and reap it."""
    if handle is None:
        return
    process, write = handle
    try:
        os.write(write, WATCHMAN_DONE)
    except OSError:
        pass
    os.close(write)
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:  # stopped by someone: it must not hold the launcher's exit
        pass


def watchman(argv: Sequence[str]) -> None:
    """Watch the launcher (``argv``: its pid, its folder, the number of ranks); after it dies, see the ranks off.

    The launcher holds the write end of this process's stdin: the pipe
    closing without :data:`WATCHMAN_DONE` is its death, seen at once. Until
    it does nothing. After, it finds the ranks by the launcher's pid in
    their environment (:func:`_orphans_of`): a rank without a guard (stopped
    before its guard started, or still starting) is sent SIGTERM and
    SIGCONT and killed after :data:`SHUTDOWN_TIMEOUT_S`; guarded ranks are
    left to their guards, with a SIGKILL if they are still there 10 s after
    their guard's own grace period. Once every rank has ended it prints the
    launcher's last lines (:func:`speak_for_the_launcher`) and marks a
    ``status.json`` left ``running`` (or never written) ``failed``.
    """
    launcher, folder, nproc = int(argv[0]), Path(argv[1]), int(argv[2])
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)  # it ends with its launcher, not with a signal meant for the run
    heard = b""
    while True:  # blocks until the launcher writes, or its end closes the pipe
        try:
            chunk = os.read(0, 64)
        except InterruptedError:
            continue
        except OSError:
            chunk = b""
        if not chunk:
            break
        heard += chunk
    if WATCHMAN_DONE in heard:
        return  # the launcher ended normally and said what there was to say
    ranks = _orphans_of(launcher)  # every rank left, of any attempt, whoever it is reparented to
    graces = {pid: _guard_grace(pid) for pid in ranks}
    unguarded = {pid: rank for pid, rank in ranks.items() if graces[pid] is None}
    alive = lambda pid: _of_launcher(pid, launcher)  # noqa: E731 - reparented: gone or a zombie is the end
    worker = threading.Thread(target=_see_off, args=(unguarded, launcher, SHUTDOWN_TIMEOUT_S, alive), daemon=True)
    worker.start()
    guarded = {pid: rank for pid, rank in ranks.items() if graces[pid] is not None}
    # A guarded rank is its guard's to end; one still there 10 s after the guard's grace had its guard stopped.
    _await_ranks(guarded, {pid: (graces[pid] or 0.0) + 10 for pid in guarded}, launcher, alive, rewake=False)
    worker.join()
    _mark_unfinished(folder, launcher, nproc)
    speak_for_the_launcher(folder, launcher, nproc)


def _orphans_of(launcher: int) -> dict[int, int]:
    """Every process left of ``launcher``'s ranks, from ``/proc``: pid -> rank.

    A rank has the launcher's pid and a ``RANK`` in its environment and is
    not a guard; what it started itself (DataLoader workers, which inherit
    that environment) is left to it.
    """
    found: dict[int, int] = {}
    parents: dict[int, int] = {}
    mark = f"{LAUNCHER_PID_ENV}={launcher}".encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        pid = int(entry)
        try:
            with open(f"/proc/{pid}/environ", "rb") as handle:
                environ = handle.read().split(b"\0")
        except OSError:
            continue
        if mark not in environ or GUARD_CODE.encode() in command_line(pid):
            continue
        rank = next((int(item[5:]) for item in environ if item.startswith(b"RANK=") and item[5:].isdigit()), -1)
        state, parent = proc_state(pid)
        if rank >= 0 and state not in ("", "Z"):
            found[pid], parents[pid] = rank, parent
    return {pid: rank for pid, rank in found.items() if parents[pid] not in found}


def _of_launcher(pid: int, launcher: int) -> bool:
    """Whether ``pid`` is still one of ``launcher``'s ranks (alive, not a zombie, the launcher's pid in its
    environment: a pid reused by another program is left alone)."""
    if proc_state(pid)[0] in ("", "Z"):
        return False
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            return f"{LAUNCHER_PID_ENV}={launcher}".encode() in handle.read().split(b"\0")
    except OSError:
        return False


def _guard_grace(pid: int) -> Optional[float]:
    """The grace period of rank ``pid``'s guard (from the guard's command line), or None when it has none."""
    for child in children(pid):
        args = command_line(child)
        if GUARD_CODE.encode() in args:
            try:
                return float(args[-1])
            except ValueError:
                return float(SHUTDOWN_TIMEOUT_S)
    return None


def _mark_unfinished(folder: Path, launcher: int, nproc: int) -> None:
    """The run's ``status.json``, left ``running`` or never written by ranks that ended with the launcher: ``failed``."""
    line = f"the launcher of this --nproc {nproc} run (pid {launcher}) died and every rank ended with it"
    _mark_failed(0, line, folder=folder, unwritten=True)


def _leave_note(rank: int, line: str) -> None:
    """A guard's line for rank 0, which prints it last (:func:`speak_for_the_launcher`); printed here without it."""
    folder = os.environ.get(EXIT_CODE_DIR_ENV)
    if folder:
        try:
            (Path(folder) / f"{STOPPED_NOTE}{rank:06d}").write_text(line, encoding="utf-8")
            return
        except OSError:
            pass
    print(f"note: {line}", file=sys.stderr, flush=True)


def _kill_worker(worker: int, rank: int, name: str, launcher: int, grace_s: float) -> None:
    """SIGKILL a worker that did not stop within the grace period; rank 0 can no longer say so in ``status.json``."""
    try:
        if os.getpgid(worker) == worker:
            os.killpg(worker, signal.SIGKILL)  # its DataLoader workers too, even stopped ones
        else:
            os.kill(worker, signal.SIGKILL)
    except OSError:
        pass
    line = (f"{name} did not stop within {grace_s:g} s after its launcher (pid {launcher}) died: killed it "
            "(SIGKILL); checkpoints already written are kept")
    if rank == 0:
        line += _mark_failed(worker, line)
    print(f"error: {line}", file=sys.stderr, flush=True)


def _mark_failed(worker: int, line: str, folder: Optional[Path] = None, unwritten: bool = False) -> str:
    """``status.json`` of the run that killed rank 0 was writing: ``failed`` instead of ``running`` for good.

    ``folder`` is the launcher's (else this process's ``EXIT_CODE_DIR_ENV``);
    with ``unwritten``, a run directory with no ``status.json`` yet (the
    ranks ended before writing one) is marked too.
    """
    folder = folder if folder is not None else (Path(os.environ[EXIT_CODE_DIR_ENV])
                                                if os.environ.get(EXIT_CODE_DIR_ENV) else None)
    try:
        noted = (folder / RUN_DIR_FILE).read_text(encoding="utf-8").strip() if folder else ""
    except OSError:
        noted = ""
    if not noted:
        return ""
    from .rundir import RunDir
    from .runlock import RunLock

    for _ in range(50 if worker else 0):  # the kernel releases the dead worker's lock as it exits
        if proc_state(worker)[0] in ("", "Z"):
            break
        time.sleep(0.1)
    try:
        lock = RunLock.acquire(noted, record=False)  # a resume started meanwhile owns the run: leave it alone
    except Exception:  # noqa: BLE001
        return ""
    try:
        run = RunDir(Path(noted))
        status = run.read_status()
        never = unwritten and not run.status_file.exists() and run.path.is_dir()
        if status.get("status") != RUNNING and not never:
            return ""
        fields = {key: status[key] for key in ("epoch", "step", "first_step_at") if key in status}
        run.write_status("failed", **fields, error=line)
    except Exception:  # noqa: BLE001
        return ""
    finally:
        lock.release()
    return f"; {run.status_file} says failed"
