"""Data-parallel training over several processes, through torch.distributed.

A run started by ``torchrun`` (or ``nectargan train --nproc N``) finds
``WORLD_SIZE``/``RANK``/``LOCAL_RANK`` in its environment and joins the
process group here. Everything a trainer needs for data parallelism goes
through one :class:`Distributed` object (``trainer.dist``):

* ``wrap(module)``: DistributedDataParallel (optionally SyncBatchNorm);
* ``all_mean(tensor)``, ``all_sum``, ``all_gather``: loss averages and other
  device tensors across ranks (the data plane: NCCL on CUDA, gloo on CPU);
* ``any_true(flag)``, ``broadcast(obj)``, ``gather(obj)``: small control
  messages (stop requests, validation results, RNG states) on a gloo group, so
  agreeing on them never forces a GPU synchronisation;
* ``is_main``: rank 0 alone writes the run directory, metrics log,
  checkpoints and example images, and runs visualizers.

A single process gets a ``Distributed`` with ``world_size == 1`` whose
methods are no-ops, so trainers need no special cases.
"""

from __future__ import annotations

import datetime
import os
from typing import Any, Callable, TypeVar

import torch

from .errors import ConfigError, NectarGANError

T = TypeVar("T")

#: How long the control group waits (rank 0 validating, writing a checkpoint) before giving up.
CONTROL_TIMEOUT_S = 6 * 3600


class DistributedError(NectarGANError):
    """Another process of a distributed run failed or stopped answering."""


def launched_by_torchrun(env: dict[str, str] | None = None) -> bool:
    env = os.environ if env is None else env
    return int(env.get("WORLD_SIZE", "1") or 1) > 1


class Distributed:
    """This process's place in a data-parallel run (world size 1 when not distributed)."""

    def __init__(self, world_size: int = 1, rank: int = 0, local_rank: int = 0,
                 backend: str | None = None, control: Any = None, timeout_s: float | None = None) -> None:
        self.world_size = world_size
        self.rank = rank
        self.local_rank = local_rank
        self.backend = backend
        self.control = control
        self.timeout_s = timeout_s

    # -- joining ---------------------------------------------------------
    @classmethod
    def from_environment(cls, section: Any, device_spec: str) -> "Distributed":
        """Join the process group torchrun describes in the environment (or stay alone).

        ``section`` is the config's ``distributed`` section; ``device_spec``
        is ``run.device`` (CUDA runs put rank ``LOCAL_RANK`` on ``cuda:LOCAL_RANK``).
        """
        if not launched_by_torchrun():
            return cls()
        import torch.distributed as dist

        world = int(os.environ["WORLD_SIZE"])
        rank = int(os.environ.get("RANK", "0"))
        local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        if not dist.is_available():  # pragma: no cover - every Linux build has it
            raise ConfigError("distributed: this torch build has no torch.distributed")
        cuda = device_spec.startswith("cuda") or (device_spec == "auto" and torch.cuda.is_available())
        backend = section.backend
        if backend == "auto":
            backend = "nccl" if cuda else "gloo"
        if backend == "nccl" and not cuda:
            raise ConfigError("distributed.backend: nccl needs CUDA devices (run.device is "
                              f"'{device_spec}'); use distributed.backend=gloo on CPU")
        if cuda:
            if local_rank >= torch.cuda.device_count():
                raise ConfigError(f"distributed: LOCAL_RANK {local_rank} but this machine has "
                                  f"{torch.cuda.device_count()} CUDA device(s); start at most that many processes")
            torch.cuda.set_device(local_rank)
        timeout = datetime.timedelta(seconds=section.timeout_s)
        if not dist.is_initialized():
            from torch.distributed.rendezvous import rendezvous

            # Keys of each torchrun restart under their own prefix: a restarted rank must
            # never read the address a dead rank of the previous attempt left in the store.
            store, rank, world = next(rendezvous("env://", rank, world, timeout=timeout))
            attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
            dist.init_process_group(backend=backend, store=dist.PrefixStore(f"nectargan/attempt{attempt}", store),
                                    rank=rank, world_size=world, timeout=timeout)
        # The control group waits longer: the other ranks wait in it while rank 0 validates
        # (a rank that dies is noticed by torchrun's agent at once; a hung data plane by timeout_s).
        wait = datetime.timedelta(seconds=max(section.timeout_s, CONTROL_TIMEOUT_S))
        control = dist.new_group(backend="gloo", timeout=wait)
        return cls(world, rank, local_rank, backend, control, section.timeout_s)

    @property
    def enabled(self) -> bool:
        """Whether the run has several processes."""
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        """Whether this is rank 0, the process that writes the run's files."""
        return self.rank == 0

    def device(self, device: torch.device) -> torch.device:
        """This rank's device: ``cuda:LOCAL_RANK`` for CUDA runs, else ``device`` itself."""
        if self.enabled and device.type == "cuda":
            return torch.device("cuda", self.local_rank)
        return device

    def close(self) -> None:
        """Leave the process group after a run that ended normally.

        Every rank first waits for the others (a process tearing down its
        connections while a peer still finishes its last collective can abort
        that peer). After a failure do not call this: a rank waiting here would
        keep a peer blocked in a training collective alive; just exit.
        """
        if self.enabled:
            import torch.distributed as dist

            if dist.is_initialized():
                try:
                    self.barrier()
                except DistributedError:
                    pass
                dist.destroy_process_group()
            self.world_size = 1

    # -- the data plane --------------------------------------------------
    def wrap(self, module: torch.nn.Module, *, sync_batchnorm: bool = False,
             find_unused_parameters: bool = False) -> torch.nn.Module:
        """DistributedDataParallel around ``module`` (``module`` itself when alone).

        Train through the wrapper (so gradients are averaged across ranks);
        checkpoint and evaluate the module itself (``wrapper.module``).
        """
        if not self.enabled:
            return module
        from torch.nn.parallel import DistributedDataParallel

        if sync_batchnorm:
            if next(module.parameters()).device.type == "cpu":
                raise ConfigError("distributed.sync_batchnorm: SyncBatchNorm runs on CUDA only; set it to false "
                                  "on CPU (or use a model with instance norm)")
            module = torch.nn.SyncBatchNorm.convert_sync_batchnorm(module)
        device = next(module.parameters()).device
        ids = [device.index] if device.type == "cuda" else None
        return DistributedDataParallel(module, device_ids=ids, find_unused_parameters=find_unused_parameters)

    def all_sum(self, tensor: torch.Tensor) -> torch.Tensor:
        """The sum of ``tensor`` over all ranks (on its device; no host read)."""
        if not self.enabled:
            return tensor
        import torch.distributed as dist

        tensor = tensor.clone()
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
        return tensor

    def all_mean(self, tensor: torch.Tensor) -> torch.Tensor:
        """The mean of ``tensor`` over all ranks (on its device; no host read)."""
        return self.all_sum(tensor) / self.world_size if self.enabled else tensor

    def all_gather(self, tensor: torch.Tensor) -> torch.Tensor:
        """Every rank's ``tensor`` concatenated along dim 0, in rank order (on its device; no host read).

        Each rank must pass a tensor of the same shape. Not differentiable: for detached values
        that every rank needs whole, such as the fakes of CycleGAN's shared image pools.
        """
        if not self.enabled:
            return tensor
        import torch.distributed as dist

        tensor = tensor.contiguous()
        parts = [torch.empty_like(tensor) for _ in range(self.world_size)]
        dist.all_gather(parts, tensor)
        return torch.cat(parts)

    def any_on_device(self, flag: torch.Tensor) -> torch.Tensor:
        """Whether the boolean ``flag`` is true on any rank, as a device tensor (no host read)."""
        if not self.enabled:
            return flag
        import torch.distributed as dist

        value = flag.to(torch.int32)
        dist.all_reduce(value, op=dist.ReduceOp.MAX)
        return value.bool()

    # -- the control plane (gloo, CPU) -----------------------------------
    def _control(self, call: Callable[[], T]) -> T:
        try:
            return call()
        except RuntimeError as exc:
            raise DistributedError(
                f"rank {self.rank}: lost contact with the other processes of this run ({first_line(exc)}); "
                "another rank probably failed: see its error above") from exc

    def any_true(self, flag: bool) -> bool:
        """Whether ``flag`` is true on any rank (all ranks must call this at the same point)."""
        if not self.enabled:
            return flag
        import torch.distributed as dist

        value = torch.tensor([1 if flag else 0], dtype=torch.int32)
        self._control(lambda: dist.all_reduce(value, op=dist.ReduceOp.MAX, group=self.control))
        return bool(value.item())

    def broadcast(self, obj: T) -> T:
        """Rank 0's ``obj`` on every rank."""
        if not self.enabled:
            return obj
        import torch.distributed as dist

        holder = [obj]
        self._control(lambda: dist.broadcast_object_list(holder, src=0, group=self.control))
        return holder[0]

    def gather(self, obj: T) -> list[T]:
        """Every rank's ``obj``, in rank order, on every rank."""
        if not self.enabled:
            return [obj]
        import torch.distributed as dist

        out: list[Any] = [None] * self.world_size
        self._control(lambda: dist.all_gather_object(out, obj, group=self.control))
        return out

    def barrier(self) -> None:
        """Wait until every process gets here (nothing to do for one process)."""
        if self.enabled:
            import torch.distributed as dist

            self._control(lambda: dist.barrier(group=self.control))


def first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__

