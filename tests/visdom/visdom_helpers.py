"""Helpers for the visdom tests: real visdom servers in subprocesses, reading windows back, toy configs."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any, Callable, Optional

SERVER_START_TIMEOUT = 30.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def nectargan_command() -> list[str]:
    exe = Path(sys.executable).with_name("nectargan")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "nectargan_core"]


def wait_until(condition: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


class VisdomServer:
    """``nectargan visdom serve`` on a fixed port; can be stopped and started again on the same port."""

    def __init__(self, root: Path, port: Optional[int] = None) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port()
        self.env_path = root / "envs"
        self.log = root / "server.log"
        self.process: Optional[subprocess.Popen] = None

    def start(self) -> "VisdomServer":
        with open(self.log, "a") as log:  # a file, not a pipe: a full pipe would stall the server
            self.process = subprocess.Popen(
                nectargan_command() + ["visdom", "serve", "--port", str(self.port), "--env-path", str(self.env_path)],
                stdout=log, stderr=subprocess.STDOUT,
            )
        wait_until(self.answers, SERVER_START_TIMEOUT, f"the visdom server on port {self.port}\n{self.log_text()}")
        return self

    def answers(self) -> bool:
        assert self.process is not None
        if self.process.poll() is not None:
            raise AssertionError(f"the visdom server exited with {self.process.returncode}:\n{self.log_text()}")
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
            return True
        except OSError:
            return False

    def stop(self) -> None:
        """End the server (SIGTERM; SIGKILL when a stalled machine keeps it from going within 10 s)."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(30)
        self.process = None

    def log_text(self) -> str:
        return self.log.read_text() if self.log.exists() else ""

    def windows(self, env: str) -> dict[str, Any]:
        """Every window of ``env`` as the server holds it (what visdom's ``get_window_data`` reads)."""
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}/win_data", method="POST",
                                         data=json.dumps({"eid": env, "win": None}).encode())
        direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never a proxy for 127.0.0.1
        with direct.open(request, timeout=10) as answer:
            return json.loads(answer.read())


def series(window: dict[str, Any]) -> dict[str, list[tuple[float, float]]]:
    """A plot window's traces as name -> [(x, y), ...], without visdom's null padding."""
    return {trace["name"]: [(x, y) for x, y in zip(trace["x"], trace["y"], strict=True) if x is not None]
            for trace in window["content"]["data"]}


def toy_config(tmp_path: Path, name: str, visdom: Optional[dict[str, Any]] = None, **toy: Any) -> dict[str, Any]:
    """A short toy run; ``visdom`` options enable the visualizer."""
    return {
        "trainer": "toy",
        "run": {"output_dir": str(tmp_path / "runs"), "name": name, "device": "cpu"},
        "loop": {"epochs": 2, "log_every_steps": 1},
        "toy": {"samples": 8, "batch_size": 4, **toy},
        "checkpoint": {"every_epochs": None, "save_last": False},
        "visualizers": {"visdom": visdom} if visdom is not None else [],
    }
