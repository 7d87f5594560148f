"""Killing a command with SIGKILL at a chosen point, or at a random moment, and a tiny trained pix2pix run.

A random moment mostly lands in start-up or in the middle of a long write; the
windows that matter (between two renames of a commit) are microseconds wide.
So :func:`kill_at_call` also runs the command under a driver that SIGKILLs the
process just before the k-th call of a chosen function (optionally counting
only calls made inside another one): every point of a commit is reached, not
hoped for.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional, Sequence

import pytest

from fault_locations import run_nectargan
from support import cli_runner

DRIVER = r'''
import functools, importlib, os, signal, sys

def resolve(path):
    module, _, attr = path.partition(":")
    owner = importlib.import_module(module)
    *parents, name = attr.split(".")
    for parent in parents:
        owner = getattr(owner, parent)
    return owner, name

state = {"calls": 0, "depth": 0}
at = int(os.environ["KILL_AT"])
inside = [p for p in os.environ.get("KILL_INSIDE", "").split(",") if p]

def counting(func):
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        if not inside or state["depth"]:
            state["calls"] += 1
            if state["calls"] == at:
                os.kill(os.getpid(), signal.SIGKILL)
        return func(*args, **kwargs)
    return wrapper

def scope(func):
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        state["depth"] += 1
        try:
            return func(*args, **kwargs)
        finally:
            state["depth"] -= 1
    return wrapper

for path in os.environ["KILL_TARGET"].split(","):
    owner, name = resolve(path)
    setattr(owner, name, counting(getattr(owner, name)))
for path in inside:
    owner, name = resolve(path)
    setattr(owner, name, scope(getattr(owner, name)))

from nectargan_core.cli.main import main
sys.argv = ["nectargan", *sys.argv[1:]]
main()
'''


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("NECTARGAN_", "KILL_"))}


def kill_at_call(args: Sequence[object], target: str, at: int, inside: str = "", *, cwd: Optional[Path] = None,
                 timeout: float = 180) -> bool:
    """Run ``nectargan ARGS``, SIGKILLed just before the ``at``-th call of ``target`` (``module:attr``, comma
    separated; counted only inside ``inside`` when given). Returns whether it was killed (else it finished)."""
    env = {**_env(), "KILL_TARGET": target, "KILL_AT": str(at), "KILL_INSIDE": inside}
    done = subprocess.run([sys.executable, "-c", DRIVER, *map(str, args)], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=timeout)
    if done.returncode not in (0, -signal.SIGKILL):
        raise AssertionError(f"the command failed instead of being killed: {done.stderr}")
    return done.returncode == -signal.SIGKILL


def kill_after(args: Sequence[object], delay: float, *, cwd: Optional[Path] = None, timeout: float = 180) -> bool:
    """Run ``nectargan ARGS`` and SIGKILL it after ``delay`` seconds; returns whether it was killed."""
    exe = Path(sys.executable).with_name("nectargan")
    process = subprocess.Popen([str(exe), *map(str, args)], env=_env(), cwd=cwd, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
    try:
        process.wait(timeout=delay)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=timeout)
        return True
    if process.returncode != 0:
        raise AssertionError(f"the command failed before the kill: {process.stderr.read()}")
    return False


def timed(args: Sequence[object], *, cwd: Optional[Path] = None) -> float:
    """Run ``nectargan ARGS`` to completion (it must succeed); return how long it took."""
    started = time.monotonic()
    result = run_nectargan(*args, cwd=cwd)
    assert result.returncode == 0, result.stderr
    return time.monotonic() - started


#: A UNet of depth 4 (inputs: multiples of 16) and a narrow PatchGAN: a checkpoint of about 1 MB.
TINY = ("models.generator.name=unet", "models.generator.depth=4", "models.generator.ngf=8",
        "models.discriminator.ndf=8")
_RUNS: dict[str, Path] = {}


def tiny_pix2pix_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A pix2pix run of one epoch on 8 synthetic 32x32 pairs (checkpoints at steps 4 and 8), made once per session.

    Trained in this process (no interpreter start-up); the commands under test run in subprocesses.
    """
    if "run" not in _RUNS:
        from nectargan_core import Run
        from nectargan_translate.data_cli import data_group

        root = tmp_path_factory.mktemp("tiny_pix2pix")
        made = cli_runner().invoke(data_group, ["synth", str(root / "data"), "--count", "12", "--size", "32",
                                               "--val", "0.17", "--test", "0.17"])
        assert made.exit_code == 0, made.output
        settings = [f"data.root={root / 'data'}", "data.load_size=32", "data.crop_size=32", "data.num_workers=0",
                    "loop.epochs=1", "run.device=cpu", f"run.output_dir={root / 'runs'}", "visualizers=[]",
                    "examples.every_epochs=null", "checkpoint.every_steps=4", *TINY]
        run = Run.create({"trainer": "pix2pix"}, overrides=settings)
        run.fit()
        _RUNS["run"] = run.dir
    return _RUNS["run"]
