"""Headless Chromium, driven over the DevTools protocol, that can reach 127.0.0.1 and nothing else.

Every other address goes to a proxy that is not there (Chromium never proxies
loopback addresses), so a page that still needs a CDN fails here as it would
offline. The protocol runs over the WebSocket client visdom itself depends on.
"""

from __future__ import annotations

import base64
import itertools
import json
import subprocess
import time
from pathlib import Path
from typing import Any, Callable, Optional

import websocket

from pages import chromium  # one lookup of the browser for every page test
from visdom_helpers import free_port, wait_until

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-extensions", "--disable-default-apps", "--hide-scrollbars", "--mute-audio"]


class Page:
    """One tab: navigate, evaluate JavaScript, take screenshots; records every request and its fate."""

    def __init__(self, scratch: Path, width: int = 1400, height: int = 1100) -> None:
        scratch.mkdir(parents=True, exist_ok=True)
        self.log = scratch / "chromium.log"
        # Chromium's start sometimes stalls for good (its zygote loses a pipe, and no DevTools port is ever
        # written; seen once in a CI run): a second browser, in a fresh profile, is the cure.
        for attempt in (1, 2):
            profile = scratch / f"chromium-profile-{attempt}"
            with open(self.log, "a") as log:
                self.process = subprocess.Popen(
                    [chromium(), *FLAGS, f"--user-data-dir={profile}", "--remote-debugging-port=0",
                     f"--window-size={width},{height}",
                     f"--proxy-server=http://127.0.0.1:{free_port()}",  # nothing listens there: no way out
                     "about:blank"],
                    stdout=log, stderr=subprocess.STDOUT)
            active = profile / "DevToolsActivePort"
            try:
                wait_until(lambda: active.is_file() and len(active.read_text().split()) == 2 or self._died(), 30,
                           "Chromium's DevTools port")
                break
            except AssertionError:
                self.process.kill()
                self.process.wait(10)
                if attempt == 2:
                    raise
        try:
            port, path = active.read_text().split()
            self._ws = websocket.create_connection(f"ws://127.0.0.1:{port}{path}", timeout=30,
                                                   suppress_origin=True)
            self._ids = itertools.count(1)
            self._session: Optional[str] = None
            self.requests: dict[str, str] = {}  # request id -> URL
            self.statuses: dict[str, int] = {}  # URL -> HTTP status
            self.failed: dict[str, str] = {}  # URL -> network error
            self.errors: list[str] = []  # uncaught exceptions and console errors
            target = self.send("Target.createTarget", url="about:blank")["targetId"]
            self._session = self.send("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
            for domain in ("Page", "Network", "Runtime"):
                self.send(f"{domain}.enable")
            self.send("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1,
                      mobile=False)
        except BaseException:
            self.close()
            raise

    def _died(self) -> bool:
        if self.process.poll() is not None:
            raise AssertionError(f"Chromium exited with {self.process.returncode}:\n{self.log.read_text()[-2000:]}")
        return False

    # -- protocol ------------------------------------------------------------------------------
    def send(self, method: str, **params: Any) -> dict[str, Any]:
        message_id = next(self._ids)
        message: dict[str, Any] = {"id": message_id, "method": method, "params": params}
        if self._session is not None and not method.startswith("Target."):
            message["sessionId"] = self._session
        self._ws.send(json.dumps(message))
        while True:
            reply = json.loads(self._ws.recv())
            if reply.get("id") == message_id:
                if "error" in reply:
                    raise AssertionError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self._event(reply)

    def _event(self, event: dict[str, Any]) -> None:
        method, params = event.get("method"), event.get("params", {})
        if method == "Network.requestWillBeSent":
            self.requests[params["requestId"]] = params["request"]["url"]
        elif method == "Network.responseReceived":
            self.statuses[params["response"]["url"]] = params["response"]["status"]
        elif method == "Network.loadingFailed":
            url = self.requests.get(params["requestId"], params["requestId"])
            self.failed[url] = params.get("blockedReason") or params["errorText"]
        elif method == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            self.errors.append(details.get("exception", {}).get("description") or details.get("text", ""))
        elif method == "Runtime.consoleAPICalled" and params.get("type") == "error":
            self.errors.append(" ".join(str(a.get("value", a.get("description", ""))) for a in params["args"]))

    # -- what tests use --------------------------------------------------------------------------
    def block(self, *url_patterns: str) -> None:
        """Make requests for these URLs (``*`` wildcards) fail, as if the files were absent."""
        self.send("Network.setBlockedURLs", urls=list(url_patterns))

    def open(self, url: str) -> None:
        self.send("Page.navigate", url=url)

    def evaluate(self, expression: str) -> Any:
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise AssertionError(f"{expression[:80]}...: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, accept: Callable[[Any], bool], timeout: float) -> Any:
        """Evaluate ``expression`` until ``accept`` likes its value; the last value is returned either way."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.evaluate(expression)
            if accept(value) or time.monotonic() > deadline:
                return value
            time.sleep(0.2)

    def screenshot(self, path: Path) -> Path:
        data = self.send("Page.captureScreenshot", format="png", captureBeyondViewport=True)["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        ws = getattr(self, "_ws", None)
        if ws is not None:
            ws.close()
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
