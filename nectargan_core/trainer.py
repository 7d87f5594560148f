"""The base Trainer: owns the training loop and calls the run hooks.

A trainer plugin subclasses :class:`Trainer`, builds its networks, optimizers
and data in :meth:`Trainer.setup`, hands stateful objects to :meth:`track`
(so checkpoints capture and restore them), and implements the ``train_step``
hook (and usually ``validate``) as methods marked with ``@hookimpl``. The loop
itself (epochs, batches, logging, validation and checkpoint cadence, resume,
stopping) lives here, once, for every trainer.
"""

from __future__ import annotations

import errno
import functools
import itertools
import math
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Iterable, Iterator, Mapping

import torch

from .batchwait import LoaderFailure, StopWhileWaiting, bounded, kill_workers, release_stuck, worker_death
from .checkpoint import entry, load_checkpoint, restoring, save_checkpoint
from .device import rng_state, seed_everything, set_rng_state
from .distributed import Distributed
from .errors import CheckpointError, ConfigError, NectarGANError, PluginError, TrainingError
from .kit import kits_of
from .directions import improved
from .metrics import MetricsLog
from .runlock import RunLostError
from .rundir import RunDir
from .signals import leave_stopping_to_main
from .splitlisting import TrainData
from .stepgraph import step_runner

if TYPE_CHECKING:  # pragma: no cover
    from .config import ComponentChoice, CoreConfig
    from .registry import Registry


def validated_options(component: Any, given: Mapping[str, Any]) -> dict[str, Any]:
    """``component``'s options validated with the values of ``given`` that are options (the rest is not theirs)."""
    from pydantic import ValidationError

    from .config import describe_errors

    model = component.options
    fields = {key: value for key, value in given.items() if key in model.model_fields}
    try:
        return model(**fields).model_dump()
    except ValidationError as exc:
        problems = describe_errors(exc, model)
        raise ConfigError(f"{component.kind} '{component.name}' ({component.provided_by}): {problems[0]}"
                          + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else "")) from None


#: What the engine keeps on every trainer, by attribute name: a subclass that defines or assigns one of these
#: would change the loop's state (``self.epoch = 3`` in ``setup`` would restart the schedule at epoch 3).
ENGINE_STATE = frozenset({
    "config", "dist", "registry", "run_dir", "hook", "device", "name", "stateful", "train_loader", "epoch",
    "epochs_done", "global_step", "batch_in_epoch", "best_value", "stop_reason", "interrupted", "metrics_log",
    "last_checkpoint", "records_dropped", "summary", "_run_lock", "_interval", "_interval_steps", "_epoch_sums",
    "_epoch_steps", "_started", "_finished", "_saved_at", "_start_time", "_warned_best", "_stop_request",
    "_checkpoint_due", "_ending_epoch", "step_graphs", "_first_step_at", "_train_data",
})
#: The methods a trainer overrides (docs/plugins/trainer-api.md); Trainer's other methods are the engine's.
OVERRIDABLE = frozenset({"setup", "train_dataloader", "check_config", "describe", "prepare_step",
                         "graph_key", "graph_blocker"})
#: Files whose code may assign the engine's attributes: this module and the run that owns the trainer.
_ENGINE_FILES = frozenset({__file__, str(Path(__file__).with_name("run.py"))})
NAMES_DOC = "docs/plugins/trainer-api.md#names-the-engine-owns"


def engine_names() -> frozenset[str]:
    """Every attribute name a trainer subclass must leave to the engine."""
    methods = {name for name, value in vars(Trainer).items()
               if not name.startswith("__") and (callable(value) or isinstance(value, (property, classmethod,
                                                                                         staticmethod)))}
    return ENGINE_STATE | (methods - OVERRIDABLE)


@functools.lru_cache(maxsize=None)
def reserved_names(trainer_cls: type) -> dict[str, type]:
    """Each name a class of ``trainer_cls``'s MRO keeps for itself (``Trainer.reserved``), with the first (most
    basic) class that reserves it: a subclass that extends the set (``Base.reserved | {...}``) keeps the owners."""
    owners: dict[str, type] = {}
    for cls in reversed(trainer_cls.__mro__):
        for name in vars(cls).get("reserved", ()):
            owners.setdefault(name, cls)
    return owners


def check_trainer_class(trainer_cls: type, label: str) -> None:
    """Refuse a trainer class that defines a name the engine, or a base class, owns (one line naming both)."""
    owned = engine_names()
    reserved = reserved_names(trainer_cls)
    for cls in trainer_cls.__mro__:
        if cls is Trainer:
            return
        clashes = sorted(name for name in vars(cls) if name in owned)
        if clashes:
            raise PluginError(f"{label}: {cls.__qualname__} defines {', '.join(repr(n) for n in clashes)}, which "
                              f"the engine owns (the loop's own state and methods); rename "
                              f"{'it' if len(clashes) == 1 else 'them'} (see {NAMES_DOC})")
        taken = sorted(name for name in vars(cls) if name in reserved and reserved[name] is not cls)  # mixins too
        if taken:
            owner = reserved[taken[0]].__qualname__
            raise PluginError(f"{label}: {cls.__qualname__} defines {', '.join(repr(n) for n in taken)}, which its "
                              f"base class {owner} owns (its own set-up and state); rename "
                              f"{'it' if len(taken) == 1 else 'them'} (see {owner}.reserved)")


class Trainer:
    """Base class for trainers. Subclasses implement ``setup`` and the ``train_step`` hook."""

    options: ClassVar[Any] = None
    """The pydantic model of the trainer's own config sections (also given to ``register``)."""

    reserved: ClassVar[frozenset[str]] = frozenset()
    """Names a base class of trainers keeps for its own state and methods, as the engine keeps its own: a
    subclass that defines one, or whose code assigns one, is refused in one line. Declared by bases such
    as ``nectargan_translate.TranslationTrainer``; a trainer of one model rarely needs it."""

    def __setattr__(self, name: str, value: Any) -> None:
        # The trainer's own code (a method of a subclass) may not write the engine's state; the engine may, and
        # so may code outside the trainer (a test that sets up a position). A name a base class reserves is
        # written by that class's own code only.
        owner = reserved_names(type(self)).get(name)
        if owner is not None:
            frame = sys._getframe(1)
            while frame is not None and frame.f_code.co_name.startswith("<"):
                frame = frame.f_back
            if frame is not None and frame.f_locals.get("self") is self \
                    and frame.f_code.co_filename != getattr(sys.modules.get(owner.__module__), "__file__", None):
                raise PluginError(f"trainer '{getattr(self, 'name', type(self).__name__)}': "
                                  f"{type(self).__qualname__}.{frame.f_code.co_name} assigns self.{name}, which its "
                                  f"base class {owner.__qualname__} owns (its own set-up and state); name your "
                                  f"attribute otherwise (see {owner.__qualname__}.reserved)")
        if name in _ENGINE_NAMES:
            frame = sys._getframe(1)
            while frame is not None and frame.f_code.co_name.startswith("<"):  # a comprehension's frame (3.10, 3.11)
                frame = frame.f_back
            if frame is not None and frame.f_code.co_filename not in _ENGINE_FILES \
                    and frame.f_locals.get("self") is self:
                owned = "the loop's own state" if name in ENGINE_STATE else "one of the engine's methods"
                raise PluginError(f"trainer '{getattr(self, 'name', type(self).__name__)}': "
                                  f"{type(self).__qualname__}.{frame.f_code.co_name} assigns self.{name}, which the "
                                  f"engine owns ({owned}); name your attribute otherwise (see {NAMES_DOC})")
        super().__setattr__(name, value)
    distributed_validation: ClassVar[bool] = False
    """In a distributed run: True when ``validate`` runs in every process, each on its share of
    the val split, and returns the metrics of the whole split (reduced across processes);
    False when rank 0 validates alone and the others receive its results.
    """
    capabilities: ClassVar[frozenset[str]] = frozenset()
    """Core options this trainer implements in its step (see ``nectargan_core.capabilities``), e.g.
    ``"nonfinite_skip"`` for ``loop.nonfinite: skip``; a config asking for one it lacks is refused.
    Declaring ``kit = TrainerKit()`` in the class body adds the kit's.
    """
    example_columns: ClassVar[tuple[str, ...]] = ()
    """What the columns of the trainer's example grids show, left to right (the report labels them)."""
    generators: ClassVar[Mapping[str, str]] = {}
    """Deprecated here (goes in the next release): the generators a trainer declares for test, predict and
    export are ``nectargan_translate.TranslationTrainer.generators``; kept so code reading it on any trainer
    class still finds a mapping."""

    def __init__(
        self,
        config: "CoreConfig",
        run_dir: RunDir,
        hook: Any,
        device: torch.device,
        name: str = "trainer",
        registry: "Registry | None" = None,
        dist: Distributed | None = None,
    ) -> None:
        self.config = config
        #: This process's place in a distributed run (world size 1 when alone).
        self.dist = dist or Distributed()
        self.registry = registry
        self.run_dir = run_dir
        self.hook = hook
        self.device = device
        self.name = name
        self.stateful: dict[str, Any] = {}
        self.train_loader: Iterable[Any] | None = None
        # Loop position. ``epochs_done`` epochs are complete; ``batch_in_epoch``
        # batches of the current epoch are done (non-zero only mid-epoch).
        self.epoch = 0
        self.epochs_done = 0
        self.global_step = 0
        self.batch_in_epoch = 0
        self.best_value: float | None = None
        self.stop_reason: str | None = None
        self.interrupted = False
        # A weak reference to this process's lock on the run directory (rank 0 of a run started by
        # nectargan_core.Run, which owns the lock: a Run dropped without close() lets go of the run at once).
        self._run_lock: Any = None
        self.metrics_log = MetricsLog(run_dir.metrics_file, write=self.dist.is_main, guard=self._check_writer)
        self.last_checkpoint: Any = None
        self.records_dropped = 0  # set by a resume: metrics records logged after its checkpoint
        self._interval: dict[str, torch.Tensor] = {}
        self._interval_steps = 0
        self._epoch_sums: dict[str, float] = {}
        self._epoch_steps = 0
        self._started = False
        self._finished = False
        self._saved_at: tuple[int, int] | None = None
        self._start_time = time.time()
        self._warned_best = False
        self._stop_request: tuple[str, bool] | None = None
        #: What :meth:`describe` said when training started (printed, and written to summary.json).
        self.summary: dict[str, str] = {}
        self._checkpoint_due = False  # checkpoint.every_steps came due inside an accumulation group
        #: While an epoch ends (validation, on_epoch_end): how many batches it trained and how many metrics
        #: records there were before its end; None otherwise.
        self._ending_epoch: tuple[int, int, Any] | None = None
        #: Runs each training step: eagerly, or captured and replayed as a CUDA graph (set by prepare()).
        self.step_graphs: Any = None
        #: When this process's first training step ended (time.time()), once it has; status.json says it.
        self._first_step_at: float | None = None
        #: The train data the loop position refers to (its files, when the dataset lists them): set by prepare().
        self._train_data: TrainData | None = None

    # -- for subclasses --------------------------------------------------
    @classmethod
    def check_config(cls, config: "CoreConfig", registry: "Registry") -> None:
        """Refuse a config this trainer can tell is wrong without training (one-line ``ConfigError``).

        Called by :meth:`Run.create` before the run directory is made, so a
        mistake the trainer would only meet while setting up (an image size its
        networks cannot take, a missing dataset folder) leaves nothing behind.
        The default accepts every config.
        """


    def setup(self) -> None:
        """Build networks, optimizers and data; called once before any resume."""

    def train_dataloader(self) -> Iterable[Any]:
        """The iterable of training batches (a DataLoader, usually)."""
        raise PluginError(f"trainer '{self.name}' does not define train_dataloader()")

    def prepare_step(self, batch: Any, batch_idx: int) -> None:
        """Host-side work before each training step, always run eagerly (never inside a CUDA graph).

        The engine calls it before every ``train_step``, in every mode. Draw
        host random numbers or make other per-step decisions here and hand them
        to the step as device tensors written in place (``t.copy_(...)``), so
        that a captured step replays with this step's values (the CycleGAN
        image pools draw here). Default: nothing.
        """

    def graph_key(self, batch_idx: int) -> Any:
        """What, besides the batch's shapes and the optimizers' settings, selects this step's CUDA graph.

        A captured step replays the Python decisions made when it was captured.
        A trainer whose ``train_step`` branches on host values that change
        between steps (``global_step % d_every``, a scheduled loss weight)
        returns them here (any hashable); a step with a new key is captured
        anew. Default: ``()`` (the step's Python flow never changes).
        """
        return ()

    def graph_blocker(self) -> str | None:
        """Why this trainer's step, as configured, cannot be captured as a CUDA graph (None: it can).

        Override when the step reads a device value back to the host (``bool(t)``,
        ``.item()``) in some configuration: ``precision.cuda_graphs: auto`` then
        trains eagerly and says why, and ``on`` refuses. Decide from the config:
        it may be asked while ``setup`` runs (translate's precision choice does).
        """
        return None

    def build(self, kind: str, choice: "ComponentChoice | str", **overrides: Any) -> Any:
        """Build a registered part from a config choice (name + options) or a bare name.

        ``overrides`` are passed to the factory on top of the configured options
        (for values the trainer knows, such as the number of image channels).
        A bare name gets its registered defaults with the overrides that are
        options applied first, so a part with a required option builds when
        the trainer gives it; a value its options refuse is a one-line
        :class:`ConfigError` naming the part.
        """
        if self.registry is None:
            raise PluginError(f"trainer '{self.name}' has no registry to build a {kind} from")
        name = choice if isinstance(choice, str) else choice.name
        component = self.registry.get(kind, name)
        if isinstance(choice, str):
            model = component.options
            options = validated_options(component, overrides) if model is not None else {}
        else:
            options = choice.options
        return component.load()(**{**options, **overrides})

    @property
    def is_main(self) -> bool:
        """Whether this process writes the run's files (rank 0, or the only process)."""
        return self.dist.is_main

    def parallel(self, module: torch.nn.Module) -> torch.nn.Module:
        """``module`` wrapped for data-parallel training when the run is distributed, else itself.

        Run training forward passes through the wrapper so gradients are
        averaged across processes; track, checkpoint and evaluate ``module``.
        """
        section = self.config.distributed
        return self.dist.wrap(module, sync_batchnorm=section.sync_batchnorm,
                              find_unused_parameters=section.find_unused_parameters)

    def track(self, name: str, obj: Any) -> Any:
        """Include ``obj`` (anything with state_dict/load_state_dict) in checkpoints."""
        if not (hasattr(obj, "state_dict") and hasattr(obj, "load_state_dict")):
            raise TypeError(f"track({name!r}): {type(obj).__name__} has no state_dict/load_state_dict")
        self.stateful[name] = obj
        return obj

    def state_dict(self) -> dict[str, Any]:
        """The state of every tracked object, by the name given to :meth:`track`."""
        return {name: obj.state_dict() for name, obj in self.stateful.items()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore every tracked object from ``state``; a missing one or a network that does not fit is a
        :class:`CheckpointError`, and then nothing is changed.

        The networks are compared with the checkpoint first (tensor names and
        shapes), so a config that builds other networks (a ``--set`` of
        ``models.*`` on resume, say) is one line naming the networks and shapes
        before any weight is touched.
        """
        missing = [name for name in self.stateful if name not in state]
        if missing:
            raise CheckpointError(
                f"checkpoint has no state for {', '.join(map(repr, missing))}; "
                "it was written by a different trainer or config"
            )
        problems = [problem for name, obj in self.stateful.items() if isinstance(obj, torch.nn.Module)
                    for problem in [_network_mismatch(name, obj, state[name])] if problem]
        if problems:
            raise CheckpointError(f"the checkpoint's networks do not fit the ones this config builds: "
                                  f"{'; '.join(problems)}; the run's config (with any --set) must build the "
                                  "networks it was trained with")
        for name, obj in self.stateful.items():
            with restoring(f"'{name}'"):
                obj.load_state_dict(state[name])

    def learning_rates(self) -> dict[str, float]:
        """Current learning rate of each tracked optimizer (first param group)."""
        return {
            name: float(obj.param_groups[0]["lr"])
            for name, obj in self.stateful.items()
            if isinstance(obj, torch.optim.Optimizer)
        }

    def describe(self) -> dict[str, str]:
        """What defines this run, as ``label -> text`` rows, once the trainer is set up.

        The console prints them when training starts, the run directory keeps
        them in ``summary.json``, and ``nectargan report`` leads with them.
        Subclasses add their networks, data, optimizers and precision to these.
        """
        loop = self.config.loop
        batches = self.num_batches()
        schedule = f"{loop.epochs} epoch{'s' if loop.epochs != 1 else ''}"
        if batches:
            schedule += f" x {batches} batches = {loop.epochs * batches} steps"
        if loop.max_steps is not None:
            schedule += f", at most {loop.max_steps} steps (loop.max_steps)"
        validation = (f"validation every {loop.val_every_epochs} epoch(s)" if loop.val_every_epochs
                      else "no validation at epoch ends")
        if loop.val_every_steps:
            validation += f" and every {loop.val_every_steps} steps"
        checkpoint = self.config.checkpoint
        saves = (f"checkpoint every {checkpoint.every_epochs} epoch(s)" if checkpoint.every_epochs
                 else "no checkpoint at epoch ends")
        if checkpoint.every_steps:
            saves += f" and every {checkpoint.every_steps} steps"
        if checkpoint.best_metric:
            saves += f", best.pt by {checkpoint.best_metric} ({checkpoint.best_direction})"
        device = str(self.device)
        if self.device.type == "cpu":
            device += f" ({torch.get_num_threads()} threads)"
        elif self.device.type == "cuda":
            device += f" ({torch.cuda.get_device_name(self.device)})"
        if self.dist.enabled:
            device += f", {self.dist.world_size} processes ({self.dist.backend})"
        run = self.config.run
        rows = {
            "trainer": self.name,
            "device": device,
            "schedule": f"{schedule}; {validation}; {saves}",
            "seed": f"{run.seed}" + (", deterministic algorithms" if run.deterministic else ""),
        }
        if self.device.type == "cuda":
            rows["cuda graphs"] = self.step_graphs.decision.text if self.step_graphs is not None else "off"
            search = ("on (precision.cudnn_benchmark)" if torch.backends.cudnn.benchmark
                      else "off (its heuristics choose)")
            rows["tf32"] = ("off (run.deterministic)" if run.deterministic
                            else f"on for fp32 convolutions and matrix products; cudnn.benchmark {search}")
        return rows

    def position_text(self) -> str:
        """Where the loop stands, with epochs counted from 1 as the console counts them.

        ``epoch 2/10, batch 5/20 (step 25)`` inside an epoch, ``end of epoch 1/10 (step 20)`` between two.
        """
        epochs = self.config.loop.epochs
        if self.batch_in_epoch:
            batches = self.num_batches() if self.train_loader is not None else None
            batch = f"{self.batch_in_epoch}/{batches}" if batches else str(self.batch_in_epoch)
            return f"epoch {self.epochs_done + 1}/{epochs}, batch {batch} (step {self.global_step})"
        if self.epochs_done == 0:
            return f"start of epoch 1/{epochs} (step {self.global_step})"
        return f"end of epoch {self.epochs_done}/{epochs} (step {self.global_step})"

    # -- the loop --------------------------------------------------------
    @property
    def finished(self) -> bool:
        """Whether the loop is done: ``loop.epochs`` trained, ``loop.max_steps`` reached, or a stop requested."""
        return self.stop_reason is not None or self.trained_all

    @property
    def trained_all(self) -> bool:
        """Whether everything the loop asks for is trained (``loop.epochs``, or ``loop.max_steps`` reached),
        however the run stopped: a stop that lands on the last step leaves nothing to resume."""
        loop = self.config.loop
        if self._ending_epoch is not None:  # a stop while the last epoch ends (validation): it is not ended yet
            return False
        if loop.max_steps is not None and self.global_step >= loop.max_steps:
            return True
        return self.epochs_done >= loop.epochs

    @property
    def cut_short(self) -> bool:
        """Whether a signal stopped the run before it trained everything: it ends ``interrupted``
        (a stop that lands on the last step ends a finished run)."""
        return self.interrupted and not self.trained_all

    def prepare(self) -> None:
        """Set up the trainer and its data (idempotent)."""
        if self.train_loader is None:
            self.setup()
            # Workers ignore SIGINT/SIGTERM: a stop signalled to every process of the job is the trainer's to handle.
            self.train_loader = leave_stopping_to_main(self.train_dataloader())
            if self.dist.enabled:
                self._shard(self.train_loader)
            self._train_data = TrainData.of_loader(self.train_loader, self.num_batches())
            if not self.hook.train_step.get_hookimpls():
                raise PluginError(f"trainer '{self.name}' does not implement the train_step hook")
            self.step_graphs = step_runner(self)

    def _shard(self, loader: Any) -> None:
        """Give each process its share of every epoch (the sampler must be a ResumableSampler)."""
        from .sampling import ResumableSampler

        sampler = getattr(loader, "sampler", None)
        if not isinstance(sampler, ResumableSampler):
            raise PluginError(
                f"trainer '{self.name}': distributed training needs a train DataLoader whose sampler is a "
                f"nectargan_core.ResumableSampler (found {type(sampler).__name__}); it shards the data by rank")
        sampler.shard(self.dist.world_size, self.dist.rank)

    def fit(self) -> "Trainer":
        """Train until ``loop.epochs`` or ``loop.max_steps`` or a stop request."""
        self._guarded(self._fit)
        return self

    def fit_epoch(self) -> "Trainer":
        """Train one epoch (or what is left of the current one), then return."""
        self._guarded(self._fit_one)
        return self

    def request_stop(self, reason: str = "stop requested", *, interrupted: bool = False) -> None:
        """Finish the current step, save a checkpoint and stop.

        Plugins call this for early stopping (the run ends as ``finished``);
        signal handlers pass ``interrupted=True`` (the run ends as ``interrupted``).
        In a distributed run the request is shared with every process at the
        end of the step, so all of them stop after the same step.
        """
        if self.dist.enabled:
            previous = self._stop_request
            self._stop_request = (reason, interrupted or bool(previous and previous[1]))
            return
        self.stop_reason = reason
        self.interrupted = self.interrupted or interrupted

    def _agree_stop(self) -> bool:
        """Whether to stop now; in a distributed run, agreed by all processes (one tiny gloo message)."""
        if self.dist.enabled:
            request = self._stop_request
            if self.dist.any_true(request is not None):
                gathered = self.dist.gather(request)
                requests = [r for r in gathered if r is not None]
                own = request or requests[0]
                self.stop_reason = self.stop_reason or own[0]
                self.interrupted = self.interrupted or any(r[1] for r in requests)
                if self.is_main and request is None and own[1]:  # rank 0 announces a signal it did not get
                    rank = next(i for i, r in enumerate(gathered) if r is not None)
                    print(f"rank {rank} received {own[0]}: every process stops after this step and saves a "
                          "checkpoint", file=sys.stderr, flush=True)
        return self.stop_reason is not None

    def write_status(self, status: str, **fields: Any) -> None:
        """Update status.json (rank 0 only); it also says when this process's first step ended."""
        if self._first_step_at is not None:
            fields.setdefault("first_step_at", self._first_step_at)
        if self.is_main:
            self._check_writer()
            self.run_dir.write_status(status, **fields)

    def _check_writer(self) -> None:
        """Before each write into the run directory: this process still holds the run (see ``RunLock.ensure``)."""
        lock = self._run_lock() if self._run_lock is not None else None
        if lock is not None:
            lock.ensure()

    def _guarded(self, body: Any) -> None:
        try:
            body()
            iterator = getattr(self.train_loader, "_iterator", None)
            if iterator is not None:  # persistent workers, which the interpreter's exit joins: none may be stuck
                release_stuck(iterator, "as training ended")
        except StopWhileWaiting:  # a stop signal while the main process waited for a batch: stop there
            self._release_train_workers()
            self._checkpoint_at_position()
            self._end()
        except LoaderFailure as exc:
            if self.dist.enabled:  # the other processes wait in a collective: no checkpoint of all of them now
                self._failed(exc)
            self._timed_out(exc)
        except BaseException as exc:
            self._failed(exc)

    def _release_train_workers(self) -> None:
        """Kill the train loader's persistent workers (the run is ending; stopped ones would be joined for ever)."""
        iterator = getattr(self.train_loader, "_iterator", None)
        if iterator is not None:
            kill_workers(iterator)

    def _timed_out(self, exc: LoaderFailure) -> None:
        """No batch came (one process): save the position, which is between two steps, and fail naming it."""
        self._release_train_workers()
        try:
            saved = self._checkpoint_at_position()
        except BaseException as failure:  # noqa: BLE001 - the full disk is the error now
            self._failed(failure)
        if saved is None:
            saved = self.last_checkpoint
        where = (f"; the {self.global_step} steps done are saved in {saved}; resume with: nectargan train --resume "
                 f"{self.run_dir.path}") if saved else "; no checkpoint was written (no step was done): start again"
        error = type(exc)(f"{exc}{where}")
        try:
            self.write_status("failed", epoch=self.epochs_done, step=self.global_step,
                              error=f"{type(error).__name__}: {error}", checkpoint=str(saved) if saved else None)
        finally:
            self.hook.on_exception(trainer=self, exception=error)
        raise error from None

    def _failed(self, exc: BaseException) -> None:
        """After an error in the loop: an emergency checkpoint where it helps, status ``failed`` (or
        ``interrupted``), ``on_exception``; then raise (a one-line error for the machine's faults)."""
        # The run ends: its persistent loader workers go first (a dead one would make torch raise again from its
        # SIGCHLD handler in the middle of what follows; a stopped one would hold the exit for ever).
        self._release_train_workers()
        if isinstance(exc, RunLostError):  # the run is another process's now: write nothing more
            self.hook.on_exception(trainer=self, exception=exc)
            raise exc
        interrupted = isinstance(exc, KeyboardInterrupt)
        user_error = self._user_error(exc)
        # A checkpoint write that failed (full disk, file size limit) would fail again: no emergency one.
        # Nor after loop.nonfinite=stop: the state is poisoned, and the error names the last good checkpoint.
        emergency = (None if interrupted or isinstance(exc, (OSError, CheckpointError, NonFiniteStop))
                     else self._emergency_checkpoint())
        try:
            self.write_status(
                "interrupted" if interrupted else "failed",
                epoch=self.epochs_done, step=self.global_step,
                error=None if interrupted else f"{type(exc).__name__}: {user_error or exc}",
                emergency_checkpoint=str(emergency) if emergency else None,
            )
        finally:
            self.hook.on_exception(trainer=self, exception=exc)
        if user_error is not None:
            raise user_error from exc
        raise exc

    def _emergency_checkpoint(self) -> Any:
        """After a crash, save the steps done since the last checkpoint as ``emergency-stepN.pt``.

        Only a finite state is written, never over a periodic checkpoint, and
        ``--resume`` does not pick it up by itself: the weights may hold part of
        the update of the step that failed. Resume from it on purpose with
        ``--resume RUN_DIR --checkpoint PATH``, or start from it with ``--init-from``.
        """
        if self.train_loader is None or self._saved_at == (self.epochs_done, self.global_step) \
                or (self._saved_at is None and self.global_step == 0) or not self.is_main:
            return None
        path = self.run_dir.checkpoints / f"emergency-step{self.global_step:08d}.pt"
        try:
            self._check_finite(alone=True)  # the other processes may be anywhere: wait for none of them
            save_checkpoint(self._payload_at_position(gather=False), path)
        except Exception as err:  # noqa: BLE001 - the original error is what matters
            print(f"warning: no emergency checkpoint: {err}", file=sys.stderr)
            return None
        nproc = f" --nproc {self.dist.world_size}" if self.dist.world_size > 1 else ""
        print(f"saved the {self.global_step} steps done as an emergency checkpoint: {path}; continue with: "
              f"nectargan train --resume {self.run_dir.path} --checkpoint {path}{nproc}", file=sys.stderr)
        return path

    def _checkpoint_at_position(self) -> Any:
        """A resumable checkpoint of the current position, between two steps (no step is half-done).

        Also while an epoch ends (validation, ``on_epoch_end`` cut short): the
        checkpoint then records the epoch as trained but not ended, so a resume
        ends it again (as an emergency checkpoint taken there does).
        """
        if self.train_loader is None or (self.global_step == 0 and self._saved_at is None):
            return None
        if self._ending_epoch is None:
            return self.save_checkpoint()
        epoch = self.epochs_done - 1
        if self._saved_at == (epoch, self.global_step):  # saved at this step before the epoch began to end
            return self.last_checkpoint
        payload = self._payload_at_position()
        path = self.run_dir.checkpoints / RunDir.checkpoint_name(epoch, self.global_step)
        if self.is_main:
            self._check_writer()
            save_checkpoint(payload, path)
        self.last_checkpoint = path
        self._saved_at = (self.epochs_done, self.global_step)  # what _end would save: this position, done
        self._checkpoint_due = False
        self._prune()
        return path

    def _payload_at_position(self, gather: bool = True) -> dict[str, Any]:
        """The checkpoint payload of this position; while an epoch ends, the epoch as trained but not ended (its
        batches, the metrics records and the random streams from before its end), so a resume ends it again."""
        payload = self.checkpoint_payload(gather=gather)
        if self._ending_epoch is not None:
            batches, records, rng = self._ending_epoch
            payload["epoch"], payload["batch_in_epoch"] = self.epochs_done - 1, batches
            payload["loop"]["metrics_records"] = records  # its val/epoch records are redone
            payload["rng"] = rng  # validation draws the same numbers again
        return payload

    def _user_error(self, exc: BaseException) -> NectarGANError | None:
        """A one-line error for faults of the machine rather than the code (memory, disk), else None.

        These are the user's to fix, so the CLI shows one line instead of a traceback.
        """
        if isinstance(exc, torch.OutOfMemoryError) or (  # CPU: "DefaultCPUAllocator: can't allocate memory"
            isinstance(exc, RuntimeError) and any(words in str(exc).lower()
                                                  for words in ("out of memory", "can't allocate memory"))
        ):
            return TrainingError(
                f"out of memory on {self.device} at step {self.global_step + 1}: "
                "use a smaller batch size or image size"
            )
        if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES,
                                                      errno.EFBIG):
            where = f"{exc.filename}: " if exc.filename else ""
            fix = "raise the file size limit (ulimit -f)" if exc.errno == errno.EFBIG else "free space"
            return TrainingError(f"{where}cannot write: {exc.strerror}; {fix} or choose another run.output_dir")
        if isinstance(exc, RuntimeError) and "DataLoader worker" in str(exc) and (
                "killed by signal" in str(exc) or "exited unexpectedly" in str(exc)):
            return TrainingError(f"{worker_death(str(exc))} at step {self.global_step + 1}; {self._last_good()}")
        # A collective that failed: by its text, or, for texts no list can foresee ("Application timeout
        # caused pair closure" from DDP's buffer broadcast), by the heartbeats showing a rank that stopped.
        if self.dist.enabled and isinstance(exc, RuntimeError) and (_is_comm_error(exc) or self.dist.peer_stopped()):
            return TrainingError(f"{self.dist.stopped_answering(exc)}; at step {self.global_step + 1}; "
                                 f"{self._last_good()}")
        return None

    def _fit(self) -> None:
        self._begin()
        while not self.finished:
            self._run_epoch()
        self._end()

    def _fit_one(self) -> None:
        self._begin()
        if not self.finished:
            self._run_epoch()
        if self.finished:
            self._end()

    def _begin(self) -> None:
        if self._started:
            return
        self.prepare()
        self._started = True
        self._start_time = time.time()
        self.summary = self.describe()
        if self.is_main:
            self.run_dir.write_summary(self.summary, example_columns=self.example_columns)
        self.write_status("running", epoch=self.epochs_done, step=self.global_step)
        self.hook.on_train_start(trainer=self)

    def _end(self) -> None:
        if self._finished:
            return
        self._finished = True
        if self.config.checkpoint.save_last or self.stop_reason is not None:
            self.save_checkpoint()
        self.write_status(
            "interrupted" if self.cut_short else "finished", epoch=self.epochs_done, step=self.global_step,
            reason=None if self.interrupted and not self.cut_short else self.stop_reason,
            checkpoint=str(self.last_checkpoint) if self.last_checkpoint else None,
        )
        self.hook.on_train_end(trainer=self)

    def _epoch_loader(self, epoch: int) -> Iterable[Any]:
        """The batches of ``epoch``, starting after ``batch_in_epoch`` on a mid-epoch resume.

        A DataLoader draws its workers' base seed from its ``generator`` (or
        else from the global RNG) every time it is iterated; seeding a
        dedicated generator from (seed, epoch) keeps the global RNG untouched
        and makes worker seeds the same after a resume.
        """
        loader = self.train_loader
        assert loader is not None
        if isinstance(loader, torch.utils.data.DataLoader):
            if loader.generator is None:
                loader.generator = torch.Generator()
            loader.generator.manual_seed(self.config.run.seed * 1_000_003 + epoch)
        sampler = getattr(loader, "sampler", None)
        if sampler is not None and hasattr(sampler, "set_epoch"):
            sampler.set_epoch(epoch)
        if self.batch_in_epoch:
            batch_size = getattr(loader, "batch_size", None)
            if batch_size and hasattr(sampler, "skip"):
                sampler.skip(self.batch_in_epoch * batch_size)
                return loader
            return itertools.islice(loader, self.batch_in_epoch, None)
        return loader

    def batches(self, loader: Iterable[Any], what: str = "validation") -> Iterator[Any]:
        """Iterate ``loader`` (a validation or other loader of this run) with the training loader's bounds.

        Each batch is waited for at most ``loop.batch_timeout_s`` (a torch
        DataLoader with workers: past it, a one-line ``TrainingError`` naming
        the workers and their state), and in a single-process run a stop
        signal that arrives during a wait stops the run at once (the
        checkpoint records the epoch as trained but not ended, so a resume
        ends it again). ``what`` names the batches in that line.
        """
        return bounded(loader, self.config.loop.batch_timeout_s, interrupt=not self.dist.enabled, what=what)

    def num_batches(self) -> int | None:
        """Batches per epoch of the train loader (``len``), or None when it has no length."""
        try:
            return len(self.train_loader)  # type: ignore[arg-type]
        except TypeError:
            return None

    def _run_epoch(self) -> None:
        loop = self.config.loop
        epoch = self.epoch = self.epochs_done
        if self.batch_in_epoch == 0:
            self._epoch_sums, self._epoch_steps = {}, 0
            self.hook.on_epoch_start(trainer=self, epoch=epoch)
        completed = True
        # Each batch waited for at most loop.batch_timeout_s; a stop signal ends a wait at once (one process).
        batches = bounded(self._epoch_loader(epoch), loop.batch_timeout_s, interrupt=not self.dist.enabled,
                          source=self.train_loader)
        for batch in batches:
            batch_idx = self.batch_in_epoch
            self.prepare_step(batch, batch_idx)
            outputs = self.step_graphs(batch, batch_idx)  # the train_step hook, eager or replayed as a CUDA graph
            if outputs is None:
                raise PluginError(f"train_step of trainer '{self.name}' returned None; return a mapping of losses")
            self.global_step += 1
            self.batch_in_epoch += 1
            self.dist.note_step(self.global_step)
            self._accumulate(outputs)
            if self._first_step_at is None:  # the time to the first step (imports, set-up, warm-up) is on record
                self._first_step_at = time.time()
                self.write_status("running", epoch=self.epochs_done, step=self.global_step)
            self.hook.on_train_batch_end(trainer=self, outputs=outputs, batch=batch, batch_idx=batch_idx)
            if self.global_step % loop.log_every_steps == 0:
                self._log_interval()
            if loop.val_every_steps and self.global_step % loop.val_every_steps == 0:
                self._validate()
            every = self.config.checkpoint.every_steps
            if every and self.global_step % every == 0:
                self._checkpoint_due = True
            # Gradients of an unfinished accumulation group are in no checkpoint: checkpoints and stops wait
            # for the group's end (an epoch's last batch ends its group).
            whole = not self._mid_group()
            if whole and self._checkpoint_due:
                self.save_checkpoint()
            if whole and (self._agree_stop() or (
                loop.max_steps is not None and self.global_step >= loop.max_steps
            )):
                total = self.num_batches()
                completed = total is not None and self.batch_in_epoch >= total
                break
        if not completed:
            return
        if self.batch_in_epoch == 0:
            raise PluginError(f"trainer '{self.name}': the training data is empty; check the dataset")
        for kit in kits_of(self):  # a loader without a length may end the epoch inside a group
            kit.finish_group()
        self._log_interval()
        metrics = {k: v / max(self._epoch_steps, 1) for k, v in self._epoch_sums.items()}
        # Until on_epoch_end returns, an emergency checkpoint records the epoch as trained but not ended, so
        # that a resume from it validates and ends the epoch (schedules, examples) instead of skipping that.
        self._ending_epoch = (self.batch_in_epoch, self.metrics_log.records, rng_state())
        self.epochs_done += 1
        self.batch_in_epoch = 0
        if loop.val_every_epochs and self.epochs_done % loop.val_every_epochs == 0:
            val = self._validate()
            metrics.update({f"val/{k}" if not k.startswith("val/") else k: v for k, v in val.items()})
        self.metrics_log.append({
            "kind": "epoch", "epoch": epoch, "step": self.global_step,
            "losses": metrics, "lr": self.learning_rates(), "time": time.time(),
            "elapsed": time.time() - self._start_time,
        })
        self.hook.on_epoch_end(trainer=self, epoch=epoch, metrics=metrics)
        self._ending_epoch = None
        every = self.config.checkpoint.every_epochs
        if (every and self.epochs_done % every == 0) or self._checkpoint_due:  # due: a loader without a length
            self.save_checkpoint()
        self._agree_stop()

    def _mid_group(self) -> bool:
        """Whether the trainer's kit holds gradients of an unfinished accumulation group."""
        return any(kit.mid_group for kit in kits_of(self))

    def _accumulate(self, outputs: Mapping[str, Any]) -> None:
        """Sum losses on their device; nothing is read back until the logging interval."""
        for key, value in outputs.items():
            if isinstance(value, torch.Tensor):
                value = value.detach()
                if value.dim():
                    value = value.mean()
                value = value.float()
            elif not isinstance(value, (int, float)):
                continue
            current = self._interval.get(key)
            self._interval[key] = value if current is None else current + value
        self._interval_steps += 1

    def _log_interval(self) -> None:
        if not self._interval_steps:
            return
        keys = list(self._interval)
        values = [self._interval[k] for k in keys]
        if self.dist.enabled:  # the mean over processes of every value, reduced on the device
            stacked = torch.stack([v.float() if isinstance(v, torch.Tensor)
                                   else torch.tensor(float(v), device=self.device) for v in values])
            values = list(self.dist.all_mean(stacked).unbind())
        skips = [count for kit in kits_of(self) for count in kit.take_skips()]  # the same in every process
        tensors = [v for v in values if isinstance(v, torch.Tensor)] + [count for _, count in skips]
        host = iter(torch.stack([t.to("cpu", torch.float64) for t in tensors]).tolist()) if tensors else iter(())
        sums = {k: (next(host) if isinstance(v, torch.Tensor) else float(v)) for k, v in zip(keys, values)}
        skipped = {name: int(n) for (name, _), n in zip(skips, host) if n}
        steps = self._interval_steps
        losses = {k: s / steps for k, s in sums.items()}
        bad = self._nonfinite(sums, steps, skipped)
        for key, total in sums.items():
            if key not in bad:
                self._epoch_sums[key] = self._epoch_sums.get(key, 0.0) + total
        self._epoch_steps += steps
        self._interval, self._interval_steps = {}, 0
        total = self.num_batches()
        progress = self.epoch + (self.batch_in_epoch / total if total else 0.0)
        record = {
            "kind": "train", "epoch": self.epoch, "step": self.global_step,
            "epoch_progress": progress, "steps": steps, "losses": losses,
            "lr": self.learning_rates(), "time": time.time(),
            "elapsed": time.time() - self._start_time,
        }
        if skipped:
            record["skipped_updates"] = skipped
        self.metrics_log.append(record)
        self.hook.on_log(trainer=self, record=record)

    def _nonfinite(self, sums: Mapping[str, float], steps: int, skipped: Mapping[str, int] | None = None) -> list[str]:
        """Apply ``loop.nonfinite`` to an interval's loss sums (already on the host); the bad keys.

        A NaN or Inf in any step makes the interval's sum non-finite, so
        checking sums finds it without reading back every step. ``skipped``
        counts, by update, the kit's optimizer steps left out under ``skip``
        because their gradients (not their losses) were not finite.
        """
        bad = sorted(k for k, v in sums.items() if not math.isfinite(v))
        first = self.global_step - steps + 1
        where = f"steps {first}-{self.global_step}" if steps > 1 else f"step {self.global_step}"
        if skipped:
            updates = ", ".join(f"{name} {n}x" for name, n in skipped.items())
            print(f"warning: non-finite gradients (finite losses) in {where}: optimizer step left out: {updates} "
                  "(loop.nonfinite=skip)", file=sys.stderr, flush=True)
        if bad:
            message = f"non-finite loss {', '.join(bad)} in {where}"
            if self.config.loop.nonfinite == "stop":
                raise NonFiniteStop(f"{message}; stopped (loop.nonfinite=stop); {self._last_good()}")
            print(f"warning: {message}; left out of the epoch averages (loop.nonfinite=skip)",
                  file=sys.stderr, flush=True)
        return bad

    def _last_good(self) -> str:
        last = self.run_dir.latest_checkpoint()
        return f"the last good checkpoint is {last}" if last else "no checkpoint was written"

    def _check_finite(self, alone: bool = False) -> None:
        """Refuse to checkpoint a poisoned state, so the last good checkpoint is never replaced by it.

        One device-side reduction and one read-back per checkpoint (which syncs anyway). In a
        distributed run the processes decide together, unless ``alone`` (an emergency checkpoint).
        """
        groups = {f"weights of '{name}'": [t for t in obj.state_dict().values() if t.is_floating_point()]
                  for name, obj in self.stateful.items() if isinstance(obj, torch.nn.Module)}
        if self.config.loop.nonfinite == "stop":
            groups.update({f"loss {k}": [v] for k, v in self._interval.items() if isinstance(v, torch.Tensor)})
        flags = {what: torch.stack([torch.isfinite(t).all() for t in group]).all()
                 for what, group in groups.items() if group}
        ok = not flags or bool(torch.stack(list(flags.values())).all())
        bad_somewhere = not ok if alone else self.dist.any_true(not ok)  # every process refuses together
        if not bad_somewhere:
            return
        bad = ", ".join(what for what, good in flags.items() if not good) or "values in another process"
        raise TrainingError(f"non-finite {bad} at step {self.global_step}; checkpoint not written; {self._last_good()}")

    def _validate(self) -> dict[str, float]:
        if not self.hook.validate.get_hookimpls():
            return {}
        epoch = self.epoch
        self.hook.on_validation_start(trainer=self, epoch=epoch)
        metrics: dict[str, float] = {}
        if self.is_main or self.distributed_validation:
            metrics = {k: float(v) for k, v in dict(self.hook.validate(trainer=self, epoch=epoch) or {}).items()}
        if not self.distributed_validation:  # rank 0 validated alone; the others get its results
            metrics = self.dist.broadcast(metrics)
        self.metrics_log.append({
            "kind": "val", "epoch": epoch, "step": self.global_step,
            "metrics": metrics, "time": time.time(),
        })
        self.hook.on_validation_end(trainer=self, epoch=epoch, metrics=metrics)
        self._update_best(metrics)
        return metrics

    def _update_best(self, metrics: Mapping[str, float]) -> None:
        key = self.config.checkpoint.best_metric
        if not key:
            return
        value = metrics.get(key, metrics.get(key.removeprefix("val/")))
        if value is None:
            if not self._warned_best:
                self._warned_best = True
                if self.is_main:
                    print(f"warning: checkpoint.best_metric '{key}' is not among the validation metrics "
                          f"({', '.join(sorted(metrics)) or 'none'}); best.pt is not written", file=sys.stderr)
            return
        if math.isnan(value):
            if self.best_value is None and self.is_main:  # until a number comes, say why best.pt does not
                print(f"warning: checkpoint.best_metric '{key}' is NaN at epoch {self.epoch + 1}; best.pt is "
                      "written once it gives a number", file=sys.stderr)
            return
        if improved(value, self.best_value, key, self.config.checkpoint.best_direction):
            self.best_value = value
            self.save_checkpoint(self.run_dir.best_checkpoint)

    # -- checkpoints -----------------------------------------------------
    def checkpoint_payload(self, gather: bool = True) -> dict[str, Any]:
        """Everything a resume needs. Distributed: every process must call it (RNG states are gathered)."""
        payload: dict[str, Any] = {
            "trainer": self.name,
            "epoch": self.epochs_done,
            "global_step": self.global_step,
            "batch_in_epoch": self.batch_in_epoch,
            "config": self.config.to_dict(),
            "state": self.state_dict(),
            "rng": rng_state(),
            "loop": {
                "interval": self._interval_state(),
                "interval_steps": self._interval_steps,
                "epoch_sums": dict(self._epoch_sums),
                "epoch_steps": self._epoch_steps,
                "best_value": self.best_value,
                "metrics_records": self.metrics_log.records,
            },
            "plugins": {},
            "saved_at": time.time(),
        }
        if self._train_data is not None:  # what the position refers to: a resume checks it is still there
            payload["data"] = self._train_data.to_record()
        if self.dist.enabled:
            payload["world_size"] = self.dist.world_size
            if gather:  # what differs between processes: their RNG streams and unreduced loss sums
                payload["ranks"] = self.dist.gather({"rng": payload["rng"], "interval": payload["loop"]["interval"]})
        self.hook.on_save_checkpoint(trainer=self, checkpoint=payload)
        return payload

    def _interval_state(self) -> dict[str, Any]:
        return {k: v.detach().cpu() if isinstance(v, torch.Tensor) else float(v) for k, v in self._interval.items()}

    def save_checkpoint(self, path: Any = None) -> Any:
        """Write a checkpoint (periodic name by default) and prune old periodic ones."""
        periodic = path is None
        if periodic:
            if self._saved_at == (self.epochs_done, self.global_step):
                return self.last_checkpoint
            path = self.run_dir.checkpoints / RunDir.checkpoint_name(self.epochs_done, self.global_step)
        self._check_finite()
        payload = self.checkpoint_payload()
        if self.is_main:
            self._check_writer()
        written = save_checkpoint(payload, path) if self.is_main else path
        if periodic:
            self._saved_at = (self.epochs_done, self.global_step)
            self._checkpoint_due = False
            self.last_checkpoint = written
            self._prune()
        return written

    def _prune(self) -> None:
        keep = self.config.checkpoint.keep_last
        if not self.is_main:
            return
        for old in self.run_dir.periodic_checkpoints()[:-keep]:
            old.unlink(missing_ok=True)
            old.with_name(old.name + ".json").unlink(missing_ok=True)

    def init_from(self, source: Any, *, strict: bool = True) -> dict[str, dict[str, list[str]]]:
        """Load network weights only (fine-tuning); never a silent partial load.

        Every tracked ``nn.Module`` takes the tensors of the same name and shape
        from the checkpoint; optimizers, schedules, the loop position and RNG
        states are not touched. With ``strict`` every network must be in the
        checkpoint and fit it exactly, else nothing is loaded and an
        :class:`~nectargan_core.init_from.InitFromError` names what does not fit;
        without, what fits is loaded and the report says what stays at its
        initialisation (see :mod:`nectargan_core.init_from`). Returns, per
        network, the ``loaded``, ``missing``, ``unexpected`` and ``mismatched``
        tensor names, and prints one line per network.
        """
        from .init_from import check_matches, match_network, networks_of, report_line

        self.prepare()
        checkpoint = source if isinstance(source, Mapping) else load_checkpoint(source)
        where = "checkpoint" if isinstance(source, Mapping) else str(source)
        state = networks_of(checkpoint, where)
        networks = {name: module for name, module in self.stateful.items() if isinstance(module, torch.nn.Module)}
        matches = [match_network(name, module, state.get(name), where) for name, module in networks.items()]
        held = [key for key, value in state.items() if isinstance(value, Mapping) and value
                and all(isinstance(tensor, torch.Tensor) for tensor in value.values())]
        check_matches(matches, where, strict=strict, held=held)
        for match in matches:
            if match.loaded:
                theirs = state[match.name]
                networks[match.name].load_state_dict({k: theirs[k] for k in match.loaded}, strict=False)
            if self.is_main:
                print(report_line(match, where), file=sys.stderr)
        return {match.name: match.as_dict() for match in matches}

    def _own_state(self, checkpoint: Mapping[str, Any]) -> dict[str, Any]:
        """This process's RNG state and loss sums from a checkpoint (each rank saved its own)."""
        ranks = checkpoint.get("ranks")
        saved_world = int(checkpoint.get("world_size", 1))
        if saved_world != self.dist.world_size and self.is_main:
            print(f"warning: the checkpoint was written by {saved_world} process(es), this run has "
                  f"{self.dist.world_size}: training continues, but not bit for bit as an uninterrupted run",
                  file=sys.stderr)
        if ranks and len(ranks) == self.dist.world_size:
            return ranks[self.dist.rank]
        return {"rng": checkpoint["rng"], "interval": checkpoint.get("loop", {}).get("interval", {})}

    def load_checkpoint(self, source: Any, *, data_changed: bool = False) -> dict[str, Any]:
        """Restore the whole state from a checkpoint path (or a loaded checkpoint dict).

        A mid-epoch checkpoint whose train files were added, removed or renamed
        since is refused (its position counts batches of another order), unless
        ``data_changed``: the epoch then goes on over the files there now.
        """
        self.prepare()
        checkpoint = source if isinstance(source, Mapping) else load_checkpoint(source)
        with restoring(None if isinstance(source, Mapping) else str(source)):  # a missing entry: one line
            if checkpoint["trainer"] != self.name:
                raise CheckpointError(
                    f"checkpoint was written by trainer '{checkpoint.get('trainer')}', not '{self.name}'"
                )
            return self._restore(checkpoint, data_changed=data_changed)

    def _restore(self, checkpoint: Mapping[str, Any], *, data_changed: bool = False) -> dict[str, Any]:
        self.load_state_dict(checkpoint["state"])
        self.epochs_done = self.epoch = int(checkpoint["epoch"])
        self.global_step = int(checkpoint["global_step"])
        self.batch_in_epoch = int(checkpoint.get("batch_in_epoch", 0))
        if min(self.epochs_done, self.global_step, self.batch_in_epoch) < 0:
            raise CheckpointError(f"its loop position cannot be (epoch {self.epochs_done}, step {self.global_step}, "
                                  f"batch {self.batch_in_epoch}): the file is damaged or not a NectarGAN checkpoint; "
                                  "resume from another one with --checkpoint")
        loop = checkpoint.get("loop", {})
        own = self._own_state(checkpoint)
        self._interval = {k: (v.to(self.device) if isinstance(v, torch.Tensor) else v)
                          for k, v in own["interval"].items()}
        self._interval_steps = int(loop.get("interval_steps", 0))
        self._epoch_sums = dict(loop.get("epoch_sums", {}))
        self._epoch_steps = int(loop.get("epoch_steps", 0))
        self.best_value = loop.get("best_value")
        with entry("rng"):  # a crafted rng.numpy: "x" is one line naming it
            set_rng_state(own["rng"])
        saved_world = int(checkpoint.get("world_size", 1))
        if saved_world != self.dist.world_size:
            # The same fraction of the epoch (each process then had batch_in_epoch of its share),
            # and distinct random streams per process.
            self.batch_in_epoch = self.batch_in_epoch * saved_world // self.dist.world_size
            if self.dist.rank:
                seed_everything(self.config.run.seed + 1_000_003 * self.dist.rank + self.global_step)
        self._check_train_data(checkpoint.get("data"), data_changed, same_world=saved_world == self.dist.world_size)
        self._saved_at = (self.epochs_done, self.global_step)
        self.hook.on_load_checkpoint(trainer=self, checkpoint=checkpoint)
        # Once everything loaded: the log loses the records written after this checkpoint, then the parts
        # drop theirs (on_resume's contract: metrics.jsonl is already cut back).
        #: records a killed run logged after this checkpoint, dropped now (the console says its lines are superseded)
        self.records_dropped = self.metrics_log.truncate_to(int(loop.get("metrics_records", 0)))
        self.hook.on_resume(trainer=self, checkpoint=checkpoint, step=self.global_step)
        return checkpoint

    def _check_train_data(self, record: Any, go_on: bool, *, same_world: bool = True) -> None:
        """Compare the train data with what the checkpoint's position referred to (before anything is changed).

        Other contents under the same names keep the position (a warning); files
        added, removed or renamed, or another number of batches per epoch (a
        changed ``data.batch_size``), move it: a note between epochs, a refusal
        mid-epoch unless ``go_on`` (``--data-changed``). A mid-epoch checkpoint
        without a usable record (older, or damaged) resumes with a note saying
        the position is not checked.
        """
        say = self.is_main
        epoch = self.epochs_done + 1
        saved = TrainData.from_record(record)
        if saved is None or self._train_data is None:
            if saved is None and self.batch_in_epoch and say:
                print(f"note: this checkpoint does not record which train files its position (epoch {epoch}, batch "
                      f"{self.batch_in_epoch}) counts (it is older than that record, or the record is damaged): "
                      "resuming there without checking them", file=sys.stderr, flush=True)
            return
        if same_world and saved.batches and self.batch_in_epoch > saved.batches:
            raise CheckpointError(f"its loop position, batch {self.batch_in_epoch}, is past the {saved.batches} "
                                  "batches its epoch had: the file is damaged; resume from another one with "
                                  "--checkpoint")
        change = self._train_data.changes_since(saved)
        batches = self.num_batches()
        resized = (same_world and saved.batches is not None and batches is not None and saved.batches != batches
                   and not (change and change.moves_position))
        reseeded = self._train_data.reordered_since(saved) if self.batch_in_epoch else None
        if change is None and not resized and not reseeded:
            return
        if change is not None and not change.moves_position and not resized and not reseeded:
            if say:
                print(f"warning: the train data changed since this checkpoint: {change.describe()}; training "
                      "goes on from the same position over the new contents", file=sys.stderr, flush=True)
            return
        what = "; ".join(part for part in (
            change.describe() if change is not None and change.moves_position else None,
            f"{saved.batches} batches an epoch then, {batches} now: data.batch_size or data.drop_last changed"
            if resized else None, reseeded) if part)
        if self.batch_in_epoch == 0:
            if say:
                print(f"note: the train data changed since this checkpoint: {what}; epoch {epoch} "
                      "draws its order from the files there now", file=sys.stderr, flush=True)
            return
        then = f"batch {self.batch_in_epoch}" + (f" of {saved.batches}" if saved.batches else "")
        undo = ("undo the --set that changed it" if resized or reseeded or (change is not None and change.reordered)
                else "restore the data or undo the --set that changed it" if change is not None
                and change.unit == "sample" else "put the files back as they were")
        if not go_on:
            raise CheckpointError(
                f"the train data changed since this checkpoint ({what}): its position, epoch {epoch} {then}, "
                f"counts batches of the old order; {undo}, or resume with --data-changed to finish epoch {epoch} "
                "over the data as it is now")
        done = self.batch_in_epoch
        if batches is not None and done > batches:
            self.batch_in_epoch = batches  # fewer batches now than were done: the epoch ends at once
        left = (f"{batches - self.batch_in_epoch} of its {batches} batches left" if batches is not None
                else "the rest of it")
        if say:
            print(f"warning: the train data changed since this checkpoint ({what}); --data-changed: epoch {epoch} "
                  f"goes on over the data as it is now, {done} batches done, {left}",
                  file=sys.stderr, flush=True)


def _network_mismatch(name: str, module: torch.nn.Module, theirs: Any) -> str | None:
    """One phrase on how ``theirs`` (a checkpoint's state dict) differs from ``module``'s, or None when it fits."""
    if not isinstance(theirs, Mapping):
        return f"'{name}' has no weights in the checkpoint"
    own = module.state_dict()
    shapes = [(key, list(theirs[key].shape), list(value.shape)) for key, value in own.items()
              if key in theirs and isinstance(theirs[key], torch.Tensor) and theirs[key].shape != value.shape]
    missing = [key for key in own if key not in theirs]
    unexpected = [key for key in theirs if key not in own]
    parts = []
    if shapes:
        key, saved, built = shapes[0]
        parts.append(f"{len(shapes)} tensor(s) differ in shape, e.g. '{key}' is {saved} in the checkpoint "
                     f"but {built} here")
    if missing:
        parts.append(f"{len(missing)} tensor(s) missing from the checkpoint, e.g. '{missing[0]}'")
    if unexpected:
        parts.append(f"{len(unexpected)} tensor(s) this network does not have, e.g. '{unexpected[0]}'")
    return f"'{name}': {', '.join(parts)}" if parts else None


def _is_comm_error(exc: BaseException) -> bool:
    """Whether ``exc`` comes from the process group (a peer died or timed out)."""
    import torch.distributed as dist

    backend_error = getattr(dist, "DistBackendError", ())
    text = str(exc)
    return isinstance(exc, backend_error) or any(
        marker in text for marker in ("Connection closed by peer", "Connection reset by peer", "Gloo", "gloo",
                                      "NCCL", "Timed out", "timed out", "Broken pipe", "pair closure"))


class NonFiniteStop(TrainingError):
    """A non-finite loss under ``loop.nonfinite: stop``: the one line the run ends with (no emergency checkpoint)."""


#: ENGINE_STATE and the engine's methods, once (what ``Trainer.__setattr__`` guards).
_ENGINE_NAMES = engine_names()
