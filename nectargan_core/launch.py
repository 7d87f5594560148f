"""``nectargan train --nproc N``: start N training processes on this machine through torchrun's agent.

This is ``torchrun --standalone --nproc-per-node N -m nectargan_core train ...``
run in-process (torch.distributed's elastic agent, c10d rendezvous on a free
local port), with three differences: a failed worker is reported in one line
that names its rank and exit status (and its own error line, which names the
rank that stopped answering when that is why it failed); Ctrl-C / SIGTERM
give the workers time to finish their step and write a checkpoint; and the
workers know the launcher's pid, so that they end with it
(:func:`nectargan_core.distributed.follow_launcher`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import shutil
import signal
import sys
import tempfile
import threading
import uuid
from pathlib import Path
from typing import Any, Iterator, Optional, Sequence

from .errors import NectarGANError
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
    waited for). Returns whether the line was recorded.
    """
    import json
    import time

    path = os.environ.get("TORCHELASTIC_ERROR_FILE")
    if not path:
        return False
    try:
        with open(path, "w", encoding="utf-8") as handle:
            json.dump({"message": line, "timestamp": int(time.time()), ERROR_KEY: line}, handle)
    except OSError:
        return False
    return True


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
def stop_signals_forwarded(signal_exception: type) -> Iterator[list[int]]:
    """SIGINT/SIGTERM to the launcher, handled as the ranks handle them.

    The agent starts each rank in a process group of its own, so a terminal's
    Ctrl-C reaches the launcher alone, and torch's handler (one for every
    signal) passes the first signal on, but answers a second one by sending
    SIGTERM, which the ranks take as a repeat: a second Ctrl-C did not stop at
    once. Here the first SIGINT or SIGTERM goes to torch's agent as its own
    handler would send it (the agent forwards it to every rank, which stops
    after its step with a checkpoint); a later SIGINT is passed on to the ranks
    as a SIGINT (each stops at once); a later SIGTERM changes nothing. Yields
    the signals received, in order.
    """
    received: list[int] = []

    def handler(signum: int, frame: Any) -> None:
        received.append(signum)
        if len(received) == 1:
            raise signal_exception(f"Process {os.getpid()} got signal: {signum}", sigval=signal.Signals(signum))
        if signum == signal.SIGINT:
            for pid in worker_pids():
                try:
                    os.kill(pid, signal.SIGINT)
                except ProcessLookupError:
                    pass

    if threading.current_thread() is not threading.main_thread():  # no signals here: torch's own handling
        yield received
        return
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, handler)
    try:
        yield received
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
    received: list[int] = []
    try:
        with stop_signals_forwarded(SignalException) as received:
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
        if ended is not None:  # rank 0 ended first (finished: 0; stopped by this signal: 130/143)
            return ended
        if signal.SIGINT in received[1:]:  # a later Ctrl-C stopped the ranks at once, as it does one process
            return 130
        return EXIT_CODES.get(signal.Signals(exc.sigval).name, 128 + int(exc.sigval))
    finally:
        os.environ.pop(EXIT_CODE_DIR_ENV, None)
        shutil.rmtree(codes, ignore_errors=True)
    return 0
