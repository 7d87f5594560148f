"""Fixtures for the visdom tests (the helpers they use live in visdom_helpers.py)."""

from __future__ import annotations

import socket

import pytest

from visdom_helpers import VisdomServer


@pytest.fixture(scope="session")
def visdom_server(tmp_path_factory):
    server = VisdomServer(tmp_path_factory.mktemp("visdom_server")).start()
    yield server
    server.stop()


@pytest.fixture
def own_server(tmp_path):
    """A server for one test, which may stop and restart it."""
    server = VisdomServer(tmp_path / "server")
    yield server
    server.stop()


@pytest.fixture
def blackhole_port():
    """A port that accepts connections and never answers: the slowest possible server."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        yield sock.getsockname()[1]
