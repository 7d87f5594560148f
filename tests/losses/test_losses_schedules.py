"""Schedules against their closed forms, and the pix2pix LR policy against the reference rule."""

from __future__ import annotations

import io
import math

import pytest
import torch

from nectargan_losses.schedules import (
    Constant,
    Cosine,
    Exponential,
    Linear,
    Pix2PixLinear,
    Warmup,
    build_schedule,
    lr_lambda,
    lr_scheduler,
)
from losses_fixtures import registry_fixture  # noqa: F401 - pytest fixtures


def test_linear_both_ends_middle_and_outside():
    schedule = Linear(start_value=100.0, end_value=0.0, start=10, end=20)
    assert [schedule.value(t) for t in (0, 10, 15, 20, 30)] == [100.0, 100.0, 50.0, 0.0, 0.0]


def test_linear_can_rise():
    schedule = Linear(start_value=0.0, end_value=10.0, end=4)
    assert [schedule.value(t) for t in (0, 1, 4, 9)] == [0.0, 2.5, 10.0, 10.0]


def test_exponential_is_geometric_and_exact_at_the_ends():
    schedule = Exponential(start_value=1.0, end_value=0.01, end=10)
    assert schedule.value(0) == 1.0 and schedule.value(10) == 0.01 and schedule.value(11) == 0.01
    assert schedule.value(5) == pytest.approx(0.1)
    assert schedule.value(2.5) == pytest.approx(10 ** -0.5)
    with pytest.raises(ValueError, match="non-zero and of the same sign"):
        Exponential(start_value=1.0, end_value=0.0, end=10)


def test_cosine():
    schedule = Cosine(start_value=1.0, end_value=0.0, start=0, end=10)
    assert schedule.value(0) == 1.0 and schedule.value(10) == 0.0
    assert schedule.value(5) == pytest.approx(0.5)
    assert schedule.value(2.5) == pytest.approx(0.5 * (1 + math.cos(math.pi / 4)))


def test_warmup_then_constant_and_chained():
    warm = Warmup(start_value=0.0, end_value=1.0, start=2, end=6)
    assert [warm.value(t) for t in (0, 2, 3, 6, 100)] == [0.0, 0.0, 0.25, 1.0, 1.0]
    chained = Warmup(end_value=1.0, end=4, then=Cosine(start_value=1.0, end_value=0.1, start=4, end=14))
    assert chained.value(3) == 0.75 and chained.value(4) == 1.0
    assert chained.value(9) == pytest.approx(0.55) and chained.value(14) == 0.1 and chained.value(50) == 0.1


def test_unit_selects_epoch_or_step():
    assert Linear(end=100, unit="step").at(epoch=3, step=50) == 0.5
    assert Linear(end=10, unit="epoch").at(epoch=5, step=999) == 0.5
    assert Constant(3.0).at(7, 7) == 3.0


def test_registered_schedules_build_from_config_with_nested_then(registry):
    spec = {"name": "warmup", "end_value": 100.0, "end": 2,
            "then": {"name": "linear", "start_value": 100.0, "end_value": 10.0, "start": 2, "end": 12}}
    schedule = build_schedule(spec, registry)
    assert [schedule.value(t) for t in (0, 1, 2, 7, 12)] == [0.0, 50.0, 100.0, 55.0, 10.0]
    assert build_schedule(2.5, registry).value(9) == 2.5


@pytest.mark.parametrize("name,options,error", [
    ("linear", {"end": 0}, "end: must be greater than start (0)"),
    ("cosine", {}, "end: this key is required"),
    ("exponential", {"end": 5, "end_value": 0}, "end_value: exponential needs"),
    ("warmup", {"unit": "step", "then": {"name": "constant"}}, "then: its unit (epoch) must match"),
    ("constant", {"unit": "hour"}, "unit: Input should be 'epoch' or 'step'"),
])
def test_schedule_options_are_validated(registry, name, options, error):
    from nectargan_losses.config import validated_options

    with pytest.raises(ValueError) as info:
        validated_options(registry, "schedule", name, options, "terms.l1.schedule")
    assert error in str(info.value)


def reference_factor(epoch: int, n_epochs: int = 100, n_epochs_decay: int = 100, epoch_count: int = 1) -> float:
    """junyanz/pytorch-CycleGAN-and-pix2pix networks.get_scheduler, lr_policy 'linear'."""
    return 1.0 - max(0, epoch + epoch_count - n_epochs) / float(n_epochs_decay + 1)


def train_lrs(scheduler_factory, epochs: int, base_lr: float = 2e-4) -> list[float]:
    """The LR in effect during each epoch, stepping the scheduler after each epoch."""
    optimizer = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=base_lr)
    scheduler = scheduler_factory(optimizer)
    lrs = []
    for _ in range(epochs):
        lrs.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    return lrs


def test_pix2pix_policy_matches_the_reference_for_200_epochs(registry):
    schedule = build_schedule({"name": "pix2pix_linear", "n_epochs": 100, "n_epochs_decay": 100}, registry)
    ours = train_lrs(lambda opt: lr_scheduler(opt, schedule), 200)
    reference = train_lrs(lambda opt: torch.optim.lr_scheduler.LambdaLR(opt, reference_factor), 200)
    closed_form = [2e-4 * (1.0 - max(0, e + 1 - 100) / 101.0) for e in range(200)]
    assert ours == reference == closed_form
    assert ours[0] == ours[99] == 2e-4  # constant for the first 100 epochs
    assert ours[100] == pytest.approx(2e-4 * 100 / 101) and ours[199] == pytest.approx(2e-4 / 101)
    assert all(a > b for a, b in zip(ours[99:], ours[100:]))  # then strictly decreasing


def test_pix2pix_policy_never_goes_negative_past_its_length():
    schedule = Pix2PixLinear(n_epochs=2, n_epochs_decay=2)
    assert [schedule.value(k) for k in range(7)] == [1.0, 1.0, pytest.approx(2 / 3), pytest.approx(1 / 3), 0.0, 0.0, 0.0]


def test_lr_scheduler_resumes_from_a_weights_only_checkpoint():
    schedule = Pix2PixLinear(n_epochs=3, n_epochs_decay=4)
    uninterrupted = train_lrs(lambda opt: lr_scheduler(opt, schedule), 9, base_lr=1.0)

    optimizer = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1.0)
    scheduler = lr_scheduler(optimizer, schedule)
    for _ in range(5):
        optimizer.step()
        scheduler.step()
    buffer = io.BytesIO()
    torch.save({"optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict()}, buffer)
    buffer.seek(0)
    state = torch.load(buffer, weights_only=True)

    optimizer = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1.0)
    scheduler = lr_scheduler(optimizer, Pix2PixLinear(n_epochs=3, n_epochs_decay=4))
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    resumed = []
    for _ in range(4):
        resumed.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    assert resumed == uninterrupted[5:]


def test_lr_lambda_is_a_plain_function():
    multiplier = lr_lambda(Linear(end=10))
    assert type(multiplier).__name__ == "function" and multiplier(5) == 0.5
