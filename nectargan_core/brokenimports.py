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
    """The top-level package that is missing (ModuleNotFoundError), or whose module was being imported when
    ``exc`` was raised: the innermost module body (``<module>`` frame) outside NectarGAN, ``own`` and the
    standard library. matplotlib built for numpy 1 fails in its own module body, called from torchmetrics,
    called from a hook that pluggy calls: the one to blame is matplotlib. None when no such frame exists."""
    skipped = ("nectargan", "importlib", "builtins", *own)
    if isinstance(exc, ModuleNotFoundError) and exc.name:
        top = exc.name.split(".")[0]
        return None if top.startswith(skipped) else top
    named = (getattr(exc, "name", None) or "").split(".")[0]  # "cannot import name 'nn' from 'torch' (...)"
    if named and not named.startswith(skipped) and named not in sys.stdlib_module_names and shadowed(named):
        return named
    culprit = None
    frame: TracebackType | None = exc.__traceback__
    while frame is not None:
        top = str(frame.tb_frame.f_globals.get("__name__", "")).split(".")[0]
        if frame.tb_frame.f_code.co_name == "<module>" and top and not top.startswith(skipped) \
                and top not in sys.stdlib_module_names:
            culprit = top
        frame = frame.tb_next
    return culprit


def shadowed(package: str) -> str | None:
    """The file Python imported as ``package`` when it is not the installed distribution's (a ``torch.py`` or a
    ``torch/`` folder in the current folder or on PYTHONPATH hides the installed torch), else None."""
    from importlib.metadata import PackageNotFoundError, distribution
    from importlib.util import find_spec
    from pathlib import Path

    module = sys.modules.get(package)
    where = getattr(module, "__file__", None)
    if module is None:  # its import failed (and was undone): what Python would import
        try:
            spec = find_spec(package)
        except (ImportError, ValueError):
            return None
        where = spec.origin if spec is not None else None
    if not where:
        return None

    try:
        installed = distribution(DISTRIBUTIONS.get(package, package))
    except PackageNotFoundError:
        return None  # not installed at all: "not installed" says what to do
    own = {str(Path(str(installed.locate_file(f))).resolve()) for f in (installed.files or ())
           if str(f).endswith(".py") and str(f).split("/")[0] == package}
    return None if not own or str(Path(where).resolve()) in own else where


#: The packages whose installed copy a stray file of the same name most often hides.
HIDEABLE = ("torch", "torchvision", "numpy", "PIL", "yaml")


def any_shadowed() -> str | None:
    """The first of :data:`HIDEABLE` that a stray file hides, for errors that name no package (an
    AttributeError from a ``torch/nn/`` that has no ``Module``)."""
    return next((package for package in HIDEABLE if shadowed(package)), None)


def shadow_line(package: str, exc: BaseException) -> str | None:
    """One line for an import that failed because another file hides the installed ``package``, or None."""
    where = shadowed(package)
    if where is None:
        return None
    reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return (f"{package} is installed, but Python imported {where} instead ({reason}): a file or folder named "
            f"{package} in the current folder or on PYTHONPATH hides it; rename it or take it off PYTHONPATH")


def install_hint(package: str) -> str:
    if package in ("torch", "torchvision"):
        return ("pip install torch torchvision, or the build for your machine (README: 'Your own torch'; "
                "CPU only: --index-url https://download.pytorch.org/whl/cpu)")
    return f"pip install {DISTRIBUTIONS.get(package, package)}"


def describe(exc: ImportError) -> str | None:
    """One line for an import that failed in a dependency, or None when NectarGAN's own code is at fault."""
    package = failed_package(exc) or any_shadowed()
    if package is None:
        return None
    hidden = shadow_line(package, exc)
    if hidden is not None:
        return hidden
    if isinstance(exc, ModuleNotFoundError):
        return f"{package} is not installed ({exc}); install it: {install_hint(package)}"
    reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return (f"importing {package} failed: {reason}; install a version of {package} that works with the installed "
            f"packages (usually a newer one: pip install -U {DISTRIBUTIONS.get(package, package)})")


def describe_mismatch(exc: BaseException) -> str | None:
    """One line for a torchvision built for another torch (it registers operators that torch does not have:
    "operator torchvision::nms does not exist"), or None for any other error."""
    text = str(exc)
    if not (isinstance(exc, RuntimeError) and "torchvision::" in text and "does not exist" in text):
        return None
    from importlib.metadata import PackageNotFoundError, version

    try:
        installed = f"torchvision {version('torchvision')} does not fit torch {version('torch')}"
    except PackageNotFoundError:
        installed = "torchvision does not fit the installed torch"
    return (f"{installed} ({text.strip().splitlines()[0]}); install the torchvision built for this torch, from the "
            "same index or channel as torch")
