"""Real HTTP servers on 127.0.0.1 for the download tests: a static folder, and a server that drips bytes."""

from __future__ import annotations

import contextlib
import functools
import http.server
import threading
import time
from pathlib import Path
from typing import Iterator


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - the base class's signature
        pass


class DripHandler(http.server.BaseHTTPRequestHandler):
    """Sends one byte every ``interval`` seconds: of the body (``/body``) or already of the headers (``/headers``).

    Neither ever lets a socket read time out, which is what a deadline must handle.
    """

    interval = 2.0
    length = 1000

    def do_GET(self) -> None:  # noqa: N802 - the base class's naming
        try:
            if self.path.startswith("/headers"):
                for byte in b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n":
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                    time.sleep(self.interval)
                return
            self.send_response(200)
            self.send_header("Content-Length", str(self.length))
            self.end_headers()
            for _ in range(self.length):
                self.wfile.write(b"x")
                self.wfile.flush()
                time.sleep(self.interval)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def log_message(self, format, *args):  # noqa: A002
        pass


class RedirectHandler(http.server.BaseHTTPRequestHandler):
    """Answers every request with a redirect: to itself (``/loop``), or to ``file:///etc/passwd`` (``/file``)."""

    def do_GET(self) -> None:  # noqa: N802 - the base class's naming
        self.send_response(302)
        self.send_header("Location", "file:///etc/passwd" if self.path.startswith("/file") else self.path)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format, *args):  # noqa: A002
        pass


@contextlib.contextmanager
def serve(handler: type, **attributes: object) -> Iterator[str]:
    """Serve ``handler`` (with ``attributes`` set on a subclass) on a free loopback port; yield its base URL."""
    cls = type("Configured", (handler,), dict(attributes)) if attributes else handler
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), cls)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@contextlib.contextmanager
def serve_folder(folder: Path) -> Iterator[str]:
    """Serve the files of ``folder``; yield its base URL."""
    with serve(functools.partial(QuietHandler, directory=str(folder))) as url:  # type: ignore[arg-type]
        yield url


class CutShortHandler(http.server.BaseHTTPRequestHandler):
    """Sends the first ``keep`` bytes of ``body`` with no Content-Length and closes: a download cut short that
    the client cannot tell from a whole one by the HTTP exchange alone."""

    body = b""
    keep = 0

    def do_GET(self) -> None:  # noqa: N802 - the base class's naming
        self.send_response(200)
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(self.body[:self.keep])
        self.wfile.flush()
        self.close_connection = True

    def log_message(self, format, *args):  # noqa: A002
        pass
