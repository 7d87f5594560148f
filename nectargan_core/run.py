"""The Python API: build a run from a config, train it, read it back.

::

    from nectargan_core import Run

    run = Run.create("config.yaml", overrides=["loop.epochs=5"], plugins=[MyCallback()])
    run.fit()                      # or: run.fit_epoch() five times
    print(run.dir, run.metrics()[-1])

    run = Run.resume("runs/facades/version_3")    # the whole state, exactly
    run.fit()

A run gets its own plugin manager for the run hooks, holding only the trainer,
the visualizers and callbacks its config enables, and the plugin objects
passed in ``plugins``: installed plugins never fire in runs that do not use them.
"""

from __future__ import annotations

import os
import shutil
import sys
import weakref
from pathlib import Path
from typing import Any, Iterable, Mapping

import pluggy
import torch

from . import hookspecs, launchfolder
from .atomic import atomic_write_text, missing_folders, remove_if_empty
from .checkpoint import load_checkpoint
from .config import CoreConfig, dump_yaml, load_config, load_file
from .config.sections import amp_mode, check_amp
from .device import cudnn_benchmark, resolve_device, seed_everything, set_deterministic
from .distributed import Distributed
from .errors import CheckpointError, ConfigError, NectarGANError, PluginError, RunDirError
from .filekind import kind_of
from .guard import guard
from .hookcheck import check_object, check_run_parts
from .hookproxy import object_name, part_of, proxy_for
from .jsonfiles import read_json_object
from .metrics import read_metrics
from .plugins import PluginHost, env_flag, get_plugins, make_tracer
from .provenance import pins_for
from .rundir import RunDir, latest_run
from .runlock import RunLock, describe_holder
from .stepgraph import check_mode as check_graph_mode
from .text import printable
from .trainer import Trainer, check_trainer_class


class Run:
    """One training run: its config, run directory, hooks and trainer."""

    def __init__(
        self,
        config: CoreConfig,
        run_dir: RunDir,
        *,
        plugins: Iterable[Any] = (),
        host: PluginHost | None = None,
        checkpoint: Mapping[str, Any] | None = None,
        dist: Distributed | None = None,
        lock: RunLock | None = None,
        data_changed: bool = False,
    ) -> None:
        self.host = host or get_plugins()
        #: This process's exclusive hold on the run directory (rank 0; None in the other ranks).
        self.lock = lock
        #: This process's place in a distributed run (torchrun); world size 1 otherwise.
        self.dist = dist or Distributed()
        self.config = config
        self.init_report: dict[str, Any] | None = None
        self.run_dir = run_dir
        if checkpoint is None:  # a resume notes it once the checkpoint loaded (a refused one has nothing to continue)
            launchfolder.note_run_dir(run_dir.path)  # under --nproc: the launcher's failure line names it
        if config.trainer is None:
            names = ", ".join(self.host.registry.names("trainer")) or "none installed"
            raise ConfigError(f"trainer: no trainer chosen; set 'trainer' in the config or use --trainer (installed: {names})")
        registry = self.host.registry.pinned(pins_for(config))  # bare names resolve as the config recorded them
        component = registry.get("trainer", config.trainer, key="trainer")
        trainer_cls = component.load()
        if not (isinstance(trainer_cls, type) and issubclass(trainer_cls, Trainer)):
            raise PluginError(
                f"trainer '{component.name}' from {component.provided_by} is not a subclass of nectargan_core.Trainer"
            )
        check_trainer_class(trainer_cls, f"trainer '{component.name}' ({component.provided_by})")
        self.pm = pluggy.PluginManager(hookspecs.PROJECT_NAME)
        self.pm.add_hookspecs(hookspecs.RunSpecs)
        if env_flag(self.host.env, "NECTARGAN_TRACE_PLUGINS"):
            self.pm.add_hookcall_monitoring(*make_tracer())
        # Registered first = called last: callbacks, visualizers, API plugins, then the trainer.
        # Visualizers run in rank 0 only; callbacks run in every process (they may steer training).
        sections = [("callback", config.callbacks)] + ([("visualizer", config.visualizers)] if self.dist.is_main else [])
        for kind, section in sections:
            for name, options in section.items():
                part = registry.get(kind, name, key=f"{kind}s").load()(**options)
                label = f"{kind} '{name}'"
                self._register(guard(part, label, self.host.strict), f"{kind}:{name}")
        for index, plugin in enumerate(plugins):
            name = f"api:{object_name(plugin)}:{index}"
            self._register(proxy_for(plugin, name), name)

        run_cfg = config.run
        if run_cfg.threads:
            torch.set_num_threads(run_cfg.threads)
        set_deterministic(run_cfg.deterministic, cudnn_benchmark(config))
        # Rank r draws from seed + r (dropout masks differ across processes); rank 0 matches a single process.
        seed_everything(run_cfg.seed + self.dist.rank)
        device = self.dist.device(resolve_device(run_cfg.device))
        if device.type == "cuda" and device.index is not None and not self.dist.enabled:
            torch.cuda.set_device(device)  # cuda:N: current_stream() and events then mean that GPU's, as in DDP
        self.trainer: Trainer = trainer_cls(
            config=config, run_dir=run_dir, hook=self.pm.hook, device=device, name=component.name,
            registry=registry, dist=self.dist,
        )
        self.trainer._run_lock = weakref.ref(lock) if lock is not None else None
        self._register(proxy_for(self.trainer, f"trainer '{component.name}'"), f"trainer:{component.name}")
        if checkpoint is not None:
            self.trainer.load_checkpoint(checkpoint, data_changed=data_changed)
            launchfolder.note_run_dir(run_dir.path)
        elif run_cfg.init_from:
            try:
                self.init_report = self.trainer.init_from(run_cfg.init_from, strict=run_cfg.init_from_strict)
            except NectarGANError as exc:  # the new run directory says why it never trained
                if self.dist.is_main:
                    run_dir.write_status("failed", epoch=0, step=0, error=f"{type(exc).__name__}: {exc}")
                raise

    def _register(self, plugin: Any, name: str) -> None:
        """Register ``plugin`` (a :class:`~nectargan_core.hookproxy.HookProxy`) under ``name``."""
        problems = check_object(part_of(plugin), name, "run")  # one line per problem, not pluggy's three
        if problems:
            raise PluginError("\n".join(problems))
        try:
            self.pm.register(plugin, name=name)
        except Exception as exc:  # pluggy validation errors
            raise PluginError(f"{name}: invalid hook implementation: {str(exc).strip().splitlines()[-1]}") from None
        for caller in self.pm.get_hookcallers(plugin) or []:
            if not caller.has_spec():
                self.pm.unregister(plugin)
                raise PluginError(
                    f"{name}: '{caller.name}' is not a run hook; known run hooks: {', '.join(hookspecs.RUN_HOOKS)}"
                )

    # -- constructors ----------------------------------------------------
    @classmethod
    def create(
        cls,
        config: str | Path | Mapping[str, Any] | CoreConfig | None = None,
        *,
        overrides: Iterable[str] = (),
        plugins: Iterable[Any] = (),
        host: PluginHost | None = None,
    ) -> "Run":
        """A new run (new ``version_N`` directory) from a config file, dict or object."""
        host = host or get_plugins()
        resolved = load_config(config, overrides, host.registry)
        if resolved.run.init_from and not Path(resolved.run.init_from).is_file():  # before a run directory exists
            raise CheckpointError(f"{resolved.run.init_from}: checkpoint file not found (run.init_from)")
        check_run_parts(resolved, host.registry.pinned(pins_for(resolved)))  # before a run directory exists
        restarted = elastic_restart_target(resolved.run.output_dir, resolved.run.name)
        if restarted is not None:
            if os.environ.get("RANK", "0") == "0":
                print(f"torchrun restarted the processes: resuming {restarted.path}", file=sys.stderr)
            return cls.resume(restarted.path, plugins=plugins, host=host)
        check_before_run_dir(resolved, host)
        dist = Distributed.from_environment(resolved.distributed, resolved.run.device)
        path, lock = None, None
        if dist.is_main:  # one run directory for all processes
            made = missing_folders(Path(resolved.run.output_dir) / resolved.run.name)
            run_dir = RunDir.create(resolved.run.output_dir, resolved.run.name)
            launchfolder.note_run_dir(run_dir.path)  # under --nproc: named, and given a status, if the launcher dies
            try:
                lock = RunLock.acquire(run_dir.path)
                atomic_write_text(run_dir.config_file, dump_yaml(resolved.to_dict()))
                record_launch(run_dir, dist)
            except BaseException:  # a full disk, a file size limit: the new folder holds nothing of use yet
                if lock is not None:
                    lock.release()
                shutil.rmtree(run_dir.path, ignore_errors=True)
                remove_if_empty(made)  # and the output folders it made for it
                raise
            path = str(run_dir.path)
        run_dir = RunDir(Path(dist.broadcast(path)))
        try:
            return cls(resolved, run_dir, plugins=plugins, host=host, dist=dist, lock=lock)
        except BaseException:
            if lock is not None:
                lock.release()
            raise

    @classmethod
    def resume(
        cls,
        target: str | Path = "latest",
        *,
        output_dir: str | Path = "runs",
        name: str | None = None,
        checkpoint: str | Path | None = None,
        overrides: Iterable[str] = (),
        plugins: Iterable[Any] = (),
        host: PluginHost | None = None,
        keep_schedule: bool = False,
        data_changed: bool = False,
    ) -> "Run":
        """Continue a run from its latest good checkpoint (or ``checkpoint``), exactly.

        ``target`` is a run directory or ``"latest"`` (the most recently
        updated run under ``output_dir``). ``overrides`` may change values such
        as ``loop.epochs`` to train longer. ``keep_schedule`` keeps schedules
        fitted to the epochs the run was planned for (``loop.schedule_epochs``),
        whatever ``loop.epochs`` becomes; the config records it. A mid-epoch
        checkpoint whose train files were added, removed or renamed since is
        refused (``CheckpointError``) unless ``data_changed``: the epoch then
        goes on over the files there now.
        """
        host = host or get_plugins()
        overrides = list(overrides)
        if keep_schedule:
            check_keep_schedule(overrides)
        run_dir = latest_run(output_dir, name) if str(target) == "latest" else RunDir.open(target)
        # Rank 0 (known from torchrun's environment before the process group exists) takes the run first:
        # a second writer is refused before anything is read or changed.
        lock = RunLock.acquire(run_dir.path, record=False) if os.environ.get("RANK", "0") == "0" else None
        try:
            for folder in (run_dir.checkpoints, run_dir.examples):  # before a whole epoch is trained to fail there
                if os.path.lexists(folder) and (folder.is_symlink() or not folder.is_dir()):
                    raise RunDirError(printable(f"{folder}: is {kind_of(os.lstat(folder).st_mode)}, not a folder of the run; "
                                                "move it out of the run directory and resume again"))
            run = cls._resume(run_dir, lock, checkpoint, overrides, plugins, host, keep_schedule, data_changed)
            # The state loaded: only now does anything in the run directory change.
            if run.dist.is_main:
                run.run_dir.remove_stale_temps()  # temp files of a write killed midway (SIGKILL in a checkpoint write)
                # a run with nothing left to train is refused by the command and stays exactly as it was
                if (overrides or keep_schedule) and not run.finished:
                    atomic_write_text(run.run_dir.config_file, dump_yaml(run.config.to_dict()))
                record_launch(run.run_dir, run.dist)
                if lock is not None:
                    lock.record()
        except BaseException:
            if lock is not None:
                lock.release(undo=True)
            raise
        return run

    @classmethod
    def _resume(cls, run_dir: RunDir, lock: RunLock | None, checkpoint: str | Path | None,
                overrides: list[str], plugins: Iterable[Any], host: PluginHost, keep_schedule: bool = False,
                data_changed: bool = False) -> "Run":
        """Build the resumed run in memory: config, processes, networks, the checkpoint's state; no writes."""
        data = load_file(run_dir.config_file)
        if keep_schedule:  # the epochs the stored config fits its schedules to, before this resume's overrides
            planned = load_config(data, (), host.registry, label=str(run_dir.config_file)).loop.fitted_epochs
            overrides = [*overrides, f"loop.schedule_epochs={planned}"]
        resolved = load_config(data, overrides, host.registry, label=str(run_dir.config_file))
        check_run_parts(resolved, host.registry.pinned(pins_for(resolved)))
        dist = Distributed.from_environment(resolved.distributed, resolved.run.device)
        # Every process resumes the run rank 0 chose, from the checkpoint rank 0 chose.
        run_dir = RunDir(Path(dist.broadcast(str(run_dir.path))))
        chosen, loaded = None, None
        if dist.is_main:
            if lock is not None and lock.previous and run_dir.read_status().get("status") == "running":
                print(f"note: {describe_holder(lock.previous)}, which was training this run, is gone without "
                      "saying so (killed?); this process takes the run over", file=sys.stderr)
            if checkpoint is not None and restarted_after(checkpoint, run_dir):
                checkpoint = None  # torchrun restarted the job: continue from what it saved since
            if checkpoint is not None:
                chosen, loaded = checkpoint, load_checkpoint(checkpoint)
            else:
                chosen, loaded = find_resume_checkpoint(run_dir)
                note_newer_emergency(run_dir, chosen, loaded)
        chosen = dist.broadcast(str(chosen))
        if loaded is None:
            loaded = load_checkpoint(chosen)
        try:
            return cls(resolved, run_dir, plugins=plugins, host=host, checkpoint=loaded, dist=dist, lock=lock,
                       data_changed=data_changed)
        except CheckpointError as exc:  # restoring failed (a missing entry, networks that do not fit): name the file
            named = str(exc) if str(exc).startswith(str(chosen)) else f"{chosen}: {exc}"
            raise CheckpointError(f"{named}; nothing in {run_dir.path} was changed") from None

    # -- using -----------------------------------------------------------
    @property
    def dir(self) -> Path:
        """The run directory (``output_dir/name/version_N``)."""
        return self.run_dir.path

    def fit(self) -> "Run":
        """Train to the end (``loop.epochs``, ``loop.max_steps`` or a stop request); returns the run."""
        return self._train(self.trainer.fit)

    def fit_epoch(self) -> "Run":
        """Train one epoch, or what is left of the current one; returns the run."""
        return self._train(self.trainer.fit_epoch)

    def _train(self, body: Any) -> "Run":
        """Run ``body``; let go of the run directory once training is over (finished, stopped or failed)."""
        try:
            body()
        except BaseException:
            if self.lock is not None:
                self.lock.release()
            raise
        if self.lock is not None and self.trainer.finished:
            self.lock.release()
        return self

    @property
    def finished(self) -> bool:
        """Whether training has reached its end (or was stopped)."""
        return self.trainer.finished

    def metrics(self, kind: str | None = None) -> list[dict[str, Any]]:
        """Records of the metrics log (``kind``: train, val or epoch)."""
        return list(read_metrics(self.run_dir.metrics_file, kind))

    def status(self) -> dict[str, Any]:
        """The run's ``status.json``: ``status`` (running, finished, failed, interrupted), epoch, step, ..."""
        return self.run_dir.read_status()

    def close(self) -> None:
        """Let go of the run directory; leave the process group of a distributed run that ended normally."""
        if self.lock is not None:
            self.lock.release()
        self.dist.close()


def check_before_run_dir(config: CoreConfig, host: PluginHost) -> None:
    """What can be refused without training is refused before a run directory is made for it."""
    if config.trainer is None:
        names = ", ".join(host.registry.names("trainer")) or "none installed"
        raise ConfigError(f"trainer: no trainer chosen; set 'trainer' in the config or use --trainer (installed: {names})")
    device = resolve_device(config.run.device)  # an unavailable device (cuda without one): one line, no run dir
    registry = host.registry.pinned(pins_for(config))  # bare names resolve as the config recorded them
    component = registry.get("trainer", config.trainer, key="trainer")
    trainer_cls = component.load()
    if isinstance(trainer_cls, type) and issubclass(trainer_cls, Trainer):
        check_trainer_class(trainer_cls, f"trainer '{component.name}' ({component.provided_by})")
        check_graph_mode(config, trainer_cls, device.type)
        check_amp(amp_mode(config), device.type)
    check = getattr(trainer_cls, "check_config", None)
    if callable(check):
        check(config, registry)


def find_resume_checkpoint(run_dir: RunDir) -> tuple[Path, dict[str, Any]]:
    """The newest periodic checkpoint of ``run_dir`` that loads, and its contents (bad ones are skipped)."""
    candidates = list(reversed(run_dir.periodic_checkpoints()))
    if not candidates:
        emergency = run_dir.emergency_checkpoints()
        if emergency:
            raise CheckpointError(
                f"{run_dir.path}: no periodic checkpoint to resume from, only the emergency checkpoint saved when "
                f"the run failed; continue from it with: nectargan train --resume {run_dir.path} "
                f"--checkpoint {emergency[-1]}")
        raise CheckpointError(f"{run_dir.path}: no checkpoint to resume from; start a new run instead")
    problems = []
    for path in candidates:
        try:
            return path, load_checkpoint(path)
        except CheckpointError as exc:
            problems.append(str(exc))
            print(f"warning: skipping bad checkpoint: {exc}", file=sys.stderr)
    raise CheckpointError(f"{run_dir.path}: no loadable checkpoint ({problems[-1]})")


def note_newer_emergency(run_dir: RunDir, chosen: Path, loaded: Mapping[str, Any]) -> Path | None:
    """Say so when an emergency checkpoint (saved when the run failed) is further on than ``chosen``.

    ``--resume`` does not take it by itself: it may hold part of the update of
    the step that failed, so the resumed run would not be the uninterrupted
    run bit for bit. The line gives the command that continues from it.
    """
    step = int(loaded.get("global_step", 0))
    newer = [p for p in run_dir.emergency_checkpoints() if RunDir.emergency_step(p) > step]
    if not newer:
        return None
    path = newer[-1]
    print(f"note: {path} (step {RunDir.emergency_step(path)}), saved when the run failed, is newer than the "
          f"checkpoint resumed from (step {step}); to continue from it instead: nectargan train --resume "
          f"{run_dir.path} --checkpoint {path}", file=sys.stderr)
    return path


LAUNCH_FILE = "launch.json"


def record_launch(run_dir: RunDir, dist: Distributed) -> None:
    """Note which torchrun job uses ``run_dir``, so an elastic restart of that job finds it again."""
    import json

    run_id = os.environ.get("TORCHELASTIC_RUN_ID")
    if dist.enabled and run_id:
        atomic_write_text(run_dir.path / LAUNCH_FILE,
                          json.dumps({"torchelastic_run_id": run_id, "world_size": dist.world_size}) + "\n")


def elastic_restart_target(output_dir: str | Path, name: str) -> RunDir | None:
    """After torchrun restarted this job's workers: the run directory the first attempt made.

    ``TORCHELASTIC_RESTART_COUNT`` > 0 means the workers were restarted after a
    failure; the run whose ``launch.json`` names this ``TORCHELASTIC_RUN_ID``
    (and has a checkpoint) is resumed instead of starting a new one.
    """
    run_id = os.environ.get("TORCHELASTIC_RUN_ID")
    if not run_id or int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") or 0) == 0:
        return None
    parent = Path(output_dir) / name
    for launch in sorted(parent.glob(f"version_*/{LAUNCH_FILE}")):
        try:
            same = read_json_object(launch).get("torchelastic_run_id") == run_id
        except (OSError, ValueError):
            continue
        run_dir = RunDir(launch.parent)
        if same and run_dir.periodic_checkpoints():
            return run_dir
    return None


def restarted_after(checkpoint: str | Path, run_dir: RunDir) -> bool:
    """Whether torchrun restarted this job and the run has a periodic checkpoint newer than ``checkpoint``."""
    if int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") or 0) == 0:
        return False
    newest = run_dir.periodic_checkpoints()
    try:
        return bool(newest) and newest[-1].stat().st_mtime > Path(checkpoint).stat().st_mtime
    except OSError:
        return False


def check_keep_schedule(overrides: Iterable[str]) -> None:
    """Refuse ``--keep-schedule`` beside an override of the key it sets."""
    if any(o.partition("=")[0].strip() == "loop.schedule_epochs" for o in overrides):
        raise ConfigError("--keep-schedule sets loop.schedule_epochs to the epochs the run was planned for; "
                          "give one of --keep-schedule and --set loop.schedule_epochs")
