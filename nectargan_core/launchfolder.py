"""The launcher's folder of a ``--nproc`` run: what its ranks leave there, and how it is read.

``nectargan train --nproc`` makes one temporary folder per launch (its path in
``NECTARGAN_EXIT_CODE_DIR``) in which rank 0 of each attempt leaves its exit
code, a failing rank its one-line error, rank 0 the run directory, and the
guards a note on each rank they found stopped. The launcher reads it to say
what happened in one line; when the launcher died, its watchman
(:mod:`nectargan_core.orphans`) or rank 0 reads it instead. Torch-free: the
error path of every command goes through :func:`record_for_launcher`.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any, Iterator, Optional

#: Seconds the agent waits for workers to stop after a signal before killing them.
SHUTDOWN_TIMEOUT_S = 120
#: The key under which a worker leaves its one-line error in torchrun's error file for the launcher.
ERROR_KEY = "nectargan_error"
#: The folder in which rank 0 of each attempt leaves its exit code (``exit-<attempt>``) for the launcher.
EXIT_CODE_DIR_ENV = "NECTARGAN_EXIT_CODE_DIR"
#: Set by ``nectargan train --nproc`` in its processes: the launcher's pid (they follow it, and leave their
#: error lines to it).
LAUNCHER_PID_ENV = "NECTARGAN_LAUNCHER_PID"
RUNNING = "running"
#: The files in which guards leave, for rank 0, the line about a worker that was stopped as its launcher died.
STOPPED_NOTE = "stopped-"
#: Set in the ranks when the launcher's watchman runs (it, not rank 0, then speaks for a launcher that died).
WATCHMAN_ENV = "NECTARGAN_WATCHMAN_PID"
RUN_DIR_FILE = "run-dir"


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
            speak_for_the_launcher(Path(folder))


def speak_for_the_launcher(folder: Path, launcher: Optional[int] = None, nproc: int = 0) -> None:
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
        hint = resume_hint(folder, nproc) or "; it died while the processes were starting: run the same command again"
        if rank0_exit_code(folder) == 0:  # the run had finished: nothing to resume, nothing lost
            say(f"note: the launcher of this --nproc {nproc} run (pid {launcher}) died after the run had finished; "
                "its results are complete")
        elif own is not None:  # the line the launcher would have printed, had it lived
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
    if not Path(noted).is_dir():
        return ""  # made, then removed again when its first files could not be written
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
