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

import sys
from pathlib import Path
from typing import Any, Iterable, Mapping

import pluggy
import torch

from . import hookspecs
from .atomic import atomic_write_text
from .checkpoint import load_checkpoint
from .config import CoreConfig, dump_yaml, load_config, load_file
from .device import resolve_device, seed_everything, set_deterministic
from .errors import CheckpointError, ConfigError, PluginError
from .guard import guard
from .metrics import read_metrics
from .plugins import PluginHost, env_flag, get_plugins, make_tracer
from .rundir import RunDir, latest_run
from .trainer import Trainer


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
    ) -> None:
        self.host = host or get_plugins()
        self.config = config
        self.init_report: dict[str, Any] | None = None
        self.run_dir = run_dir
        if config.trainer is None:
            names = ", ".join(self.host.registry.names("trainer")) or "none installed"
            raise ConfigError(f"trainer: no trainer chosen; set 'trainer' in the config or use --trainer (installed: {names})")
        component = self.host.registry.get("trainer", config.trainer, key="trainer")
        trainer_cls = component.load()
        if not (isinstance(trainer_cls, type) and issubclass(trainer_cls, Trainer)):
            raise PluginError(
                f"trainer '{component.name}' from {component.provided_by} is not a subclass of nectargan_core.Trainer"
            )
        self.pm = pluggy.PluginManager(hookspecs.PROJECT_NAME)
        self.pm.add_hookspecs(hookspecs.RunSpecs)
        if env_flag(self.host.env, "NECTARGAN_TRACE_PLUGINS"):
            self.pm.add_hookcall_monitoring(*make_tracer())
        # Registered first = called last: callbacks, visualizers, API plugins, then the trainer.
        for kind, section in (("callback", config.callbacks), ("visualizer", config.visualizers)):
            for name, options in section.items():
                part = self.host.registry.get(kind, name, key=f"{kind}s").load()(**options)
                label = f"{kind} '{name}'"
                self._register(guard(part, label, self.pm.parse_hookimpl_opts, self.host.strict),
                               f"{kind}:{name}")
        for index, plugin in enumerate(plugins):
            self._register(plugin, f"api:{getattr(plugin, '__name__', type(plugin).__name__)}:{index}")

        run_cfg = config.run
        if run_cfg.threads:
            torch.set_num_threads(run_cfg.threads)
        set_deterministic(run_cfg.deterministic)
        seed_everything(run_cfg.seed)
        device = resolve_device(run_cfg.device)
        self.trainer: Trainer = trainer_cls(
            config=config, run_dir=run_dir, hook=self.pm.hook, device=device, name=component.name,
            registry=self.host.registry,
        )
        self._register(self.trainer, f"trainer:{component.name}")
        if checkpoint is not None:
            self.trainer.load_checkpoint(checkpoint)
        elif run_cfg.init_from:
            self.init_report = self.trainer.init_from(run_cfg.init_from)

    def _register(self, plugin: Any, name: str) -> None:
        try:
            self.pm.register(plugin, name=name)
        except Exception as exc:  # pluggy validation errors
            raise PluginError(f"{name}: invalid hook implementation: {exc}") from None
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
        run_dir = RunDir.create(resolved.run.output_dir, resolved.run.name)
        atomic_write_text(run_dir.config_file, dump_yaml(resolved.to_dict()))
        return cls(resolved, run_dir, plugins=plugins, host=host)

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
    ) -> "Run":
        """Continue a run from its latest good checkpoint (or ``checkpoint``), exactly.

        ``target`` is a run directory or ``"latest"`` (the most recently
        updated run under ``output_dir``). ``overrides`` may change values such
        as ``loop.epochs`` to train longer.
        """
        host = host or get_plugins()
        run_dir = latest_run(output_dir, name) if str(target) == "latest" else RunDir.open(target)
        data = load_file(run_dir.config_file)
        resolved = load_config(data, overrides, host.registry)
        if overrides:
            atomic_write_text(run_dir.config_file, dump_yaml(resolved.to_dict()))
        loaded = load_resume_checkpoint(run_dir, checkpoint)
        return cls(resolved, run_dir, plugins=plugins, host=host, checkpoint=loaded)

    # -- using -----------------------------------------------------------
    @property
    def dir(self) -> Path:
        return self.run_dir.path

    def fit(self) -> "Run":
        self.trainer.fit()
        return self

    def fit_epoch(self) -> "Run":
        self.trainer.fit_epoch()
        return self

    @property
    def finished(self) -> bool:
        return self.trainer.finished

    def metrics(self, kind: str | None = None) -> list[dict[str, Any]]:
        """Records of the metrics log (``kind``: train, val or epoch)."""
        return list(read_metrics(self.run_dir.metrics_file, kind))

    def status(self) -> dict[str, Any]:
        return self.run_dir.read_status()


def load_resume_checkpoint(run_dir: RunDir, checkpoint: str | Path | None = None) -> dict[str, Any]:
    """The checkpoint to resume from: the newest one that verifies and loads.

    A truncated or corrupt newest checkpoint is skipped with a warning naming it.
    """
    if checkpoint is not None:
        return load_checkpoint(checkpoint)
    candidates = list(reversed(run_dir.periodic_checkpoints()))
    if not candidates:
        raise CheckpointError(f"{run_dir.path}: no checkpoint to resume from; start a new run instead")
    problems = []
    for path in candidates:
        try:
            return load_checkpoint(path)
        except CheckpointError as exc:
            problems.append(str(exc))
            print(f"warning: skipping bad checkpoint: {exc}", file=sys.stderr)
    raise CheckpointError(f"{run_dir.path}: no loadable checkpoint ({problems[-1]})")
