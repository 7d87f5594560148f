"""The toy trainer: fits y = x @ w with SGD. Small, deterministic, fast."""

from __future__ import annotations

import atexit
import os
import signal
import time

import torch
from torch.utils.data import DataLoader, TensorDataset

from nectargan_core import ResumableSampler, Trainer, hookimpl
from nectargan_core import NONFINITE_SKIP


def build_linear(features: int = 3) -> torch.nn.Module:
    return torch.nn.Linear(features, 1)


class ToyTrainer(Trainer):
    #: The toy leaves a non-finite update out itself (one model, no BatchNorm, a host read per step):
    #: it declares so by hand, as a trainer that does not use the TrainerKit must.
    capabilities = frozenset({NONFINITE_SKIP})

    def setup(self) -> None:
        cfg = self.config.toy
        features = cfg.model.options.get("features", 3)
        generator = torch.Generator().manual_seed(1234)
        weights = torch.arange(1, features + 1, dtype=torch.float32).unsqueeze(1)
        self.x = torch.randn(cfg.samples, features, generator=generator)
        self.y = self.x @ weights
        self.val_x = torch.randn(cfg.val_samples, features, generator=generator)
        self.val_y = self.val_x @ weights
        self.model = self.track("model", self.build("model", cfg.model).to(self.device))
        self.loss = self.build("loss", cfg.loss)
        self.optimizer = self.track("optimizer", torch.optim.SGD(self.model.parameters(), lr=cfg.lr, momentum=0.9))
        self.model_train = self.parallel(self.model)  # DDP in a distributed run, the model itself otherwise
        if cfg.signal_at_exit and cfg.signal_rank == self.dist.rank:
            atexit.register(self._send_signal)  # runs after the CLI has ended the run, as the interpreter exits

    def train_dataloader(self):
        cfg = self.config.toy
        sampler = ResumableSampler(cfg.samples, shuffle=True, seed=self.config.run.seed)
        return DataLoader(TensorDataset(self.x, self.y), batch_size=cfg.batch_size, sampler=sampler)

    @hookimpl
    def train_step(self, batch, batch_idx):
        cfg = self.config.toy
        first_attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") == "0"
        if cfg.fail_at_step is not None and self.global_step + 1 == cfg.fail_at_step \
                and cfg.fail_rank in (None, self.dist.rank) and (first_attempt or not cfg.fail_first_attempt_only):
            raise RuntimeError(f"toy failure at step {cfg.fail_at_step}")
        if cfg.step_sleep:
            time.sleep(cfg.step_sleep)
        if cfg.sleep_at_step == self.global_step + 1 and cfg.sleep_rank == self.dist.rank:
            time.sleep(cfg.sleep_s)
        x, y = (t.to(self.device) for t in batch)
        loss = self.loss(self.model_train(x), y)
        if cfg.nan_at_step is not None and self.global_step + 1 == cfg.nan_at_step:
            loss = loss * float("nan")
        self.optimizer.zero_grad(set_to_none=True)
        self._maybe_stop("before_backward")
        loss.backward()
        # A trainer that supports loop.nonfinite=skip leaves a non-finite update out (the toy may sync).
        if self.config.loop.nonfinite == "stop" or torch.isfinite(loss):
            self.optimizer.step()
        self._maybe_stop("after_update")
        if cfg.signal_at_step == self.global_step + 1 and cfg.signal_rank == self.dist.rank:
            self._send_signal()
        return {"loss": loss.detach(), "noise": torch.rand(())}

    def _send_signal(self) -> None:
        """A signal as a terminal, docker stop or a scheduler sends it, at a chosen moment (signal tests)."""
        cfg = self.config.toy
        pid = os.getpid() if cfg.signal_to == "self" else int(os.environ["NECTARGAN_LAUNCHER_PID"])
        os.kill(pid, getattr(signal, cfg.signal_name))
        time.sleep(0.2)  # let it arrive (and, sent to the launcher, be passed on) before going on

    def _maybe_stop(self, where: str) -> None:
        """Hang like a frozen process: SIGSTOP this rank at the configured step and point."""
        cfg = self.config.toy
        if cfg.stop_at_step == self.global_step + 1 and cfg.stop_where == where and cfg.stop_rank == self.dist.rank:
            os.kill(os.getpid(), signal.SIGSTOP)

    @hookimpl
    def validate(self, epoch):
        if not len(self.val_x):
            return None
        with torch.no_grad():
            mse = self.loss(self.model(self.val_x.to(self.device)), self.val_y.to(self.device))
        return {"mse": float(mse)}
