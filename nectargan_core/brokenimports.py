"""Saying in one line which installed package broke an import, and what to install.

A declared range allows combinations that break inside a dependency
(tensorboard 2.16 or matplotlib 3.6 under numpy 2), and an environment
installed with ``--no-deps`` may lack torch itself. Neither is a bug of the
plugin that imported them, and "reinstall the plugin" would not help: the
message names the package whose import failed.
"""

from __future__ import annotations

import sys
from types import TracebackType

#: Import names whose distribution is called something else.
DISTRIBUTIONS = {"PIL": "pillow", "yaml": "pyyaml", "websocket": "websocket-client",
                 "importlib_metadata": "importlib-metadata"}


def failed_package(exc: BaseException, own: tuple[str, ...] = ()) -> str | None:
    """The top-level package that is missing (ModuleNotFoundError) or in whose code ``exc`` was raised:
    the outermost frame outside NectarGAN, ``own`` and the standard library; None when there is none."""
    skipped = ("nectargan_", "nectargan", "click", "importlib", "builtins", *own)
    if isinstance(exc, ModuleNotFoundError) and exc.name:
        top = exc.name.split(".")[0]
        return None if top.startswith(skipped) else top
    frame: TracebackType | None = exc.__traceback__
    while frame is not None:
        top = str(frame.tb_frame.f_globals.get("__name__", "")).split(".")[0]
        if top and not top.startswith(skipped) and top not in sys.stdlib_module_names:
            return top
        frame = frame.tb_next
    return None


def install_hint(package: str) -> str:
    if package in ("torch", "torchvision"):
        return ("pip install torch torchvision, or the build for your machine (README: 'Your own torch'; "
                "CPU only: --index-url https://download.pytorch.org/whl/cpu)")
    return f"pip install {DISTRIBUTIONS.get(package, package)}"


def describe(exc: ImportError) -> str | None:
    """One line for an import that failed in a dependency, or None when NectarGAN's own code is at fault."""
    package = failed_package(exc)
    if package is None:
        return None
    if isinstance(exc, ModuleNotFoundError):
        return f"{package} is not installed ({exc}); install it: {install_hint(package)}"
    reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return (f"importing {package} failed: {reason}; install a {package} that works with the other installed "
            "packages (pip check says which conflict)")
