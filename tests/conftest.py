"""Fixtures for every test: fresh plugin loading, fake plugin distributions, the CLI."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from nectargan_core.plugins import PluginHost, reset_plugins
from support import make_fake_dist, run_cli
from translation_fixtures import make_synth, trained_run  # noqa: F401 - fixtures for every folder


@pytest.fixture
def fake_dist(tmp_path, monkeypatch):
    """Create fake plugin distributions on sys.path for this test."""
    root = tmp_path / "site"
    monkeypatch.syspath_prepend(str(root))
    created: list[str] = []

    def create(dist: str, module: str, source: str, entry_name: str | None = None) -> Path:
        make_fake_dist(root, dist, module, source, entry_name)
        created.append(module)
        return root

    yield create
    for module in created:
        sys.modules.pop(module, None)


@pytest.fixture
def host_factory():
    """Load plugins afresh with a given environment (no process-wide cache)."""

    def load(**env: str) -> PluginHost:
        base = {k: v for k, v in os.environ.items() if not k.startswith("NECTARGAN_")}
        return PluginHost({**base, **env}).load_entry_points()

    return load


@pytest.fixture(autouse=True)
def _fresh_plugins():
    reset_plugins()
    yield
    reset_plugins()


@pytest.fixture
def cli():
    return run_cli
