"""``nectargan train --nproc N``: start N training processes on this machine through torchrun's agent.

This is ``torchrun --standalone --nproc-per-node N -m nectargan_core train ...``
run in-process (torch.distributed's elastic agent, c10d rendezvous on a free
local port), with two differences: a failed worker is reported in one line
that names its rank and exit status, and Ctrl-C / SIGTERM give the workers
time to finish their step and write a checkpoint.
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

    if "OMP_NUM_THREADS" not in os.environ:  # as torchrun: share the cores between the processes
        os.environ["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // nproc))
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
        raise LaunchError(
            f"rank {rank} (pid {failure.pid}) failed: {describe_exit(failure.exitcode)}"
            + (f" ({more} more rank(s) stopped after it)" if more else "")
            + "; the other processes were stopped (see the rank's error above); checkpoints already written "
            f"are kept: continue with nectargan train --resume RUN_DIR --nproc {nproc}") from None
    except SignalException as exc:
        return {signal.SIGINT: 130, signal.SIGTERM: 143}.get(exc.sigval, 128 + int(exc.sigval))
    return 0
