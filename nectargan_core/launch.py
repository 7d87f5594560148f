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
is stopped as the launcher dies (:mod:`nectargan_core.orphans`). What the
ranks leave for the launcher is in :mod:`nectargan_core.launchfolder`.
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
from typing import Any, Iterator, Sequence

from .errors import NectarGANError
from .launchfolder import (ERROR_KEY, EXIT_CODE_DIR_ENV, LAUNCHER_PID_ENV, SHUTDOWN_TIMEOUT_S, WATCHMAN_ENV,
                           rank0_exit_code, recorded_error, resume_hint)
from .orphans import end_watchman, start_watchman
from .procfs import children, command_line, proc_state, rank_of, wake
from .signals import EXIT_CODES, settle

#: The environment variable naming the signals torch's agent handles itself.
SIGNALS_ENV = "TORCHELASTIC_SIGNALS_TO_HANDLE"
AGENT_SIGNALS = "SIGHUP,SIGQUIT"


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
    return [pid for pid in children() if any(b"nectargan_core" in arg for arg in command_line(pid))]


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
        name = signal.Signals(exc.sigval).name
        # rank 0 left no exit code: it ended before its own handling began, while the processes were starting
        print(f"interrupted ({name}) while the processes were starting, before training"
              + (resume_hint(codes, nproc) or "; run the same command again"), file=sys.stderr, flush=True)
        if signal.SIGINT in received[1:]:  # a later Ctrl-C stopped the ranks at once, as it does one process
            return 130
        return EXIT_CODES.get(name, 128 + int(exc.sigval))
    finally:
        for name in (EXIT_CODE_DIR_ENV, WATCHMAN_ENV, LAUNCHER_PID_ENV):  # this process is no launcher any more
            os.environ.pop(name, None)
        end_watchman(watching)
        shutil.rmtree(codes, ignore_errors=True)
        for pid, rank in woken.items():  # last: the line that says why a process someone had stopped went on
            print(f"note: rank {rank} (pid {pid}) was stopped (SIGSTOP) when the run was asked to stop: sent it "
                  "SIGCONT so that it stopped with the others", file=sys.stderr, flush=True)
    return 0
