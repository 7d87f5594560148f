"""One CycleGAN iteration (and a few, with the image pools drawing) against the reference's ``optimize_parameters``.

The reference model is written out here from the reference's description
(``CycleGANModel.optimize_parameters``, ``GANLoss``, ``ImagePool``) and runs
on the oracle networks of tests/reference/reference_networks.py, which have the
reference's module layout; our networks' initial weights are mapped into them
with ``nectargan_models.reference.to_reference``. Both sides then train on the
same batches and are compared tensor by tensor.
"""

from __future__ import annotations

import itertools
import random
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

from nectargan_core import Run
from nectargan_models.reference import to_reference

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "reference"))
from reference_networks import define_D, define_G  # noqa: E402

from cyclegan_helpers import TINY_MODELS  # noqa: E402


class ReferenceImagePool:
    """The reference's ImagePool (util/image_pool.py), drawing from Python's ``random`` module."""

    def __init__(self, pool_size: int) -> None:
        self.pool_size = pool_size
        if self.pool_size > 0:
            self.num_imgs = 0
            self.images = []

    def query(self, images):
        if self.pool_size == 0:
            return images
        return_images = []
        for image in images:
            image = torch.unsqueeze(image.data, 0)
            if self.num_imgs < self.pool_size:
                self.num_imgs = self.num_imgs + 1
                self.images.append(image)
                return_images.append(image)
            else:
                p = random.uniform(0, 1)
                if p > 0.5:
                    random_id = random.randint(0, self.pool_size - 1)
                    tmp = self.images[random_id].clone()
                    self.images[random_id] = image
                    return_images.append(tmp)
                else:
                    return_images.append(image)
        return torch.cat(return_images, 0)


class ReferenceGANLoss(nn.Module):
    """The reference's GANLoss for gan_mode lsgan: MSE against 1 (real) or 0 (fake) expanded to the patch map."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("real_label", torch.tensor(1.0))
        self.register_buffer("fake_label", torch.tensor(0.0))
        self.loss = nn.MSELoss()

    def __call__(self, prediction, target_is_real):
        target = (self.real_label if target_is_real else self.fake_label).expand_as(prediction)
        return self.loss(prediction, target)


class ReferenceCycleGAN:
    """CycleGANModel's training iteration: forward, G update with D frozen, then D_A and D_B."""

    def __init__(self, netG_A, netG_B, netD_A, netD_B, *, pool_size, lambda_A=10.0, lambda_B=10.0,
                 lambda_identity=0.5, lr=2e-4, beta1=0.5):
        self.netG_A, self.netG_B, self.netD_A, self.netD_B = netG_A, netG_B, netD_A, netD_B
        self.lambda_A, self.lambda_B, self.lambda_identity = lambda_A, lambda_B, lambda_identity
        self.fake_A_pool, self.fake_B_pool = ReferenceImagePool(pool_size), ReferenceImagePool(pool_size)
        self.criterionGAN = ReferenceGANLoss()
        self.criterionCycle = nn.L1Loss()
        self.criterionIdt = nn.L1Loss()
        # foreach=False: the per-tensor Adam, as optim.implementation: single
        self.optimizer_G = torch.optim.Adam(itertools.chain(netG_A.parameters(), netG_B.parameters()), lr=lr,
                                            betas=(beta1, 0.999), foreach=False)
        self.optimizer_D = torch.optim.Adam(itertools.chain(netD_A.parameters(), netD_B.parameters()), lr=lr,
                                            betas=(beta1, 0.999), foreach=False)

    def set_input(self, batch):
        self.real_A, self.real_B = batch["A"], batch["B"]

    def forward(self):
        self.fake_B = self.netG_A(self.real_A)
        self.rec_A = self.netG_B(self.fake_B)
        self.fake_A = self.netG_B(self.real_B)
        self.rec_B = self.netG_A(self.fake_A)

    def backward_D_basic(self, netD, real, fake):
        pred_real = netD(real)
        loss_D_real = self.criterionGAN(pred_real, True)
        pred_fake = netD(fake.detach())
        loss_D_fake = self.criterionGAN(pred_fake, False)
        loss_D = (loss_D_real + loss_D_fake) * 0.5
        loss_D.backward()
        return loss_D

    def backward_D_A(self):
        fake_B = self.fake_B_pool.query(self.fake_B)
        self.loss_D_A = self.backward_D_basic(self.netD_A, self.real_B, fake_B)

    def backward_D_B(self):
        fake_A = self.fake_A_pool.query(self.fake_A)
        self.loss_D_B = self.backward_D_basic(self.netD_B, self.real_A, fake_A)

    def backward_G(self):
        lambda_idt, lambda_A, lambda_B = self.lambda_identity, self.lambda_A, self.lambda_B
        if lambda_idt > 0:
            self.idt_A = self.netG_A(self.real_B)
            self.loss_idt_A = self.criterionIdt(self.idt_A, self.real_B) * lambda_B * lambda_idt
            self.idt_B = self.netG_B(self.real_A)
            self.loss_idt_B = self.criterionIdt(self.idt_B, self.real_A) * lambda_A * lambda_idt
        else:
            self.loss_idt_A = 0
            self.loss_idt_B = 0
        self.loss_G_A = self.criterionGAN(self.netD_A(self.fake_B), True)
        self.loss_G_B = self.criterionGAN(self.netD_B(self.fake_A), True)
        self.loss_cycle_A = self.criterionCycle(self.rec_A, self.real_A) * lambda_A
        self.loss_cycle_B = self.criterionCycle(self.rec_B, self.real_B) * lambda_B
        self.loss_G = (self.loss_G_A + self.loss_G_B + self.loss_cycle_A + self.loss_cycle_B + self.loss_idt_A
                       + self.loss_idt_B)
        self.loss_G.backward()

    @staticmethod
    def set_requires_grad(nets, requires_grad):
        for net in nets:
            for param in net.parameters():
                param.requires_grad = requires_grad

    def optimize_parameters(self):
        self.forward()
        self.set_requires_grad([self.netD_A, self.netD_B], False)
        self.optimizer_G.zero_grad()
        self.backward_G()
        self.optimizer_G.step()
        self.set_requires_grad([self.netD_A, self.netD_B], True)
        self.optimizer_D.zero_grad()
        self.backward_D_A()
        self.backward_D_B()
        self.optimizer_D.step()

    def losses(self):
        names = {"G/G_A": "loss_G_A", "G/G_B": "loss_G_B", "G/cycle_A": "loss_cycle_A", "G/cycle_B": "loss_cycle_B",
                 "G/idt_A": "loss_idt_A", "G/idt_B": "loss_idt_B", "G/total": "loss_G", "D/D_A": "loss_D_A",
                 "D/D_B": "loss_D_B"}
        return {key: float(torch.as_tensor(getattr(self, attr)).detach()) for key, attr in names.items()}


def cyclegan_config(tmp_path, root, **sections):
    base = {
        "trainer": "cyclegan",
        "run": {"output_dir": str(tmp_path / "runs"), "device": "cpu", "seed": 3, "deterministic": True,
                "threads": 1},  # tiny networks: a second thread only waits (and on a busy machine, long)
        "loop": {"epochs": 1, "log_every_steps": 1},
        "checkpoint": {"save_last": False, "every_epochs": None},
        "data": {"root": str(root), "load_size": 16, "crop_size": 16, "num_workers": 0, "batch_size": 2},
        "models": TINY_MODELS,
        "optim": {"implementation": "single"},
        "examples": {"every_epochs": None},
        "visualizers": [],
    }
    for key, value in sections.items():
        base[key] = {**base.get(key, {}), **value} if isinstance(value, dict) else value
    return base


def reference_copy(trainer, name, kind):
    """An oracle network with the reference layout holding our network ``name``'s current weights."""
    ours = trainer.stateful[name]
    choice = trainer.config.models.generator if kind == "G" else trainer.config.models.discriminator
    options = choice.options
    if kind == "G":
        net = define_G(3, 3, options["ngf"], f"resnet_{options['n_blocks']}blocks", norm="instance")
    else:
        net = define_D(3, options["ndf"], "n_layers", n_layers_D=options["n_layers"], norm="instance")
    net.load_state_dict(to_reference(ours.state_dict(), choice.name, options), strict=True)
    return net


def assert_same_weights(trainer, reference, names, atol):
    for name, net in zip(("G_A", "G_B", "D_A", "D_B"), names):
        choice = trainer.config.models.generator if name.startswith("G") else trainer.config.models.discriminator
        ours = to_reference(trainer.stateful[name].state_dict(), choice.name, choice.options)
        theirs = net.state_dict()
        assert ours.keys() == theirs.keys(), name
        for key in ours:
            torch.testing.assert_close(ours[key], theirs[key], atol=atol, rtol=0,
                                       msg=lambda m, key=key: f"{name}.{key}: {m}")


@pytest.mark.parametrize("pool_size, steps, lambda_identity", [(0, 1, 0.5), (2, 3, 0.5), (0, 2, 0.0)],
                         ids=["one-iteration", "pool-draws", "no-identity"])
def test_iterations_match_the_reference_optimize_parameters(tmp_path, make_unpaired, pool_size, steps,
                                                            lambda_identity):
    root = make_unpaired(12, 16)
    run = Run.create(cyclegan_config(tmp_path, root, pool={"size": pool_size},
                                     loss={"lambda_identity": lambda_identity}, loop={"max_steps": steps}))
    trainer = run.trainer
    trainer.prepare()
    nets = [reference_copy(trainer, name, name[0]) for name in ("G_A", "G_B", "D_A", "D_B")]
    reference = ReferenceCycleGAN(*nets, pool_size=pool_size, lambda_identity=lambda_identity)
    batches = list(itertools.islice(iter(trainer.train_loader), steps))
    assert len(batches) == steps and batches[0]["A"].shape == (2, 3, 16, 16)

    random.seed(trainer.config.run.seed)  # the reference's pools draw from Python's random module, seeded alike
    for index, batch in enumerate(batches):
        reference.set_input(batch)
        reference.optimize_parameters()
        logs = trainer.train_step(batch=batch, batch_idx=index)
        expected = reference.losses()
        for key, value in expected.items():
            assert float(logs[key]) == pytest.approx(value, abs=1e-5, rel=1e-5), (index, key)
        assert float(logs["D/total"]) == pytest.approx(expected["D/D_A"] + expected["D/D_B"], abs=1e-5)

    assert_same_weights(trainer, reference, nets, atol=1e-6)
    if pool_size:
        assert len(trainer.fake_A_pool) == len(trainer.fake_B_pool) == pool_size
        for ours, theirs in ((trainer.fake_A_pool, reference.fake_A_pool), (trainer.fake_B_pool, reference.fake_B_pool)):
            for mine, reference_image in zip(ours.images, theirs.images, strict=True):
                torch.testing.assert_close(mine, reference_image, atol=1e-6, rtol=0)
    # the optimizers stepped once per iteration, and D is trainable again after G's update
    assert int(trainer.opt_g.state_dict()["state"][0]["step"]) == steps
    assert all(p.requires_grad for net in (trainer.D_A, trainer.D_B) for p in net.parameters())


def test_a_different_start_is_detected(tmp_path, make_unpaired):
    """The comparison is sharp: one reference network perturbed by 1e-4 fails it."""
    root = make_unpaired(12, 16)
    run = Run.create(cyclegan_config(tmp_path, root, pool={"size": 0}, loop={"max_steps": 1}))
    trainer = run.trainer
    trainer.prepare()
    nets = [reference_copy(trainer, name, name[0]) for name in ("G_A", "G_B", "D_A", "D_B")]
    with torch.no_grad():
        next(nets[1].parameters()).add_(1e-4)
    reference = ReferenceCycleGAN(*nets, pool_size=0)
    batch = next(iter(trainer.train_loader))
    reference.set_input(batch)
    reference.optimize_parameters()
    trainer.train_step(batch=batch, batch_idx=0)
    with pytest.raises(AssertionError):
        assert_same_weights(trainer, reference, nets, atol=1e-6)
