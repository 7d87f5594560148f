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

import dataclasses
import logging
import os
import signal
import sys
import uuid
from typing import Sequence

from .errors import NectarGANError

#: Seconds the agent waits for workers to stop after a signal before killing them.
SHUTDOWN_TIMEOUT_S = 120
#: The key under which a worker leaves its one-line error in torchrun's error file for the launcher.
ERROR_KEY = "nectargan_error"


def record_for_launcher(line: str) -> None:
    """In a worker started by torchrun's agent: leave this process's one-line error in its error file.

    The agent reads the file when the worker fails, and ``launch`` shows the
    line with the rank's exit status (a rank that timed out names the rank it
    waited for).
    """
    import json
    import time

    path = os.environ.get("TORCHELASTIC_ERROR_FILE")
    if not path or int(os.environ.get("WORLD_SIZE", "1") or 1) <= 1:
        return
    try:
        with open(path, "w", encoding="utf-8") as handle:
            json.dump({"message": line, "timestamp": int(time.time()), ERROR_KEY: line}, handle)
    except OSError:
        pass


class LaunchError(NectarGANError):
    """A worker process of ``--nproc`` training failed."""


def describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def launch(nproc: int, worker_args: Sequence[str], *, max_restarts: int = 0) -> int:
    """Run ``python -m nectargan_core <worker_args>`` in ``nproc`` processes; the exit code to use.

    Returns 0 when every worker finished, 130/143 when the launcher was
    interrupted; raises :class:`LaunchError` naming the first failed rank.
    """
    from torch.distributed.elastic.multiprocessing.api import DefaultLogsSpecs
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    from .distributed import LAUNCHER_PID_ENV

    if "OMP_NUM_THREADS" not in os.environ:  # as torchrun: share the cores between the processes
        os.environ["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // nproc))
    os.environ[LAUNCHER_PID_ENV] = str(os.getpid())
    logging.getLogger("torch.distributed.elastic").setLevel(logging.CRITICAL)
    options = dict(
        min_nodes=1, max_nodes=1, nproc_per_node=nproc, run_id=str(uuid.uuid4()),
        rdzv_backend="c10d", rdzv_endpoint="localhost:0", max_restarts=max_restarts,
        monitor_interval=0.1, start_method="spawn", logs_specs=DefaultLogsSpecs(),
    )
    if "shutdown_timeout" in {field.name for field in dataclasses.fields(LaunchConfig)}:
        options["shutdown_timeout"] = SHUTDOWN_TIMEOUT_S  # newer torch; older ones wait their fixed default
    config = LaunchConfig(**options)
    try:
        elastic_launch(config, sys.executable)("-m", "nectargan_core", *worker_args)
    except ChildFailedError as exc:
        rank, failure = min(exc.failures.items(), key=lambda item: item[1].timestamp)
        more = len(exc.failures) - 1
        own = failure.error_file_data.get(ERROR_KEY) if isinstance(failure.error_file_data, dict) else None
        why = own.removeprefix(f"rank {rank}: ") if isinstance(own, str) and own else describe_exit(failure.exitcode)
        raise LaunchError(
            f"rank {rank} (pid {failure.pid}) failed: {why}"
            + (f" ({more} more rank(s) stopped after it)" if more else "")
            + "; the other processes were stopped (see the rank's error above); checkpoints already written "
            f"are kept: continue with nectargan train --resume RUN_DIR --nproc {nproc}") from None
    except SignalException as exc:
        return {signal.SIGINT: 130, signal.SIGTERM: 143}.get(exc.sigval, 128 + int(exc.sigval))
    return 0
