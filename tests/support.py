"""Test helpers shared by every test folder: the CLI runner, background runs and their processes, throw-away
plugin distributions, and the reference recipes the preset tests compare with.

A plain module (not conftest.py), so test folders can have their own conftest.py
without shadowing these helpers.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest


ROOT = Path(__file__).resolve().parents[1]


def cli_runner():
    """click's test runner as click 8.2 and later make it on every click release the core supports: ``stderr``
    apart, ``output`` both streams. click 8.1 mixes the streams unless told not to, and then ``output`` is
    stdout alone."""
    import inspect

    from click.testing import CliRunner

    if "mix_stderr" not in inspect.signature(CliRunner).parameters:
        return CliRunner()

    class BothStreams:
        def __init__(self, result):
            self._result = result

        def __getattr__(self, name):
            return getattr(self._result, name)

        @property
        def output(self):
            return self._result.stdout + self._result.stderr

    class Runner(CliRunner):
        def invoke(self, *args, **kwargs):
            return BothStreams(super().invoke(*args, **kwargs))

    return Runner(mix_stderr=False)


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


def installed_package(root: Path, package: str, init_source: str, version: str = "99.0") -> Path:
    """A package ``package`` 'installed' in ``root`` (its ``__init__.py`` and a ``*.dist-info`` whose RECORD
    lists it): with ``root`` first on PYTHONPATH, it stands for the installed copy (a broken one, as
    ``init_source`` makes it), not for a stray folder that hides the installed one."""
    (root / package).mkdir(parents=True, exist_ok=True)
    (root / package / "__init__.py").write_text(init_source)
    info = root / f"{package}-{version}.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {package}\nVersion: {version}\n")
    (info / "RECORD").write_text(f"{package}/__init__.py,,\n{info.name}/METADATA,,\n{info.name}/RECORD,,\n")
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



def start_cli(*args: str, cwd: Path, until: Path, wait_s: float = 120,
              env: dict[str, str] | None = None) -> subprocess.Popen:
    """``nectargan ARGS`` in the background, as :func:`run_cli` runs it; returns once ``until`` holds a checkpoint.

    ``until`` is the run's ``checkpoints`` folder; the test fails with the run's stderr when the run ends, or
    ``wait_s`` pass, before a periodic checkpoint (``epoch*-step*.pt``) is complete there.
    """
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("NECTARGAN_")}, **(env or {})}
    exe = Path(sys.executable).with_name("nectargan")
    launcher = subprocess.Popen([str(exe), *args], cwd=cwd, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + wait_s
    while not list(until.glob("epoch*-step*.pt.json")):
        if launcher.poll() is not None or time.monotonic() > deadline:
            launcher.kill()
            pytest.fail(f"no checkpoint was written: {launcher.communicate()[1]}")
        time.sleep(0.1)
    return launcher


def rank_pids(launcher: int) -> dict[int, int]:
    """The worker processes of a ``--nproc`` launcher: rank -> pid (from /proc)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            environ = (entry / "environ").read_bytes().split(b"\0")
        except (OSError, IndexError, ValueError):
            continue
        if parent == launcher:
            for item in environ:
                if item.startswith(b"RANK="):
                    found[int(item[5:])] = int(entry.name)
    return found


def state(pid: int) -> str:
    """``/proc``'s state letter of ``pid`` (``T``: stopped), or ``gone``."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


def alive(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie (from /proc)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False

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


# -- the reference recipes (the pix2pix-reference and cyclegan-reference preset tests) ---------------------------
def reference_recipe_common(train: dict, test: dict) -> dict[str, object]:
    """The config values (dotted keys) of the reference options that ``--model pix2pix`` and ``cycle_gan`` share.

    ``train`` and ``test`` are the reference's ``train.py`` and ``test.py``
    options; one option at a time, what each means here.
    """
    assert train["preprocess"] == "resize_and_crop" and train["lr_policy"] == "linear" and train["netD"] == "basic"
    assert test["load_size"] == test["crop_size"] == train["crop_size"]  # test: a plain resize, nothing cropped
    return {
        "loop.epochs": train["n_epochs"] + train["n_epochs_decay"],
        "optim.lr_schedule.name": "pix2pix_linear",
        "optim.lr_schedule.n_epochs": train["n_epochs"],
        "optim.lr_schedule.n_epochs_decay": train["n_epochs_decay"],
        "optim.lr_schedule.epoch_count": train["epoch_count"],
        "optim.lr_schedule_d": None,
        "optim.lr_g": train["lr"], "optim.lr_d": train["lr"],
        "optim.beta1": train["beta1"], "optim.beta2": 0.999, "optim.weight_decay": 0.0,
        "optim.implementation": "default",  # torch.optim.Adam(params, lr, betas): torch picks the kernel
        "optim.gradient_accumulation": 1, "optim.grad_clip": None,
        "precision.amp": "off", "precision.channels_last": False, "precision.compile": "off",
        "data.direction": train["direction"],
        "data.in_channels": train["input_nc"], "data.out_channels": train["output_nc"],
        "data.load_size": train["load_size"], "data.crop_size": train["crop_size"],
        "data.interpolation": "bicubic", "data.resize_rounding": "uint8",  # PIL on 8-bit images
        "data.augment": [] if train["no_flip"] else [{"name": "hflip", "p": 0.5}],
        "data.batch_size": train["batch_size"], "data.shuffle": not train["serial_batches"],
        "data.drop_last": False,
        "data.test.preprocess": "resize", "data.test.batch_size": test["batch_size"],
        "data.test.max_images": test["num_test"],
        "data.val.preprocess": "resize", "data.val.batch_size": test["batch_size"],
        "test.mode": "eval" if test["eval"] else "train",
        "validation.eval_mode": test["eval"],
        "loop.val_every_epochs": None,  # the reference never validates
        "checkpoint.every_epochs": train["save_epoch_freq"],
    }


def flat(data: dict, prefix: str = "") -> dict[str, object]:
    """Every key of a nested config mapping as a dotted path (a mapping's own path included)."""
    out: dict[str, object] = {}
    for key, value in data.items():
        path = f"{prefix}{key}"
        out[path] = value
        if isinstance(value, dict) and value:
            out.update(flat(value, f"{path}."))
    return out


def assert_preset_is_recipe(registry, preset: str, expected: dict[str, object]) -> None:
    """Preset ``preset`` resolves to every value of ``expected`` (dotted keys), and changes no default it lacks."""
    from nectargan_core.config import load_config
    from nectargan_core.presets import preset_data

    data = preset_data(registry, preset)
    resolved = flat(load_config(data, (), registry).to_dict())
    differences = {key: (resolved.get(key, "<absent>"), value) for key, value in expected.items()
                   if resolved.get(key, "<absent>") != value}
    assert not differences
    # and nothing else: every value the preset changes from the defaults is one of the recipe's
    defaults = flat(load_config({"trainer": data["trainer"]}, (), registry).to_dict())
    # (``provenance`` records which distribution provides each part: metadata, not a training value)
    changed = {key for key, value in resolved.items()
               if defaults.get(key) != value and not isinstance(value, dict) and key != "provenance"}
    assert changed <= set(expected), sorted(changed - set(expected))
