"""``nectargan train --nproc N``: start N training processes on this machine through torchrun's agent.

This is ``torchrun --standalone --nproc-per-node N -m nectargan_core train ...``
run in-process (torch.distributed's elastic agent, c10d rendezvous on a free
local port), with three differences: a failed worker is reported in one line
that names its rank and exit status (and its own error line, which names the
rank that stopped answering when that is why it failed); Ctrl-C / SIGTERM
give the workers time to finish their step and write a checkpoint (a worker
that is stopped, SIGSTOP or Ctrl-Z, is woken up to do so); and the workers
know the launcher's pid, so that they end with it
(:func:`nectargan_core.distributed.follow_launcher`), also when one of them
is stopped as the launcher dies (:func:`guard`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Iterator, Optional, Sequence

from .errors import NectarGANError
from .procfs import proc_state
from .signals import EXIT_CODES, settle

#: Seconds the agent waits for workers to stop after a signal before killing them.
SHUTDOWN_TIMEOUT_S = 120
#: The key under which a worker leaves its one-line error in torchrun's error file for the launcher.
ERROR_KEY = "nectargan_error"
#: The environment variable naming the signals torch's agent handles itself.
SIGNALS_ENV = "TORCHELASTIC_SIGNALS_TO_HANDLE"
AGENT_SIGNALS = "SIGHUP,SIGQUIT"
#: The folder in which rank 0 of each attempt leaves its exit code (``exit-<attempt>``) for the launcher.
EXIT_CODE_DIR_ENV = "NECTARGAN_EXIT_CODE_DIR"
#: Set by ``nectargan train --nproc`` in its processes: the launcher's pid (they follow it, and leave their
#: error lines to it).
LAUNCHER_PID_ENV = "NECTARGAN_LAUNCHER_PID"
RUNNING = "running"
#: How often a worker's guard looks whether its launcher is still there (the bound on waking a stopped worker).
GUARD_POLL_S = 0.2
#: The files in which guards leave, for rank 0, the line about a worker that was stopped as its launcher died.
STOPPED_NOTE = "stopped-"
#: Set in the ranks when the launcher's watchman runs (it, not rank 0, then speaks for a launcher that died).
WATCHMAN_ENV = "NECTARGAN_WATCHMAN_PID"
#: What the launcher tells its watchman as it ends normally; the pipe closing without it is the launcher's death.
WATCHMAN_DONE = b"done"


def launcher_gone() -> bool:
    """In a worker of ``nectargan train --nproc``: whether its launcher has died (this process was reparented).

    Nobody reads the launcher's store, error files or exit codes any more: the
    worker must neither wait for them nor leave its last words there.
    """
    launcher = os.environ.get(LAUNCHER_PID_ENV, "")
    return launcher.isdigit() and os.getppid() != int(launcher)


@contextlib.contextmanager
def recording_exit_code() -> Iterator[None]:
    """In rank 0 of a ``--nproc`` run: leave this process's exit code where the launcher reads it.

    The launcher's own view (a signal it got, a rank's non-zero exit) cannot
    tell a run that finished before a late Ctrl-C, or one that every rank
    stopped gracefully because one rank got SIGTERM, from a failure: rank 0
    knows. ``running`` is written first, so a rank 0 that dies without a word
    leaves no stale code of an earlier attempt.
    """
    folder = os.environ.get(EXIT_CODE_DIR_ENV)
    if not folder or os.environ.get("RANK", "0") != "0":
        yield
        return
    path = Path(folder) / f"exit-{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}"
    _write_quietly(path, RUNNING)
    code: Any = 1
    try:
        yield
        code = 0
    except SystemExit as done:
        code = done.code
        raise
    finally:
        code = 0 if code is None else code if isinstance(code, int) else 1
        _write_quietly(path, str(code))
        if launcher_gone() and not os.environ.get(WATCHMAN_ENV):  # else the watchman speaks, once all ranks ended
            _speak_for_the_launcher(Path(folder))


def _speak_for_the_launcher(folder: Path, launcher: Optional[int] = None, nproc: int = 0) -> None:
    """After the launcher died: the lines it would have printed, and the cleaning up of its folder.

    Said by the launcher's watchman once every rank has ended (``launcher``
    and ``nproc`` given), else by rank 0 at its end: the error line a rank
    left for the launcher in the last attempt (it died before printing it),
    then, from the watchman, that the launcher died and what can be resumed,
    then the ranks the guards found stopped (SIGSTOP) as the launcher died.
    The launcher's folder, which a killed launcher leaves behind, is removed.
    """
    from .text import printable

    def say(line: str) -> None:
        try:
            print(printable(line), file=sys.stderr, flush=True)
        except (OSError, ValueError):  # the terminal is gone too: the files say it
            pass

    own = recorded_error(folder, attempt=_last_attempt(folder))  # recorded while the launcher lived
    if launcher is not None:
        hint = resume_hint(folder, nproc) or "; it had not made its run directory yet: nothing to resume"
        if own is not None:  # the line the launcher would have printed, had it lived
            rank = own["rank"]
            say(f"error: rank {rank} (pid {own.get('pid')}) failed: {own['line'].removeprefix(f'rank {rank}: ')}; "
                f"its launcher (pid {launcher}) died before printing this" + hint)
        else:
            say(f"error: the launcher of this --nproc {nproc} run (pid {launcher}) died (killed, or the out-of-memory "
                "killer) and every rank ended with it" + hint)
    elif own is not None and own.get("pid") == os.getpid():
        line = own["line"] if own["line"].startswith("rank 0:") else f"rank 0: {own['line']}"
        say(f"error: {line}")
    for note in sorted(folder.glob(f"{STOPPED_NOTE}*")):
        try:
            line = note.read_text(encoding="utf-8").strip()
        except OSError:
            continue
        if line:
            say(f"note: {line}")
    shutil.rmtree(folder, ignore_errors=True)


def _last_attempt(folder: Path) -> Optional[int]:
    """The number of the launcher's last attempt that started a rank 0 (``exit-N``), or None."""
    numbers = [int(p.name[5:]) for p in folder.glob("exit-*") if p.name[5:].isdigit()]
    return max(numbers, default=None)


RUN_DIR_FILE = "run-dir"


def note_run_dir(path: Path) -> None:
    """In rank 0 of a ``--nproc`` run: tell the launcher which run directory the run writes.

    A failure message can then name it and say whether a checkpoint exists to
    resume from, instead of a placeholder.
    """
    folder = os.environ.get(EXIT_CODE_DIR_ENV)
    if folder and os.environ.get("RANK", "0") == "0":
        _write_quietly(Path(folder) / RUN_DIR_FILE, str(Path(path).resolve()))


def resume_hint(folder: Path, nproc: int) -> str:
    """What the launcher's failure line says about resuming: the run directory and whether it can resume."""
    try:
        noted = (folder / RUN_DIR_FILE).read_text(encoding="utf-8").strip()
    except OSError:
        return ""  # the run failed before it had a run directory: there is nothing to resume
    from .rundir import RunDir

    try:
        run_dir = RunDir(Path(noted))
        saved, emergency = run_dir.periodic_checkpoints(), run_dir.emergency_checkpoints()
    except OSError:
        saved, emergency = [], []
    if not saved and emergency:
        return (f"; an emergency checkpoint was saved: continue with nectargan train --resume {noted} "
                f"--checkpoint {emergency[-1]} --nproc {nproc}")
    if not saved:
        return f"; no checkpoint was written in {noted}"
    return f"; checkpoints already written are kept: continue with nectargan train --resume {noted} --nproc {nproc}"


def _write_quietly(path: Path, text: str) -> None:
    try:
        path.write_text(text, encoding="utf-8")
    except OSError:
        pass


def rank0_exit_code(folder: Path) -> Optional[int]:
    """The exit code rank 0 of the last attempt recorded, or None (it is still running, or died without one)."""
    def attempt(path: Path) -> int:
        number = path.name.removeprefix("exit-")
        return int(number) if number.isdigit() else -1

    last = max(folder.glob("exit-*"), key=attempt, default=None)
    if last is None:
        return None
    try:
        text = last.read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return int(text) if text.lstrip("-").isdigit() else None


def record_for_launcher(line: str) -> bool:
    """In a worker started by torchrun's agent: leave this process's one-line error in its error file.

    The agent reads the file when the worker fails, and ``launch`` shows the
    line with the rank's exit status (a rank that timed out names the rank it
    waited for). Returns whether the line was recorded, or, once the launcher
    is gone (nobody would read it), printed here as ``error: rank N: ...``.
    """
    path = os.environ.get("TORCHELASTIC_ERROR_FILE")
    if not path:
        return False
    rank = os.environ.get("RANK", "0")
    if launcher_gone():  # no launcher will read it: the rank says it itself, naming itself, in one line
        from .text import printable

        own = line if line.startswith(f"rank {rank}:") else f"rank {rank}: {line}"
        print(f"error: {printable(own)}", file=sys.stderr, flush=True)
        return True
    try:
        with open(path, "w", encoding="utf-8") as handle:
            json.dump({"message": line, "timestamp": int(time.time()), ERROR_KEY: line}, handle)
    except OSError:
        return False
    folder = os.environ.get(EXIT_CODE_DIR_ENV)
    if folder:  # also for the launcher's signal path, where the agent hands it no failures to read
        _write_quietly(Path(folder) / f"error-{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}-{rank}",
                       json.dumps({"rank": int(rank) if rank.isdigit() else 0, "pid": os.getpid(), "line": line}))
    return True


def recorded_error(folder: Path, attempt: Optional[int] = None) -> Optional[dict[str, Any]]:
    """The error line rank 0 (else the lowest rank) of the last attempt (or of ``attempt``) left for the launcher."""
    found = []
    for path in folder.glob("error-*-*"):
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        number = path.name.split("-")[1]
        if isinstance(record, dict) and isinstance(record.get("line"), str) and isinstance(record.get("rank"), int) \
                and number.isdigit() and (attempt is None or int(number) == attempt):
            found.append(((-int(number), record["rank"]), record))
    return min(found, key=lambda item: item[0])[1] if found else None


class LaunchError(NectarGANError):
    """A worker process of ``--nproc`` training failed."""


def describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def quiet_elastic_loggers() -> None:
    """Silence torchrun's agent: we report failures and signals ourselves, in one line each.

    torch's elastic modules set a level on each of their own loggers (``LOGLEVEL``,
    default WARNING), so a level on the parent alone still let "Received 15 death
    signal, shutting down workers" through before our own message.
    """
    logging.getLogger("torch.distributed.elastic").setLevel(logging.CRITICAL)
    for name in list(logging.root.manager.loggerDict):
        if name.startswith("torch.distributed.elastic") or name.startswith("torch.distributed.launcher"):
            logging.getLogger(name).setLevel(logging.CRITICAL)


@contextlib.contextmanager
def stop_signals_forwarded(signal_exception: type) -> Iterator[tuple[list[int], dict[int, int]]]:
    """SIGINT/SIGTERM to the launcher, handled as the ranks handle them.

    The agent starts each rank in a process group of its own, so a terminal's
    Ctrl-C reaches the launcher alone, and torch's handler (one for every
    signal) passes the first signal on, but answers a second one by sending
    SIGTERM, which the ranks take as a repeat: a second Ctrl-C did not stop at
    once. Here the first SIGINT or SIGTERM goes to torch's agent as its own
    handler would send it (the agent forwards it to every rank, which stops
    after its step with a checkpoint); a later SIGINT is passed on to the ranks
    as a SIGINT (each stops at once); a later SIGTERM changes nothing. A rank
    that is stopped (SIGSTOP, Ctrl-Z) could act on neither and would be
    killed after the agent's grace period (before its own ``timeout_s``, and
    the other ranks waiting for it fail): it is sent SIGCONT as well, as
    systemd does, and its pid and rank are yielded in ``woken``. Yields the
    signals received, in order, and ``woken``.
    """
    received: list[int] = []
    woken: dict[int, int] = {}

    def handler(signum: int, frame: Any) -> None:
        received.append(signum)
        for pid in worker_pids():
            if proc_state(pid)[0] in ("T", "t"):
                woken[pid] = rank_of(pid)
                wake(pid)
        if len(received) == 1:
            raise signal_exception(f"Process {os.getpid()} got signal: {signum}", sigval=signal.Signals(signum))
        if signum == signal.SIGINT:
            for pid in worker_pids():
                try:
                    os.kill(pid, signal.SIGINT)
                except ProcessLookupError:
                    pass

    if threading.current_thread() is not threading.main_thread():  # no signals here: torch's own handling
        yield received, woken
        return
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, handler)
    try:
        yield received, woken
    finally:
        settle()  # the ranks are gone and the outcome is decided: a late signal must not change the exit code


def worker_pids() -> list[int]:
    """This launcher's training processes: its children running ``nectargan_core`` (from ``/proc``)."""
    pids = []
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return pids
    for task in tasks:
        try:
            with open(f"/proc/self/task/{task}/children") as handle:
                children = [int(pid) for pid in handle.read().split()]
        except (OSError, ValueError):
            continue
        for pid in children:
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as handle:
                    if b"nectargan_core" in handle.read():
                        pids.append(pid)
            except OSError:
                continue
    return pids


def rank_of(pid: int) -> int:
    """The ``RANK`` in the environment of worker ``pid`` (-1 when it cannot be read)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            for item in handle.read().split(b"\0"):
                if item.startswith(b"RANK=") and item[5:].isdigit():
                    return int(item[5:])
    except OSError:
        pass
    return -1


def wake(pid: int) -> None:
    """SIGCONT to process ``pid``, and to its process group when it leads one (its stopped DataLoader workers)."""
    try:
        if os.getpgid(pid) == pid:
            os.killpg(pid, signal.SIGCONT)
        else:
            os.kill(pid, signal.SIGCONT)
    except OSError:
        pass


def start_guard(launcher: int, rank: int, grace_s: float) -> Optional[subprocess.Popen]:
    """Start this worker's :func:`guard`: a small process that ends the worker if its launcher dies while it is stopped.

    Only the main thread may start it: it ends on its own once this process
    is gone (it watches its parent pid rather than relying on
    ``PR_SET_PDEATHSIG``, which fires when the thread that started it ends).
    Its own session keeps it out of signals to this worker's process group
    (``kill -STOP -PGID``, the agent's SIGTERM): it must still run when they
    stop or end the worker. None when it cannot be started.
    """
    code = "import sys; from nectargan_core.launch import guard; guard(sys.argv[1:])"
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
        if state in ("T", "t"):
            _leave_note(rank, f"rank {rank} (pid {worker}) was stopped (SIGSTOP) when its launcher (pid {launcher}) "
                        "died: sent it SIGTERM and SIGCONT so that it stopped with the others")
        left[worker] = rank
    deadline = time.monotonic() + grace_s
    while left:
        for worker, rank in list(left.items()):
            if not alive(worker):
                del left[worker]
            elif time.monotonic() >= deadline:
                _kill_worker(worker, rank, f"rank {rank} (pid {worker})", launcher, grace_s)
                del left[worker]
            elif proc_state(worker)[0] in ("T", "t"):
                wake(worker)  # stopped again: a stopped process must not outlive its launcher either
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
    code = "import sys; from nectargan_core.launch import watchman; watchman(sys.argv[1:])"
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
    then the watchman notes the launcher's ranks every :data:`GUARD_POLL_S`
    (its children with a ``RANK``). After: a rank without a guard (stopped
    before its guard started, or still starting) is sent SIGTERM and
    SIGCONT and killed after :data:`SHUTDOWN_TIMEOUT_S`; guarded ranks are
    left to their guards, with a SIGKILL if they are still there 10 s after
    their guard's own grace period. Once every rank has ended it prints the
    launcher's last lines (:func:`_speak_for_the_launcher`) and marks a
    ``status.json`` left ``running`` (or never written) ``failed``.
    """
    launcher, folder, nproc = int(argv[0]), Path(argv[1]), int(argv[2])
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)  # it ends with its launcher, not with a signal meant for the run
    ranks: dict[int, int] = {}
    heard = b""
    while True:
        readable = select.select([0], [], [], GUARD_POLL_S)[0]
        if readable:
            try:
                chunk = os.read(0, 64)
            except OSError:
                chunk = b""
            if chunk:
                heard += chunk
                continue
            if WATCHMAN_DONE in heard:
                return  # the launcher ended normally and said what there was to say
            break
        ranks.update(_ranks_of(launcher))
    ranks.update(_ranks_of(launcher))  # a launcher killed by a signal is gone from /proc by now: kept from before
    ranks = {pid: rank for pid, rank in ranks.items() if _of_launcher(pid, launcher)}
    graces = {pid: _guard_grace(pid) for pid in ranks}
    unguarded = {pid: rank for pid, rank in ranks.items() if graces[pid] is None}
    alive = lambda pid: _of_launcher(pid, launcher)  # noqa: E731 - reparented: gone or a zombie is the end
    worker = threading.Thread(target=_see_off, args=(unguarded, launcher, SHUTDOWN_TIMEOUT_S, alive), daemon=True)
    worker.start()
    guarded = {pid: rank for pid, rank in ranks.items() if graces[pid] is not None}
    _see_off_guarded(guarded, graces, launcher, alive)
    worker.join()
    _mark_unfinished(folder, launcher, nproc)
    _speak_for_the_launcher(folder, launcher, nproc)


def _see_off_guarded(ranks: dict[int, int], graces: dict[int, Optional[float]], launcher: int, alive: Any) -> None:
    """Wait for guarded ranks to end; kill one still there 10 s after its guard's grace (its guard was stopped)."""
    start = time.monotonic()
    while ranks:
        for pid, rank in list(ranks.items()):
            if not alive(pid):
                del ranks[pid]
            elif time.monotonic() - start > (graces[pid] or 0.0) + 10:
                _kill_worker(pid, rank, f"rank {rank} (pid {pid})", launcher, (graces[pid] or 0.0) + 10)
                del ranks[pid]
        if ranks:
            time.sleep(GUARD_POLL_S)


def _ranks_of(launcher: int) -> dict[int, int]:
    """The launcher's children that are ranks (they have a ``RANK``): pid -> rank."""
    found = {}
    try:
        tasks = os.listdir(f"/proc/{launcher}/task")
    except OSError:
        return found
    for task in tasks:
        try:
            with open(f"/proc/{launcher}/task/{task}/children") as handle:
                children = [int(pid) for pid in handle.read().split()]
        except (OSError, ValueError):
            continue
        for pid in children:
            rank = rank_of(pid)
            if rank >= 0 and pid != os.getpid():
                found[pid] = rank
    return found


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
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children") as handle:
                children = [int(child) for child in handle.read().split()]
        except (OSError, ValueError):
            continue
        for child in children:
            try:
                with open(f"/proc/{child}/cmdline", "rb") as handle:
                    args = handle.read().split(b"\0")
            except OSError:
                continue
            if any(b"launch import guard" in arg for arg in args) and len(args) >= 2:
                try:
                    return float(args[-2] if args[-1] == b"" else args[-1])
                except ValueError:
                    return float(SHUTDOWN_TIMEOUT_S)
    return None


def _mark_unfinished(folder: Path, launcher: int, nproc: int) -> None:
    """The run's ``status.json``, left ``running`` or never written by ranks that ended with the launcher: ``failed``."""
    line = f"the launcher of this --nproc {nproc} run (pid {launcher}) died and every rank ended with it"
    _mark_failed(0, line, folder=folder, unwritten=True)


def _leave_note(rank: int, line: str) -> None:
    """A guard's line for rank 0, which prints it last (:func:`_speak_for_the_launcher`); printed here without it."""
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


def launch(nproc: int, worker_args: Sequence[str], *, max_restarts: int = 0) -> int:
    """Run ``python -m nectargan_core <worker_args>`` in ``nproc`` processes; the exit code to use.

    Returns rank 0's exit code when it recorded one that settles the run: 0
    when the run finished (a signal that arrived after that, or a rank that
    died after that, changes nothing), 130/143 when the run was stopped by a
    signal to the launcher or to any rank. Otherwise 130/143 for a signal to
    the launcher; raises :class:`LaunchError` naming the first failed rank.
    """
    from torch.distributed.elastic.multiprocessing.api import DefaultLogsSpecs
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    if "OMP_NUM_THREADS" not in os.environ:  # as torchrun: share the cores between the processes
        os.environ["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // nproc))
    os.environ[LAUNCHER_PID_ENV] = str(os.getpid())
    if not os.environ.get("NECTARGAN_DEBUG"):
        # torch's C++ warnings carry a backtrace each (a heartbeat that met a dead store printed 110 lines):
        # a rank's faults reach the user as one line each, from us. Set TORCH_CPP_LOG_LEVEL to see them.
        os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")
    quiet_elastic_loggers()
    options = dict(
        min_nodes=1, max_nodes=1, nproc_per_node=nproc, run_id=str(uuid.uuid4()),
        rdzv_backend="c10d", rdzv_endpoint="localhost:0", max_restarts=max_restarts,
        monitor_interval=0.1, start_method="spawn", logs_specs=DefaultLogsSpecs(),
    )
    fields = {field.name for field in dataclasses.fields(LaunchConfig)}
    if "shutdown_timeout" in fields:
        options["shutdown_timeout"] = SHUTDOWN_TIMEOUT_S  # newer torch; older ones wait their fixed default
    # The agent handles SIGHUP and SIGQUIT; SIGINT and SIGTERM are stop_signals_forwarded's (newer torch takes
    # the list as an option and puts it in the environment, older ones read the environment).
    if "signals_to_handle" in fields:
        options["signals_to_handle"] = AGENT_SIGNALS
    else:
        os.environ[SIGNALS_ENV] = AGENT_SIGNALS
    config = LaunchConfig(**options)
    codes = Path(tempfile.mkdtemp(prefix="nectargan-launch-"))
    os.environ[EXIT_CODE_DIR_ENV] = str(codes)
    watching = start_watchman(codes, nproc)
    if watching is not None:
        os.environ[WATCHMAN_ENV] = str(watching[0].pid)
    received: list[int] = []
    woken: dict[int, int] = {}
    try:
        with stop_signals_forwarded(SignalException) as (received, woken):
            elastic_launch(config, sys.executable)("-m", "nectargan_core", *worker_args)
    except ChildFailedError as exc:
        rank, failure = min(exc.failures.items(), key=lambda item: item[1].timestamp)
        more = len(exc.failures) - 1
        ended = rank0_exit_code(codes)
        if ended in EXIT_CODES.values():  # a signal to one rank stopped every rank gracefully: an interruption
            return ended
        if ended == 0 and rank != 0:  # rank 0 had finished the run, and said so
            print(f"warning: rank {rank} (pid {failure.pid}) ended with {describe_exit(failure.exitcode)} after the "
                  "run had finished; its results are complete", file=sys.stderr)
            return 0
        own = failure.error_file_data.get(ERROR_KEY) if isinstance(failure.error_file_data, dict) else None
        why = own.removeprefix(f"rank {rank}: ") if isinstance(own, str) and own else describe_exit(failure.exitcode)
        raise LaunchError(
            f"rank {rank} (pid {failure.pid}) failed: {why}"
            + (f" ({more} more rank(s) stopped after it)" if more else "")
            + "; the other processes were stopped" + resume_hint(codes, nproc)) from None
    except SignalException as exc:
        ended = rank0_exit_code(codes)
        failed = recorded_error(codes) if ended not in (None, 0, *EXIT_CODES.values()) else None
        if failed is not None:  # rank 0 failed while stopping: its line, as for any failure
            rank, pid, line = failed.get("rank"), failed.get("pid"), failed["line"]
            raise LaunchError(f"rank {rank} (pid {pid}) failed while stopping: {line.removeprefix(f'rank {rank}: ')}; "
                              "the other processes were stopped" + resume_hint(codes, nproc)) from None
        if ended is not None:  # rank 0 ended first (finished: 0; stopped by this signal: 130/143)
            return ended
        if signal.SIGINT in received[1:]:  # a later Ctrl-C stopped the ranks at once, as it does one process
            return 130
        return EXIT_CODES.get(signal.Signals(exc.sigval).name, 128 + int(exc.sigval))
    finally:
        os.environ.pop(EXIT_CODE_DIR_ENV, None)
        os.environ.pop(WATCHMAN_ENV, None)
        end_watchman(watching)
        shutil.rmtree(codes, ignore_errors=True)
        for pid, rank in woken.items():  # last: the line that says why a process someone had stopped went on
            print(f"note: rank {rank} (pid {pid}) was stopped (SIGSTOP) when the run was asked to stop: sent it "
                  "SIGCONT so that it stopped with the others", file=sys.stderr, flush=True)
    return 0
