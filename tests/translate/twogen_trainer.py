"""A trainer with a generator each way on paired data (A->B and B->A, trained with L1 only), for the commands."""

from __future__ import annotations

import torch.nn.functional as F
from pydantic import BaseModel, Field

from nectargan_core import PrecisionSection, hookimpl
from nectargan_translate import (DataChoice, ExamplesSection, ModelsSection, OptimSection, TestSection,
                                 TranslationTrainer, ValidationSection, build_discriminator, build_generator)


class TwoGenOptions(BaseModel):
    data: DataChoice = Field(default_factory=DataChoice, validate_default=True, description="Paired data")
    models: ModelsSection = Field(default_factory=ModelsSection, description="Networks")
    optim: OptimSection = Field(default_factory=OptimSection, description="Optimizers")
    precision: PrecisionSection = Field(default_factory=PrecisionSection, description="Precision")
    validation: ValidationSection = Field(default_factory=ValidationSection, description="Validation")
    examples: ExamplesSection = Field(default_factory=ExamplesSection, description="Examples")
    test: TestSection = Field(default_factory=TestSection, description="Test")


class TwoGenTrainer(TranslationTrainer):
    generators = {"AtoB": "generator", "BtoA": "generator_back"}

    def setup(self):
        self.setup_data()
        forward = self.track("generator", build_generator(self.registry, self.config).to(self.device))
        back = self.track("generator_back", build_generator(self.registry, self.config).to(self.device))
        critic = self.track("discriminator", build_discriminator(self.registry, self.config).to(self.device))
        self.g_train, self.back_train = self.parallel(forward), self.parallel(back)
        self.d_train = self.parallel(critic)
        self.setup_updates([self.g_train, self.back_train], [*forward.parameters(), *back.parameters()],
                           self.d_train, critic.parameters())

    @hookimpl
    def train_step(self, batch, batch_idx):
        a, b = self.to_device(batch["A"]), self.to_device(batch["B"])
        with self.kit.step(batch_idx):
            with self.update_d:
                with self.kit.autocast():
                    loss_d = self.d_train(a, b).square().mean()
                self.update_d.backward(loss_d)
            with self.update_g:
                with self.kit.autocast():
                    loss_g = F.l1_loss(self.g_train(a), b) + F.l1_loss(self.back_train(b), a)
                self.update_g.backward(loss_g)
        return {"D/loss": loss_d.detach(), "G/loss": loss_g.detach()}


class TwoGenPlugin:
    @hookimpl
    def register_trainers(self, register):
        register("twogen", TwoGenTrainer, options=TwoGenOptions, description="A generator each way, paired data")
