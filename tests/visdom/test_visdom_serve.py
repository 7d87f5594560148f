"""``nectargan visdom serve``: starts with no internet, binds the loopback address by default."""

from __future__ import annotations

import socket
import urllib.request

import pytest

from nectargan_visdom.server import missing_assets
from support import run_cli
from visdom_helpers import wait_until


def outbound_address() -> str | None:
    """This machine's address on its default route (no packet is sent), or None without one."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            sock.connect(("10.255.255.255", 1))
        except OSError:
            return None
        address = sock.getsockname()[0]
    return None if address.startswith("127.") else address


def test_serve_starts_offline_on_loopback(visdom_server):
    # The port accepts connections from listen() on; the line is printed just after: wait for it.
    line = f"visdom: serving http://127.0.0.1:{visdom_server.port}"
    log = wait_until(lambda: (text := visdom_server.log_text()) and line in text and text, 30, f"'{line}' in the log")
    # The page's browser assets ship with the package: none missing, so no warning about them.
    assert missing_assets() == []
    assert "browser assets" not in log
    # The page renders (tornado >= 6.6 answers it with 403 unless the serve command's fix is in place).
    with urllib.request.urlopen(f"http://127.0.0.1:{visdom_server.port}/", timeout=10) as page:
        assert page.status == 200 and b"<html>" in page.read()
    other = outbound_address()
    if other is None:
        pytest.skip("no non-loopback address to check the binding against")
    with pytest.raises(OSError):
        socket.create_connection((other, visdom_server.port), timeout=2).close()


def test_serve_reports_a_port_in_use():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        result = run_cli("visdom", "serve", "--port", str(port))
    assert result.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port}" in result.stderr


def test_the_server_never_restarts_itself(tmp_path):
    """visdom enables tornado's debug mode; its autoreload would restart the server when a source file changes."""
    from nectargan_visdom.server import build_app

    app = build_app(port=0, env_path=str(tmp_path / "envs"))
    assert app.settings["autoreload"] is False
    assert app.settings["static_handler_class"].get_version(app.settings, "../user/style.css") is None
