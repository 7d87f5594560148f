"""Config models of the toy plugin (no torch here, so loading the plugin stays cheap)."""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import BaseModel, Field

from nectargan_core import choice_of, Section

ModelChoice = choice_of("model", default="toy_linear")
LossChoice = choice_of("loss", default="toy_mse")


class ToySection(Section):
    """The toy trainer's data and optimisation settings."""

    # As a plugin migrates its options: older runs wrote sample_count (renamed) and legacy_flag (removed).
    renamed_options = {"sample_count": "samples"}
    removed_options = frozenset({"legacy_flag"})

    samples: int = Field(16, description="Training samples", ge=0)
    val_samples: int = Field(4, description="Validation samples", ge=0)
    batch_size: int = Field(4, description="Batch size", ge=1)
    lr: float = Field(0.05, description="SGD learning rate", gt=0)
    step_sleep: float = Field(0.0, description="Seconds to sleep in each step (for signal tests)", ge=0)
    fail_at_step: Optional[int] = Field(None, description="Raise RuntimeError at this global step")
    fail_rank: Optional[int] = Field(None, description="With fail_at_step: fail in this rank only (null: all)")
    fail_first_attempt_only: bool = Field(
        False, description="With fail_at_step: fail only before torchrun restarts the workers")
    nan_at_step: Optional[int] = Field(None, description="Make the loss NaN at this global step (numerical fault tests)")
    stop_at_step: Optional[int] = Field(
        None, description="SIGSTOP this process in this global step (liveness tests: a rank that hangs)")
    stop_rank: int = Field(1, ge=0, description="With stop_at_step: the rank that stops")
    stop_where: Literal["before_backward", "after_update"] = Field(
        "after_update", description="With stop_at_step: before the gradient all-reduce (the others wait in the data "
                                    "plane) or after the update (they wait in the control group)")
    sleep_at_step: Optional[int] = Field(
        None, description="Sleep sleep_s in this global step, before the forward pass, in sleep_rank only (a rank "
                          "that is alive but slower than distributed.timeout_s)")
    sleep_rank: int = Field(1, ge=0, description="With sleep_at_step: the rank that sleeps")
    sleep_s: float = Field(0.0, ge=0, description="With sleep_at_step: how long")
    signal_at_step: Optional[int] = Field(
        None, description="Send signal_name in this global step (after the update), from signal_rank to signal_to")
    signal_at_exit: bool = Field(
        False, description="Send signal_name as signal_rank's interpreter exits (after the run ended)")
    signal_name: Literal["SIGINT", "SIGTERM"] = Field("SIGTERM", description="The signal to send")
    signal_rank: int = Field(0, ge=0, description="The rank that sends it")
    signal_to: Literal["self", "launcher"] = Field(
        "self", description="To this process, or to the --nproc launcher (NECTARGAN_LAUNCHER_PID)")
    model: ModelChoice = Field(default_factory=ModelChoice, validate_default=True)
    loss: LossChoice = Field(default_factory=LossChoice, validate_default=True)


class ToyTrainerOptions(BaseModel):
    """Sections the toy trainer adds to the config."""

    toy: ToySection = Field(default_factory=ToySection, description="Toy trainer settings")


class LinearOptions(Section):
    features: int = Field(3, ge=1, description="Input features")


class RecorderOptions(Section):
    path: str = Field(..., description="JSON-lines file that receives one line per hook call")


class ExtraSection(Section):
    """A section owned by the toy plugin, present in every config."""

    greeting: str = Field("hello", description="What the toy-hello command says")
