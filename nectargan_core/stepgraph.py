"""CUDA-graph replay of the training step: a whole step launched as one graph.

At the batch sizes pix2pix and CycleGAN train with (1 in the reference), a
GAN step is hundreds of small kernels and the GPU waits on Python to launch
them: on an H200 the reference's pix2pix step took 13.8 ms eager and 4.5 ms
replayed as one CUDA graph (docs/performance.md). So the engine captures one
call of the trainer's ``train_step`` hook (forward passes, every update of
the trainer kit, the optimizer steps, the GradScaler, the device-side
non-finite skip) after a few eager warm-up steps, and replays it for later
batches, whose tensors are first copied into the captured step's static
input buffers.

A replay runs no Python, so a step replays the Python decisions made when it
was captured. What may change those decisions selects the graph (its *key*):
the batch's tensor shapes, the optimizers' settings (betas; a learning rate
a schedule changed, except for Adam and AdamW, whose captured steps read it
from a device tensor the kit refreshes before each replay), and
``Trainer.graph_key`` (``global_step % d_every``, a scheduled loss weight).
A step with a new key is captured anew; one whose key changes at almost
every step (a per-step loss-weight schedule) runs eagerly. Host-side
per-step work (draws for the CycleGAN image pools) belongs in
``Trainer.prepare_step``, which always runs eagerly. A step that cannot be
captured is known before it is tried where it can be (an optimizer without a
capturable mode, a host read the kit or the trainer declares: ``auto`` then
trains eagerly and the start summary says why); a capture that fails anyway
stops the run with one line, since torch's allocator and RNG stay in capture
state after a failed capture and eager training could not go on safely.

Torch is imported lazily by the runner: deciding the mode needs none.
"""

from __future__ import annotations

import collections
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping

from .errors import ConfigError, TrainingError
from .graphmode import WARMUP_STEPS, GraphDecision, compiled, configured_mode, decide

if TYPE_CHECKING:  # pragma: no cover
    import torch

    from .trainer import Trainer

#: Graphs kept at once (least recently used dropped first): the full batch and a short last batch, each
#: in a couple of variants (d_every/g_every phases); each holds its own GPU memory for the step's activations.
MAX_GRAPHS = 4
#: Graphs kept per batch shape: a new setting (an SGD learning rate, a loss weight) replaces the old one's graph.
MAX_GRAPHS_PER_SHAPE = 2
#: More new keys than this within RECAPTURE_WINDOW steps: the key changes too often for graphs to pay off.
MAX_RECAPTURES = 6
RECAPTURE_WINDOW = 200
#: Optimizer settings that do not change what a step computes (the kernel choice) or that the runner sets.
_NOT_IN_KEY = frozenset({"params", "param_names", "capturable", "fused", "foreach", "differentiable", "initial_lr"})


def check_mode(config: Any, trainer_cls: type, device_type: str) -> None:
    """Refuse ``precision.cuda_graphs: on`` for a run that cannot capture, before its run directory exists."""
    if configured_mode(config) != "on":
        return
    from .kit import TrainerKit

    on_kit = any(isinstance(value, TrainerKit) for cls in trainer_cls.__mro__ for value in vars(cls).values())
    decide("on", device_type=device_type, distributed=False,
           accumulate=getattr(getattr(config, "optim", None), "gradient_accumulation", 1), on_kit=on_kit,
           compiled=compiled(config))


# -- the runner ------------------------------------------------------------------
def batch_signature(value: Any) -> Any:
    """A hashable description of a batch's structure and tensor shapes (what a capture depends on)."""
    import torch

    if isinstance(value, torch.Tensor):
        return ("T", tuple(value.shape), str(value.dtype), value.is_contiguous())
    if isinstance(value, Mapping):
        return ("M", tuple((k, batch_signature(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return ("L", tuple(batch_signature(v) for v in value))
    return ("V", type(value).__name__)


def optimizer_key(optimizers: list[Any]) -> tuple[Any, ...]:
    """The optimizers' settings a captured step has baked in (betas, learning rates the step cannot read
    on the device, ...)."""
    import torch

    from .kit import reads_device_lr

    def plain(value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            return None  # read on the device at every replay: it may change freely
        if isinstance(value, list):
            return tuple(plain(v) for v in value)
        return value

    def settings(opt: Any, group: dict[str, Any]) -> tuple[Any, ...]:
        left_out = _NOT_IN_KEY | {"lr"} if reads_device_lr(opt, group) else _NOT_IN_KEY
        # The group itself too: load_state_dict makes new groups (and new state tensors), which a graph
        # captured with the old ones would never see.
        return (_Same(group), *sorted((k, plain(v)) for k, v in group.items() if k not in left_out))

    return tuple(tuple(settings(opt, group) for group in opt.param_groups) for opt in optimizers)


class _Same:
    """A key part equal only to the very same object: it holds the object, so its id cannot be reused."""

    __slots__ = ("obj",)

    def __init__(self, obj: Any) -> None:
        self.obj = obj

    def __hash__(self) -> int:
        return id(self.obj)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Same) and other.obj is self.obj


def clone_outputs(outputs: Mapping[str, Any]) -> dict[str, Any]:
    """Copies of a replayed step's outputs: the next replay overwrites the captured ones.

    The 0-dim float tensors (losses) are copied with one kernel.
    """
    import torch

    scalars = [k for k, v in outputs.items() if isinstance(v, torch.Tensor) and v.dim() == 0
               and v.dtype == torch.float32]
    copied: dict[str, Any] = dict(outputs)
    if scalars:
        for key, value in zip(scalars, torch.stack([outputs[k] for k in scalars]).unbind()):
            copied[key] = value
    for key, value in outputs.items():
        if key not in scalars and isinstance(value, torch.Tensor):
            copied[key] = value.clone()
    return copied


def _static_copy(value: Any, device: Any) -> Any:
    """The capture's input buffers: every tensor of the batch, on the training device, owned by the runner."""
    import torch

    if isinstance(value, torch.Tensor):
        return value.to(device, copy=True)
    if isinstance(value, Mapping):
        return {k: _static_copy(v, device) for k, v in value.items()}
    if isinstance(value, (list, tuple)) and any(isinstance(v, torch.Tensor) for v in value):
        return type(value)(_static_copy(v, device) for v in value)
    return value


def _fill(static: Any, value: Any) -> None:
    """Copy a batch into the capture's input buffers without waiting for the GPU.

    A copy from pageable host memory makes the host wait until the GPU has
    finished all work queued before it; the next replay could then not be
    queued while the GPU runs this one. Host tensors are pinned first (torch's
    caching host allocator keeps the block until the copy has read it).
    """
    import torch

    if isinstance(static, torch.Tensor):
        if value.device.type == "cpu" and static.device.type == "cuda" and not value.is_pinned():
            value = value.pin_memory()
        static.copy_(value, non_blocking=True)
    elif isinstance(static, Mapping):
        for key, item in static.items():
            _fill(item, value[key])
    elif isinstance(static, (list, tuple)):
        for item, new in zip(static, value):
            _fill(item, new)


@dataclass
class _Captured:
    graph: Any
    inputs: Any
    outputs: Mapping[str, Any]
    after: list[Callable[[], Any]]  # Python work the step did at capture time, redone after every replay


class StepGraphs:
    """Runs a trainer's steps: eagerly, or by capturing and replaying them (see the module's doc)."""

    def __init__(self, trainer: "Trainer", decision: GraphDecision, *, warmup: int = WARMUP_STEPS) -> None:
        self.trainer = trainer
        self.decision = decision
        self.warmup = warmup
        self.graphs: "collections.OrderedDict[Any, _Captured]" = collections.OrderedDict()
        self.seen: collections.Counter[Any] = collections.Counter()
        self.warmed: set[Any] = set()
        #: The steps at which a new key (after the first) appeared, recent ones only.
        self.changes: collections.deque[int] = collections.deque(maxlen=MAX_RECAPTURES + 1)
        #: Steps run each way since the start of the run (for the benchmark and the tests).
        self.replays = 0
        self.eager = 0
        self.captures = 0
        self._stream: Any = None

    @property
    def enabled(self) -> bool:
        return self.decision.enabled

    def __call__(self, batch: Any, batch_idx: int) -> Any:
        trainer = self.trainer
        if not self.enabled:
            self.eager += 1
            return trainer.hook.train_step(trainer=trainer, batch=batch, batch_idx=batch_idx)
        shapes = batch_signature(batch)
        key = (shapes, optimizer_key(self._optimizers()), trainer.graph_key(batch_idx))
        captured = self.graphs.get(key)
        if captured is not None:
            self.graphs.move_to_end(key)
            return self._replay(captured, batch)
        if self.seen[shapes] < self.warmup:  # optimizer state, cuDNN autotuning, lazily made buffers
            self.seen[shapes] += 1
            self.warmed.add(key)
            return self._eager_on_side_stream(batch, batch_idx)
        if key not in self.warmed:
            # A new key warms up once too: a part that first runs under it (a loss its schedule switches on)
            # makes its state eagerly, not inside a graph that would zero it at every replay.
            step = trainer.global_step
            window = [s for s in self.changes if step - s < RECAPTURE_WINDOW]
            if len(window) >= MAX_RECAPTURES:
                self._give_up(f"the step changed {len(window) + 1} times within {RECAPTURE_WINDOW} steps (a "
                              "learning rate or loss weight scheduled per step, or a graph_key that changes every "
                              "step), so each capture would replay only a few times")
                return self(batch, batch_idx)
            self.changes.append(step)
            self.warmed.add(key)
            return self._eager_on_side_stream(batch, batch_idx)
        return self._capture(key, batch, batch_idx)

    # -- the three ways to run a step ----------------------------------------------
    def _eager_on_side_stream(self, batch: Any, batch_idx: int) -> Any:
        """A warm-up step, on the stream captures use (as torch's graph docs ask)."""
        import torch

        trainer, stream = self.trainer, self._side_stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            outputs = trainer.hook.train_step(trainer=trainer, batch=batch, batch_idx=batch_idx)
        torch.cuda.current_stream().wait_stream(stream)
        self.eager += 1
        return outputs

    def _replay(self, captured: _Captured, batch: Any) -> Any:
        _fill(captured.inputs, batch)
        for kit in self._kits():
            kit.load_learning_rates()
        captured.graph.replay()
        for action in captured.after:
            action()
        self.replays += 1
        return clone_outputs(captured.outputs)

    def _capture(self, key: Any, batch: Any, batch_idx: int) -> Any:
        import torch

        trainer = self.trainer
        same_shape = [k for k in self.graphs if k[0] == key[0]]
        for old in same_shape[:max(0, len(same_shape) - MAX_GRAPHS_PER_SHAPE + 1)]:
            del self.graphs[old]  # least recently used first: its memory goes back before the capture
        while len(self.graphs) >= MAX_GRAPHS:
            self.graphs.popitem(last=False)
        inputs = _static_copy(batch, trainer.device)
        kits = self._kits()
        graph = torch.cuda.CUDAGraph()
        failure: Exception | None = None
        completed = False
        outputs: Any = None
        stream = self._side_stream()
        try:
            for kit in kits:
                kit.begin_capture()
            # torch.cuda.graph() without its gc.collect() and empty_cache(): a re-capture (a new loss weight
            # each epoch) should cost about one step, not a garbage collection of the whole process.
            torch.cuda.synchronize(trainer.device)
            with torch.cuda.stream(stream):
                graph.capture_begin(capture_error_mode="thread_local")
                try:
                    outputs = trainer.hook.train_step(trainer=trainer, batch=inputs, batch_idx=batch_idx)
                finally:
                    graph.capture_end()
            completed = outputs is not None
        except Exception as exc:  # noqa: BLE001 - reported below, as one line
            failure = exc
        finally:  # a Ctrl-C during the capture too: nothing of the step ran, its Python state is dropped
            after = [action for kit in kits for action in kit.end_capture(failed=not completed)]
        torch.cuda.current_stream().wait_stream(stream)
        if not completed:
            # A failed capture leaves torch's allocator and RNG in capture state for the rest of the process, so
            # training cannot safely go on eagerly here; what auto knows cannot be captured it never tries.
            reason = (str(failure).strip().splitlines() or [type(failure).__name__])[0] if failure is not None \
                else "train_step returned None"
            raise TrainingError(f"precision.cuda_graphs: capturing the training step failed ({reason[:200]}); "
                                "set precision.cuda_graphs=off for this run (a step that reads a value back to the "
                                "host, or an optimizer without a capturable mode, cannot be captured)")
        captured = _Captured(graph, inputs, outputs, after)
        self.graphs[key] = captured
        self.captures += 1
        return self._replay(captured, batch)

    # -- helpers -------------------------------------------------------------------
    def _give_up(self, reason: str) -> None:
        self.graphs.clear()
        self.decision = GraphDecision(False, reason + "; training goes on eagerly")
        if self.trainer.is_main:
            print(f"warning: precision.cuda_graphs: {self.decision.reason}", file=sys.stderr)

    def _side_stream(self) -> Any:
        import torch

        if self._stream is None:
            self._stream = torch.cuda.Stream(device=self.trainer.device)
        return self._stream

    def _kits(self) -> list[Any]:
        from .kit import kits_of

        return kits_of(self.trainer)

    def _optimizers(self) -> list[Any]:
        return [update.optimizer for kit in self._kits() for update in kit.updates]


def step_runner(trainer: "Trainer") -> StepGraphs:
    """The runner of ``trainer``'s steps, with the mode its config and set-up allow."""
    from .kit import kits_of

    kits = kits_of(trainer)
    decision = decide(configured_mode(trainer.config), device_type=trainer.device.type,
                      distributed=trainer.dist.enabled, accumulate=max((k.accumulate for k in kits), default=1),
                      on_kit=bool(kits),
                      compiled=compiled(trainer.config),
                      other=tuple(uncapturable(trainer, kits)))
    return StepGraphs(trainer, decision)


def uncapturable(trainer: "Trainer", kits: list[Any]) -> list[str]:
    """Why this trainer's step, as set up, cannot be captured: its optimizers, host reads it makes or declares."""
    reasons = []
    skip = getattr(getattr(trainer.config, "loop", None), "nonfinite", "stop") == "skip"
    for update in (u for kit in kits for u in kit.updates):
        optimizer, kind = update.optimizer, type(update.optimizer).__name__
        if "capturable" not in optimizer.defaults:
            reasons.append(f"the optimizer {kind} has no capturable mode")
        elif skip and not optimizer.defaults.get("fused"):
            reasons.append(f"loop.nonfinite: skip with a non-fused {kind} reads a flag on the host (fused does not)")
        scaler = update.scaler
        if scaler is not None and scaler.is_enabled() and not getattr(optimizer, "_step_supports_amp_scaling", False):
            reasons.append(f"fp16's GradScaler reads a flag on the host with a non-fused {kind}")
    declared = trainer.graph_blocker()
    if declared:
        reasons.append(declared)
    return reasons
