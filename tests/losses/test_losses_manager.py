"""LossManager: reference numbers, skipped zero-weight terms, no host sync, scheduled weights, history."""

from __future__ import annotations

import io
import math

import pytest
import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from nectargan_core.errors import ConfigError
from nectargan_losses.manager import LossHistory, LossManager
from losses_fixtures import images_fixture, registry_fixture  # noqa: F401 - pytest fixtures

SYNC_METHODS = {"item", "tolist", "cpu", "numpy", "__bool__", "__float__", "__int__", "__index__", "nonzero"}


class HostSyncDetector(TorchFunctionMode):
    """Records every tensor operation that copies a value to the host (a device sync on a GPU)."""

    def __init__(self) -> None:
        super().__init__()
        self.syncs: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        to_cpu = name == "to" and any(str(a) == "cpu" for a in (*args[1:], *kwargs.values()))
        if name in SYNC_METHODS or to_cpu:
            self.syncs.append(name)
        return func(*args, **kwargs)


def logits(*values: float) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float32).view(len(values), 1, 1, 1).expand(len(values), 1, 3, 3)


def test_basic_vanilla_reproduces_the_pix2pix_objective(registry, images):
    fake, real = images
    manager = LossManager(registry=registry)
    d_real, d_fake = logits(1.5, -0.5), logits(-1.0, 0.25)
    d = manager.discriminator_losses(d_real, d_fake)
    expected_d = 0.5 * (F.binary_cross_entropy_with_logits(d_real, torch.ones_like(d_real))
                        + F.binary_cross_entropy_with_logits(d_fake, torch.zeros_like(d_fake)))
    assert d.total.item() == pytest.approx(expected_d.item())
    g = manager.generator_losses(fake, real, fake_logits=d_fake)
    expected_g = F.binary_cross_entropy_with_logits(d_fake, torch.ones_like(d_fake)) + 100 * F.l1_loss(fake, real)
    assert g.total.item() == pytest.approx(expected_g.item())
    g.total.backward()
    assert fake.grad is not None
    assert set(g.logs()) == {"G/gan", "G/l1", "G/total", "G/gan.raw", "G/l1.raw", "G/gan.weight", "G/l1.weight"}
    assert set(d.logs()) == {"D/gan_d", "D/total", "D/gan_d.raw", "D/gan_d.real", "D/gan_d.fake", "D/gan_d.weight"}
    assert d.logs()["D/gan_d.weight"] == 0.5 and g.logs()["G/l1.weight"] == 100.0


def test_results_are_0_dim_tensors_and_floats(registry, images):
    fake, real = images
    manager = LossManager({"spec": "extended"}, registry=registry)
    out = {**manager.generator_losses(fake, real, logits(0.1, 0.2)).logs(),
           **manager.discriminator_losses(logits(1, 2), logits(0, 1)).logs()}
    for key, value in out.items():
        if key.endswith(".weight"):
            assert type(value) is float, key
        else:
            assert isinstance(value, torch.Tensor) and value.dim() == 0 and not value.requires_grad, key


def test_zero_weight_terms_are_not_computed(registry, images):
    fake, real = images
    manager = LossManager({"add": {"counting": {"weight": 0}}, "terms": {"gan": {"weight": 0}}}, registry=registry)
    counting = next(t.loss for t in manager.terms if t.name == "counting")

    def d_forward():
        raise AssertionError("D must not run for a zero-weight GAN term")

    result = manager.generator_losses(fake, real, fake_logits=d_forward)
    assert counting.calls == 0
    assert result.weights == {"G/gan": 0.0, "G/l1": 100.0, "G/counting": 0.0}
    logs = result.logs()
    assert logs["G/counting"] == 0.0 and "G/counting.raw" not in logs and "G/gan.raw" not in logs
    assert result.total.item() == pytest.approx(100 * F.l1_loss(fake, real).item())


def test_a_scheduled_term_starts_computing_when_its_weight_leaves_zero(registry, images):
    fake, real = images
    schedule = {"name": "linear", "start_value": 0, "end_value": 4, "start": 1, "end": 3}
    manager = LossManager({"add": {"counting": {"schedule": schedule}}}, registry=registry)
    counting = next(t.loss for t in manager.terms if t.name == "counting")
    seen = []
    for epoch in range(5):
        manager.set_position(epoch, epoch * 10)
        result = manager.generator_losses(fake, real, logits(0.0))
        seen.append((counting.calls, result.weights["G/counting"]))
    assert seen == [(0, 0.0), (0, 0.0), (1, 2.0), (2, 4.0), (3, 4.0)]
    assert result.logs()["G/counting"].item() == pytest.approx(4 * F.l1_loss(fake, real).item())


def test_logged_weight_is_the_scheduled_one_per_step(registry, images):
    fake, real = images
    schedule = {"name": "cosine", "start_value": 100, "end_value": 0, "end": 200, "unit": "step"}
    manager = LossManager({"terms": {"l1": {"schedule": schedule}}}, registry=registry)
    manager.set_position(epoch=0, step=100)
    logs = manager.generator_losses(fake, real, logits(0.0)).logs()
    assert logs["G/l1.weight"] == pytest.approx(50.0)
    assert logs["G/l1"].item() == pytest.approx(50.0 * logs["G/l1.raw"].item())
    assert manager.weights() == {"G/gan": 1.0, "G/l1": pytest.approx(50.0), "D/gan_d": 0.5}


def test_every_term_owns_its_schedule(registry):
    manager = LossManager({"spec": "extended"}, registry=registry)
    schedules = [term.schedule for term in manager.terms]
    assert len({id(s) for s in schedules}) == len(schedules)


def test_all_weights_zero_gives_no_total(registry, images):
    fake, real = images
    manager = LossManager({"terms": {"gan": {"weight": 0}, "l1": {"weight": 0}}}, registry=registry)
    result = manager.generator_losses(fake, real)
    assert result.total is None and result.logs()["G/total"] == 0.0


def test_wgan_gp_adds_the_penalty_and_requires_the_critic(registry, images):
    fake, real = images
    manager = LossManager({"gan_mode": "wgan-gp", "terms": {"gan_d": {"weight": 1}}}, registry=registry)
    with pytest.raises(TypeError, match="pass critic, real and fake"):
        manager.discriminator_losses(logits(1.0), logits(0.0))
    weight = torch.full((3, 16, 16), 2.0 / 16 / math.sqrt(3))  # ||grad|| = 2 -> raw penalty (2 - 1)^2 = 1
    condition = torch.randn_like(real)
    critic = lambda x: (x[:, 3:] * weight).flatten(1).sum(1)  # noqa: E731 - conditional linear critic
    result = manager.discriminator_losses(logits(1.0, 3.0), logits(0.0, 1.0), critic=critic, real=real,
                                          fake=fake, condition=condition)
    assert result.raw["D/gp"].item() == pytest.approx(1.0, rel=1e-5)
    assert result.weights["D/gp"] == 10.0
    assert result.total.item() == pytest.approx((0.5 - 2.0) + 10.0, rel=1e-5)  # fake - real + 10 * gp
    assert manager.weights()["D/gp"] == 10.0


def test_a_training_step_never_syncs_with_the_host(registry, images):
    fake, real = images
    manager = LossManager({"spec": "extended", "gan_mode": "wgan-gp", "add": {"ssim": {}, "counting": {}},
                           "terms": {"l2": {"schedule": {"name": "linear", "end": 10}}}}, registry=registry)
    critic = torch.nn.Conv2d(6, 1, 3)
    condition = torch.randn_like(real)

    with HostSyncDetector() as probe:
        torch.zeros(()).item()
    assert probe.syncs == ["item"]  # the probe sees host reads

    with HostSyncDetector() as probe:
        for step in range(3):
            manager.set_position(0, step)
            d = manager.discriminator_losses(critic(torch.cat([condition, real], 1)),
                                             critic(torch.cat([condition, fake.detach()], 1)),
                                             critic=critic, real=real, fake=fake, condition=condition)
            g = manager.generator_losses(fake, real, lambda: critic(torch.cat([condition, fake], 1)))
            (d.total + g.total).backward()
            outputs = {**g.logs(), **d.logs()}
    assert probe.syncs == []
    assert "G/ssim" in outputs and "D/gp" in outputs
    assert manager.history.points()[0]["values"]["G/counting.weight"] == 1.0  # reading back is on demand


def test_history_is_bounded_and_keeps_the_whole_curve():
    history = LossHistory(every=1, max_points=4)
    for step in range(20):
        history.add(step, step // 5, {"G/l1": torch.tensor(float(step)), "G/l1.weight": 2.0})
    points = history.points()
    assert len(points) <= 5
    assert points[0]["first_step"] == 0 and points[-1]["step"] == 19
    for point in points:  # each value is the mean over the steps the bucket covers
        first, last = point["first_step"], point["step"]
        assert point["values"]["G/l1"] == pytest.approx((first + last) / 2)
        assert point["values"]["G/l1.weight"] == 2.0
    assert history.every > 1


def test_history_survives_a_weights_only_checkpoint(registry, images):
    fake, real = images
    manager = LossManager(registry=registry, history_every=2)
    for step in range(5):
        manager.set_position(0, step)
        manager.generator_losses(fake, real, logits(0.5))
    buffer = io.BytesIO()
    torch.save(manager.state_dict(), buffer)
    buffer.seek(0)
    restored = LossManager(registry=registry, history_every=2)
    restored.load_state_dict(torch.load(buffer, weights_only=True))
    assert restored.history.points() == manager.history.points()


def test_bad_config_is_a_config_error_naming_the_key(registry):
    with pytest.raises(ConfigError, match=r"^loss.terms.l1.weight: Input should be greater than or equal to 0"):
        LossManager({"terms": {"l1": {"weight": -1}}}, registry=registry)
    with pytest.raises(ConfigError, match=r"^loss: gan_mode: unknown GAN objective 'bce'"):
        LossManager({"gan_mode": "bce"}, registry=registry)
