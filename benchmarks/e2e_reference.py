"""Run the reference's ``train.py`` with a time stamp on every line it prints (used by :mod:`e2e`).

Usage::

    python benchmarks/e2e_reference.py REFERENCE_CHECKOUT [train.py options ...]

The reference prints "End of epoch N / M  Time Taken: X sec" in whole seconds; the benchmark needs
exact epoch boundaries, so ``builtins.print`` is wrapped to prefix each printed line with
``@@<time.time()> `` (host clock, the same one the benchmark and our metrics.jsonl use). Nothing
else in the reference changes: ``train.py`` runs through ``runpy`` as ``__main__`` with
``sys.argv`` set and the checkout as the working directory and first entry of ``sys.path``.

Modules the reference imports at the top but never uses with ``--display_id 0 --no_html``
(``wandb`` in util/visualizer.py, ``dominate`` in util/html.py) are given empty stand-ins
only when they are not installed; calling anything of a stand-in raises.
"""

from __future__ import annotations

import builtins
import importlib.util
import os
import runpy
import sys
import tempfile
import time
import types
from pathlib import Path

PREFIX = "@@"


def _stub(name: str) -> types.ModuleType:
    """A module whose every attribute is a callable that fails when called (imported, never used)."""
    module = types.ModuleType(name)
    module.__path__ = []  # a package, so that ``from dominate.tags import ...`` finds ``dominate.tags``

    def missing(attr: str) -> object:
        if attr.startswith("__"):
            raise AttributeError(attr)

        def unavailable(*_a: object, **_k: object) -> None:
            raise RuntimeError(f"{name}.{attr}: {name} is not installed (a stand-in from benchmarks/e2e_reference.py)")
        return unavailable

    module.__getattr__ = missing  # type: ignore[attr-defined]
    return module


def install_stand_ins() -> list[str]:
    stood_in = []
    for name, subs in (("wandb", ()), ("dominate", ("tags", "util"))):
        if importlib.util.find_spec(name) is None:
            sys.modules[name] = _stub(name)
            for sub in subs:
                sys.modules[f"{name}.{sub}"] = _stub(f"{name}.{sub}")
            stood_in.append(name)
    return stood_in


def timestamp_prints() -> None:
    """Prefix every line printed to stdout with ``@@<time>`` (lines of one call share its time)."""
    original = builtins.print

    def print_stamped(*args: object, sep: str | None = " ", end: str | None = "\n", file: object = None,
                      flush: bool = False) -> None:
        if file not in (None, sys.stdout):
            original(*args, sep=sep, end=end, file=file, flush=flush)
            return
        now = time.time()
        text = (" " if sep is None else sep).join(str(a) for a in args)
        stamped = "\n".join(f"{PREFIX}{now:.6f} {line}" for line in text.split("\n"))
        original(stamped, end="\n" if end is None else end, flush=True)

    builtins.print = print_stamped


def main() -> None:
    checkout = Path(sys.argv[1]).resolve()
    stood_in = install_stand_ins()
    if stood_in:
        sys.stderr.write(f"e2e_reference: stand-ins for {', '.join(stood_in)} (not installed)\n")
    os.environ.setdefault("MPLCONFIGDIR", tempfile.mkdtemp(prefix="e2e-mpl-"))
    timestamp_prints()
    os.chdir(checkout)
    sys.path.insert(0, str(checkout))
    sys.argv = [str(checkout / "train.py"), *sys.argv[2:]]
    runpy.run_path(str(checkout / "train.py"), run_name="__main__")


if __name__ == "__main__":
    main()
