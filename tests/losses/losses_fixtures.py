"""Fixtures for the losses tests: a registry with this plugin and a counting loss.

Not a conftest.py: tests/conftest.py is imported as the module `conftest` by other
tests, and a second file of that name would shadow it.
"""

from __future__ import annotations

import pytest
import torch

import nectargan_losses.plugin
from nectargan_core import hookimpl
from nectargan_core.plugins import PluginHost


class CountingL1(torch.nn.Module):
    """L1 that counts its calls, to prove zero-weight terms are never computed."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def forward(self, prediction, target):
        self.calls += 1
        return (prediction - target).abs().mean()


class _TestParts:
    @hookimpl
    def register_losses(self, register):
        register("counting", CountingL1, description="L1 that counts calls")


@pytest.fixture(name="registry")
def registry_fixture():
    """A registry with only the core, this plugin and the counting loss (no installed extras)."""
    host = PluginHost(env={})
    assert host.add_plugin(nectargan_losses.plugin, "losses", "nectargan-losses").status == "loaded"
    assert host.add_plugin(_TestParts(), "test-parts").status == "loaded"
    return host.registry


@pytest.fixture(name="images")
def images_fixture():
    generator = torch.Generator().manual_seed(0)
    fake = (torch.rand(2, 3, 16, 16, generator=generator) * 2 - 1).requires_grad_(True)
    real = torch.rand(2, 3, 16, 16, generator=generator) * 2 - 1
    return fake, real
