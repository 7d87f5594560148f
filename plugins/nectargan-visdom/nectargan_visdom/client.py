"""visdom's Python client, made safe to call from a background thread that must never hang.

The stock client posts without a timeout (a stalled server would block the
sender forever), prints tracebacks on connection errors unless asked to raise,
and reports HTTP errors as if they were window ids. This subclass overrides
``_handle_post``, the hook visdom provides for changing transport, to add a
timeout and to raise :class:`ServerRejected` on any non-200 answer.
"""

from __future__ import annotations

import logging
import re
from typing import Any

import requests

from ._vendor import visdom as vendored_visdom
from ._vendor.visdom import Visdom

# The client logs warnings meant for interactive use ("Without the incoming
# socket ..."); a NullHandler keeps them off stderr unless the application
# configured logging itself.
logging.getLogger(vendored_visdom.__name__).addHandler(logging.NullHandler())


class ServerRejected(Exception):
    """The server answered, but refused the request (it is reachable; the data was wrong)."""


class Client(Visdom):
    """A connection to one visdom env. Construction contacts the server (raising ConnectionError if it cannot)."""

    env: str  # set by Visdom.__init__

    def __init__(self, server: str, port: int, env: str, timeout: float) -> None:
        self._http = requests.Session()
        self._http.trust_env = False  # a proxy from the environment must not capture a local server
        self._timeout = timeout
        super().__init__(server=server, port=port, env=env, raise_exceptions=True, use_incoming_socket=False)

    def _handle_post(self, url: str, data: Any = None) -> str:
        response = self._http.post(url, data=data or {}, timeout=self._timeout)
        if response.status_code != 200:
            raise ServerRejected(f"HTTP {response.status_code} from {url}: {response.text[:200].strip()}")
        return response.text

    def has_window(self, win: str) -> bool:
        """Whether the server still holds ``win``; False after a restart that lost the env."""
        return self._send({"win": win, "eid": self.env}, endpoint="win_exists", quiet=True) == "true"

    def disconnect(self) -> None:
        """Drop pooled connections (``Visdom.close`` closes a window on the server instead)."""
        self._http.close()


def describe_failure(exc: BaseException) -> str:
    """A short reason for a failed request; visdom's own message ("Error connecting ...") says nothing."""
    cause = exc.__context__ if isinstance(exc, ConnectionError) and exc.__context__ else exc
    if isinstance(cause, requests.Timeout):
        return "no answer in time"
    errno = re.search(r"\[Errno -?\d+\] ([^'\")]+)", str(cause))
    if errno:
        return errno.group(1).strip().lower()
    text = str(cause) or type(cause).__name__
    return text if len(text) <= 120 else text[:117] + "..."
