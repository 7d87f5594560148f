"""Test helpers shared by every test folder: the CLI runner and throw-away plugin distributions.

A plain module (not conftest.py), so test folders can have their own conftest.py
without shadowing these helpers.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]


def make_fake_dist(root: Path, dist: str, module: str, source: str, entry_name: str | None = None,
                   version: str = "0.1") -> Path:
    """A plugin 'installed' as a module plus a ``*.dist-info`` folder in ``root``.

    Putting ``root`` on sys.path (or PYTHONPATH) makes importlib.metadata find
    its ``nectargan`` entry point, exactly as for a pip-installed distribution.
    """
    root.mkdir(parents=True, exist_ok=True)
    (root / f"{module}.py").write_text(textwrap.dedent(source))
    info = root / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    (info / "entry_points.txt").write_text(f"[nectargan]\n{entry_name or module} = {module}\n")
    return root


def run_cli(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None,
            timeout: float = 120) -> subprocess.CompletedProcess:
    """Run the installed ``nectargan`` console script in a real subprocess."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("NECTARGAN_")}
    full_env.update(env or {})
    exe = Path(sys.executable).with_name("nectargan")
    command = [str(exe)] if exe.exists() else [sys.executable, "-m", "nectargan_core"]
    return subprocess.run(command + list(args), cwd=cwd, env=full_env, capture_output=True,
                          text=True, timeout=timeout)


KILLER = """
import os
import signal

from nectargan_core import hookimpl


class Killer:
    '''SIGKILLs its own process right after training step KILL_STEP (when that variable is set).'''

    def __init__(self):
        self.step = int(os.environ.get("KILL_STEP", "0"))

    @hookimpl
    def on_train_batch_end(self, trainer):
        if trainer.global_step == self.step:
            os.kill(os.getpid(), signal.SIGKILL)


@hookimpl
def register_callbacks(register):
    register("sigkill", "sigkill_plugin:Killer", description="SIGKILLs the run after step KILL_STEP")
"""


def make_killer_dist(root: Path) -> Path:
    """A plugin with the callback ``sigkill``, which kills the run after step ``$KILL_STEP``."""
    return make_fake_dist(root, "nectargan-sigkill", "sigkill_plugin", KILLER, "sigkill")


def killed_then_resumed(run_dir: Path, train_args: list[str], kill_step: int, *, env: dict[str, str],
                        cwd: Path | None = None) -> tuple[subprocess.CompletedProcess, subprocess.CompletedProcess]:
    """``nectargan train ARGS`` SIGKILLed after ``kill_step`` (its config enables ``sigkill``), then resumed.

    ``env`` must put :func:`make_killer_dist`'s folder on PYTHONPATH. Returns both processes.
    """
    killed = run_cli("train", *train_args, env={**env, "KILL_STEP": str(kill_step)}, cwd=cwd)
    assert killed.returncode == -9, f"not killed (exit {killed.returncode}): {killed.stderr[-2000:]}"
    resumed = run_cli("train", "--resume", str(run_dir), env=env, cwd=cwd)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    return killed, resumed


def same(a, b) -> bool:
    """Tensors equal to the bit, through nested dicts, lists and tuples (state dicts, optimizer states)."""
    import torch

    if isinstance(a, torch.Tensor):
        return torch.equal(a, b)
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(map(same, a, b))
    return a == b


def finite(state) -> bool:
    """Every floating-point tensor in a nested state is finite (no NaN or inf reached the weights)."""
    import torch

    if isinstance(state, torch.Tensor):
        return not state.is_floating_point() or bool(torch.isfinite(state).all())
    if isinstance(state, dict):
        return all(map(finite, state.values()))
    if isinstance(state, (list, tuple)):
        return all(map(finite, state))
    return True
