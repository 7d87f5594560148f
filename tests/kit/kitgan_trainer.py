"""The kit's test trainers: ``KitGanTrainer`` (two networks, on the TrainerKit) and ``PlainTrainer``.

KitGanTrainer: G maps a fixed noise vector z to a sample, D tells G's samples
from fixed real ones x (paired with z, so G also has an L1 term towards x).
Both are small MLPs, optionally with BatchNorm. Every knob the kit handles is
an option: accumulation, the Adam kernel, an enabled GradScaler (the fp16
path, on CPU without autocast), clipping, a step- or epoch-unit LR schedule, and a NaN
batch at a chosen step.
"""

from __future__ import annotations

import os
import signal

import torch
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset

from nectargan_core import ResumableSampler, Trainer, TrainerKit, hookimpl


def mlp(features: int, out: int, norm: bool) -> torch.nn.Module:
    layers: list[torch.nn.Module] = [torch.nn.Linear(features, 8)]
    if norm:
        layers.append(torch.nn.BatchNorm1d(8))
    layers += [torch.nn.LeakyReLU(0.2), torch.nn.Linear(8, out)]
    return torch.nn.Sequential(*layers)


def adam(params, implementation: str, lr: float = 0.01) -> torch.optim.Adam:
    kernel = {"fused": {"fused": True}, "foreach": {"foreach": True}, "single": {"foreach": False}}[implementation]
    return torch.optim.Adam(params, lr=lr, betas=(0.5, 0.999), **kernel)


def vectors(samples: int, features: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(7)
    z = torch.randn(samples, features, generator=generator)
    x = torch.randn(samples, features, generator=generator) * 0.5 + 2.0
    return z, x


class KitGanTrainer(Trainer):
    kit = TrainerKit()

    def setup(self) -> None:
        cfg = self.config.kitgan
        self.z, self.x = vectors(cfg.samples, cfg.features)
        torch.manual_seed(11)  # the same initial weights in every process and every run
        self.generator = self.track("generator", mlp(cfg.features, cfg.features, cfg.norm).to(self.device))
        self.discriminator = self.track("discriminator", mlp(cfg.features, 1, cfg.norm).to(self.device))
        self.g_train, self.d_train = self.parallel(self.generator), self.parallel(self.discriminator)
        self.opt_g = self.track("opt_g", adam(self.generator.parameters(), cfg.implementation, cfg.lr))
        self.opt_d = self.track("opt_d", adam(self.discriminator.parameters(), cfg.implementation, cfg.lr))
        scaler = dict(device=self.device.type, enabled=cfg.fp16_scaler, init_scale=1024.0)
        self.scaler_g = self.track("scaler_g", torch.amp.GradScaler(**scaler))
        self.scaler_d = self.track("scaler_d", torch.amp.GradScaler(**scaler))
        self.sched_g = None
        if cfg.lr_decay is not None:
            decay = cfg.lr_decay
            self.sched_g = self.track("sched_g", torch.optim.lr_scheduler.LambdaLR(self.opt_g, lambda k: decay ** k))
        self.kit.accumulate = cfg.accumulate
        self.update_d = self.kit.update(self.d_train, self.opt_d, scaler=self.scaler_d, clip=cfg.clip)
        self.update_g = self.kit.update(self.g_train, self.opt_g, scaler=self.scaler_g, clip=cfg.clip,
                                        scheduler=self.sched_g, scheduler_unit=cfg.lr_unit)

    def train_dataloader(self) -> DataLoader:
        sampler = ResumableSampler(len(self.z), shuffle=True, seed=self.config.run.seed)
        return DataLoader(TensorDataset(self.z, self.x), batch_size=self.config.kitgan.batch_size, sampler=sampler)

    def graph_key(self, batch_idx):
        """The poisoned step's Python differs (see train_step): it is captured on its own."""
        return self.config.kitgan.nan_at_step == self.global_step + 1

    @hookimpl
    def train_step(self, batch, batch_idx):
        cfg = self.config.kitgan
        z, x = (t.to(self.device) for t in batch)
        poisoned = cfg.nan_at_step == self.global_step + 1 and cfg.nan_rank in (None, self.dist.rank)
        if poisoned and cfg.nan_in == "inputs":
            z, x = z * float("nan"), x * float("nan")
        nan = float("nan") if poisoned and cfg.nan_in == "loss" else 0.0  # a constant: no effect on gradients
        with self.kit.step(batch_idx):
            # 1 while this batch synchronises DDP gradients, 0 under no_sync (not distributed: 1).
            synced = float(not isinstance(self.g_train, DistributedDataParallel)
                           or self.g_train.require_backward_grad_sync)
            with self.kit.autocast():  # the run's precision.amp (none in kitgan's options: a no-op)
                fake = self.g_train(z)
            self.forward_dtype = fake.dtype
            with self.update_d:
                judged = fake.detach() if cfg.detach_fake else fake
                with self.kit.autocast():
                    judged_fake, real = self.d_train(judged).float(), self.d_train(x).float()
                if poisoned and cfg.nan_in == "gradients":  # D's loss stays finite, its gradients do not
                    real.register_hook(lambda grad: grad * float("nan"))
                d_loss = F.softplus(judged_fake).mean() + F.softplus(-real).mean() + nan
                self.update_d.backward(d_loss)
            with self.update_g:
                g_loss = F.l1_loss(fake.float(), x) + nan
                if cfg.g_adv:  # judged by the bare D: a DDP module must not run forward without its backward
                    with self.kit.autocast():
                        judged = self.discriminator(fake).float()
                    g_loss = g_loss + cfg.g_adv * F.softplus(-judged).mean()
                self.update_g.backward(g_loss)
        if cfg.kill_at_step == self.global_step + 1:  # after the updates, before the engine counts the step
            os.kill(os.getpid(), signal.SIGKILL)
        return {"D": d_loss.detach(), "G": g_loss.detach(), "synced": synced}

    @hookimpl
    def on_epoch_end(self):
        self.kit.step_epoch_schedulers()


class PlainTrainer(Trainer):
    """Steps its optimizer by hand, and declares no capability."""

    def setup(self) -> None:
        self.model = self.track("model", torch.nn.Linear(2, 1))
        self.optimizer = self.track("optimizer", torch.optim.SGD(self.model.parameters(), lr=0.1))

    def train_dataloader(self) -> DataLoader:
        samples = self.config.plain.samples
        return DataLoader(TensorDataset(torch.ones(samples, 2), torch.zeros(samples, 1)), batch_size=2)

    @hookimpl
    def train_step(self, batch):
        x, y = batch
        loss = F.mse_loss(self.model(x), y)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return {"loss": loss.detach()}
