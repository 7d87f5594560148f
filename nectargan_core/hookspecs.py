"""The hook specifications: the whole contract between the core and its plugins.

There are two families, kept on separate plugin managers on purpose:

* **Registration hooks** are called once, when plugins are loaded, on the
  plugin *modules* named by ``nectargan`` entry points. They add named parts
  (models, losses, trainers, ...) to the registry. They must stay cheap and
  must not import torch, so that ``nectargan --help`` and
  ``nectargan plugins list`` stay fast.
* **Run hooks** are called by the engine during one training run, and only on
  the objects enabled for that run: the trainer, the visualizers and callbacks
  named in the config, and plugin objects passed through the Python API.
  Installing a plugin never makes its run hooks fire in runs that do not use it.

pluggy calls every hook with keyword arguments; an implementation may accept
any subset of the arguments listed in its spec, in any order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Mapping, MutableMapping, Optional, Sequence

import pluggy

if TYPE_CHECKING:  # pragma: no cover - typing only
    import click

    from .reporting.sections import ReportSection, RunReport
    from .trainer import Trainer

PROJECT_NAME = "nectargan"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
"""Marks a hook specification of the ``nectargan`` project (for the core's hookspecs; plugins do not need it)."""
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)
"""Marks a function or method as a hook implementation: ``@hookimpl`` or ``@hookimpl(wrapper=True)``.

Put it on the ``register_*`` functions of a plugin module and on the run hooks
(``train_step``, ``on_epoch_end``, ...) of trainers, visualizers and callbacks;
functions without it are not hooks. It is pluggy's ``HookimplMarker`` for the
``nectargan`` project, so its keyword arguments (``wrapper``, ``tryfirst``,
``trylast``) are pluggy's.
"""

Register = Callable[..., None]
"""The ``register`` callable that every ``register_*`` hook receives.

Call it as ``register(name, obj, *, options=None, description=None, **meta)``:

- ``name``: the part's name (letters, digits, ``_`` and ``-``); users may also
  write it qualified, ``distribution:name``.
- ``obj``: the part itself, or a ``"module:attribute"`` string that is imported
  only when a run uses it (keeps ``nectargan plugins list`` fast and torch-free).
- ``options``: a pydantic model (or ``"module:Model"``) validating the options a
  config may give the part; ``None`` means it takes none.
- ``description``: one line for ``plugins list``/``show``; by default a mapping's
  ``description`` entry or the first line of ``obj``'s docstring.
- ``meta``: extra declarations some kinds read (see the contracts page).

Registering one name twice in one plugin is a :class:`~nectargan_core.PluginError`.
"""


class RegistrationSpecs:
    """Hooks called once per process, when plugins load (and option_hint, when a command line names an unknown
    option)."""

    @hookspec
    def register_models(self, register: Register) -> None:
        """Register generator and discriminator networks.

        Call ``register(name, factory, options=OptionsModel, role="generator"|"discriminator",
        description=...)`` once per model. ``factory(**options)`` must return a
        ``torch.nn.Module``; it may be given as a ``"module:attribute"`` string so
        that torch is imported only when the model is built.
        """

    @hookspec
    def register_losses(self, register: Register) -> None:
        """Register loss functions by name.

        ``register(name, factory, options=OptionsModel, description=...)``;
        ``factory(**options)`` returns a callable ``loss(prediction, target)``.
        """

    @hookspec
    def register_loss_specs(self, register: Register) -> None:
        """Register loss subspecs: named, weighted sets of loss terms.

        ``register(name, spec, description=...)`` where ``spec`` is the
        loss plugin's spec object (or a ``"module:attribute"`` string).
        """

    @hookspec
    def register_schedules(self, register: Register) -> None:
        """Register weight and learning-rate schedules by name.

        ``register(name, factory, options=OptionsModel, description=...)``;
        ``factory(**options)`` returns a schedule object (see nectargan-losses).
        """

    @hookspec
    def register_trainers(self, register: Register) -> None:
        """Register trainers: subclasses of :class:`nectargan_core.Trainer`.

        ``register(name, TrainerClass, options=ConfigSections, description=...)``.
        ``options`` is a pydantic model whose fields become top-level config
        sections when this trainer is selected (for example ``data``, ``models``).
        """

    @hookspec
    def register_datasets(self, register: Register) -> None:
        """Register datasets: ``register(name, factory, options=OptionsModel, description=...)``."""

    @hookspec
    def register_visualizers(self, register: Register) -> None:
        """Register visualizers: classes whose instances implement run hooks.

        ``register(name, VisualizerClass, options=OptionsModel, description=...)``.
        A visualizer is built once per run as ``VisualizerClass(**options)`` and
        only when the run's config lists it under ``visualizers``.
        """

    @hookspec
    def register_callbacks(self, register: Register) -> None:
        """Register callbacks: like visualizers, enabled per run under ``callbacks``.

        ``register(name, CallbackClass, options=OptionsModel, description=...)``.
        """

    @hookspec
    def register_config_sections(self, register: Register) -> None:
        """Register top-level config sections owned by a plugin.

        ``register(name, SectionModel, description=...)`` where ``SectionModel``
        is a pydantic model with defaults for every field. The section is
        validated in every run config and read with ``config.section(name)``.
        """

    @hookspec
    def register_presets(self, register: Register) -> None:
        """Register named run configs that ``nectargan config init --preset NAME`` starts from.

        ``register(name, config, description=...)`` where ``config`` is a
        mapping of config values (or a ``"module:attribute"`` string naming
        one) that names its ``trainer``; keys it leaves out keep their defaults.
        """

    @hookspec
    def register_metrics(self, register: Register) -> None:
        """Register evaluation metrics with the way they improve.

        ``register(name, metric, direction="min"|"max", description=...)``.
        ``direction`` is required: ``checkpoint.best_mode: auto`` and early
        stopping read it. What ``metric`` is depends on who computes it;
        nectargan-translate's validation and ``nectargan test`` call
        ``metric(fake, real)`` on images in [0, 1] and expect one value per
        image (a tensor of shape ``[batch]``).
        """

    @hookspec
    def register_commands(self, cli: "click.Group") -> None:
        """Add click commands to the ``nectargan`` command line: ``cli.add_command(cmd)``.

        Keep imports of heavy libraries inside the command functions.
        """

    @hookspec(firstresult=True)
    def option_hint(self, command: str, option: str) -> Optional[str]:
        """What to write instead of ``option``, which ``command`` (``"nectargan train"``) does not have, or None.

        Called when a command line names an unknown option, to point users
        coming from another tool at the equivalent (``--dataroot`` is ``--set
        data.root=DIR``). Return one short clause; the first plugin with an
        answer wins. Called outside any run: keep it cheap and torch-free.
        """


    @hookspec
    def report_sections(self, report: "RunReport") -> Optional[Sequence["ReportSection"]]:
        """Sections for ``nectargan report`` about what this plugin leaves in a run directory, or None.

        ``report`` says which run (``report.run``, ``report.summary``,
        ``report.config``) and where the page goes (``report.link(path)``), and
        hands out the page's pieces (``escape``, ``number``, ``table``,
        ``image``, ``image_row``, ``gallery``). Return
        ``ReportSection(anchor, heading, html)`` objects; they appear between
        the example grids and the timing, in plugin order. Read only files:
        the report also runs on a copy of a run from another machine, without
        torch. A hook that raises or returns something else is named in a
        short note on the page instead; the rest of the report is written.
        """


class RunSpecs:
    """Hooks called by the engine during a run, in this order::

        on_train_start
        for each epoch:
            on_epoch_start
            for each batch:
                train_step                (firstresult: the trainer's step)
                on_train_batch_end
                on_log                    (every loop.log_every_steps steps)
                on_save_checkpoint        (when a checkpoint is written)
            on_validation_start, validate, on_validation_end   (when due)
            on_epoch_end
            on_save_checkpoint            (when due)
        on_train_end
        on_exception                      (instead of the rest, if anything raises)

    ``on_load_checkpoint`` and then ``on_resume`` are called once, before
    ``on_train_start``, when a run resumes. Implementations run in reverse order of registration
    (callbacks, then visualizers, then the trainer, so the trainer runs first),
    subject to pluggy's ``tryfirst``/``trylast``.
    """

    @hookspec
    def on_train_start(self, trainer: "Trainer") -> None:
        """Called once, after set-up and any resume, before the first epoch runs."""

    @hookspec
    def on_epoch_start(self, trainer: "Trainer", epoch: int) -> None:
        """Called at the start of each epoch; ``epoch`` counts from 0."""

    @hookspec(firstresult=True)
    def train_step(
        self, trainer: "Trainer", batch: Any, batch_idx: int
    ) -> Mapping[str, Any] | None:
        """Do one optimisation step on ``batch`` and return its loss values.

        The active trainer implements this. The first non-None result wins, so a
        plugin object passed for one run with ``@hookimpl(tryfirst=True)`` can
        replace the trainer's step; a ``hookwrapper`` can time or wrap it.
        Return a mapping ``{"G/gan": tensor, "D/real": tensor, ...}`` of
        0-dim tensors (or floats); the engine averages them on the device and
        reads them back once per logging interval, so do not call ``.item()``.
        """

    @hookspec
    def on_train_batch_end(
        self, trainer: "Trainer", outputs: Mapping[str, Any], batch: Any, batch_idx: int
    ) -> None:
        """Called after every training step with the step's outputs."""

    @hookspec
    def on_log(self, trainer: "Trainer", record: Mapping[str, Any]) -> None:
        """Called every ``loop.log_every_steps`` steps with the record just written.

        ``record`` holds ``kind`` (``"train"``), ``epoch``, ``step``,
        ``epoch_progress`` (fractional epoch), ``losses`` (means over the
        interval, plain floats), ``lr`` and ``time``.
        """

    @hookspec
    def on_validation_start(self, trainer: "Trainer", epoch: int) -> None:
        """Called before validation runs."""

    @hookspec(firstresult=True)
    def validate(self, trainer: "Trainer", epoch: int) -> Mapping[str, float] | None:
        """Compute validation metrics; the trainer implements this.

        Return a mapping of metric name to float, or None when the trainer has
        no validation. Called every ``loop.val_every_epochs`` epochs.
        """

    @hookspec
    def on_validation_end(
        self, trainer: "Trainer", epoch: int, metrics: Mapping[str, float]
    ) -> None:
        """Called after validation with the metrics ``validate`` returned."""

    @hookspec
    def on_epoch_end(
        self, trainer: "Trainer", epoch: int, metrics: Mapping[str, float]
    ) -> None:
        """Called at the end of each epoch with that epoch's mean losses (and any
        validation metrics under ``val/``)."""

    @hookspec
    def on_save_checkpoint(
        self, trainer: "Trainer", checkpoint: MutableMapping[str, Any]
    ) -> None:
        """Add plugin state to a checkpoint that is about to be written.

        Store your state under your own key in ``checkpoint["plugins"]``, for
        example ``checkpoint["plugins"]["my_timer"] = {"total": 1.5}``. Values
        must be tensors, numbers, strings, lists, tuples or dicts of those:
        checkpoints are loaded with ``torch.load(weights_only=True)``.
        """

    @hookspec
    def on_load_checkpoint(
        self, trainer: "Trainer", checkpoint: Mapping[str, Any]
    ) -> None:
        """Restore plugin state from ``checkpoint["plugins"]`` when a run resumes."""

    @hookspec
    def on_resume(self, trainer: "Trainer", checkpoint: Mapping[str, Any], step: int) -> None:
        """Called once when a run resumes, after ``on_load_checkpoint``: the run restarts after ``step``.

        ``step`` is the global step of the checkpoint resumed from. Anything a
        part wrote for a later step (rows of its own files, points it sent) came
        from the run before the resume, which this run repeats: drop it here.
        The engine has already cut ``metrics.jsonl`` back to ``step``.
        """

    @hookspec
    def on_train_end(self, trainer: "Trainer") -> None:
        """Called once when training finishes normally (all epochs or ``max_steps``)."""

    @hookspec
    def on_exception(self, trainer: "Trainer", exception: BaseException) -> None:
        """Called when the run stops on an exception (including KeyboardInterrupt),
        before it propagates. Use it to flush and close resources."""


REGISTRATION_HOOKS = tuple(
    name for name in vars(RegistrationSpecs) if not name.startswith("_") and callable(getattr(RegistrationSpecs, name))
)
RUN_HOOKS = tuple(
    name
    for name in vars(RunSpecs)
    if not name.startswith("_") and callable(getattr(RunSpecs, name))
)


def signature_of(name: str) -> str:
    """The documented signature of hook ``name``, e.g. ``on_epoch_start(trainer: Trainer, epoch: int) -> None``."""
    import inspect

    spec = getattr(RegistrationSpecs, name, None) or getattr(RunSpecs, name)
    sig = inspect.signature(spec)
    def plain(annotation: object) -> str:
        return str(annotation).replace("'", "").replace('"', "")

    params = [p.replace(annotation=plain(p.annotation)) for p in sig.parameters.values() if p.name != "self"]
    text = str(sig.replace(parameters=params, return_annotation=inspect.Signature.empty))
    return f"{name}{text.replace(chr(39), '')} -> {plain(sig.return_annotation)}"
