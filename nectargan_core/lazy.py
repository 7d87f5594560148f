"""Load heavy objects on first use: ``"module:attribute"`` references and packages' public names.

Plugins register heavy objects (torch modules, trainers) by reference, and
each distribution's package exports torch-backed names without importing
them, so that loading plugins, listing them and printing help never imports
torch.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import sys
from pathlib import Path
from typing import Any, Callable


def resolve(ref: Any) -> Any:
    """Return ``ref`` itself, or the object a ``"pkg.module:attr.sub"`` string names."""
    if not isinstance(ref, str):
        return ref
    module_name, sep, attr_path = ref.partition(":")
    if not sep or not module_name or not attr_path:
        raise ValueError(f"reference {ref!r} is not of the form 'package.module:attribute'")
    obj: Any = importlib.import_module(module_name)
    for part in attr_path.split("."):
        obj = getattr(obj, part)
    return obj


def _type_checking_imports(package: str, init_file: str) -> dict[str, tuple[str, str]]:
    """``{public name: (module, attribute)}`` from the ``if TYPE_CHECKING:`` block of a package's ``__init__``."""
    source = None
    get_source = getattr(getattr(importlib.util.find_spec(package), "loader", None), "get_source", None)
    if get_source is not None:  # the loader's copy: also where no file is (a zip import)
        try:
            source = get_source(package)
        except (ImportError, OSError):
            source = None
    if source is None:  # a loader that keeps no sources (pytest's assertion rewriter): the file itself
        source = Path(init_file).read_text(encoding="utf-8")
    tree = ast.parse(source, init_file)
    table: dict[str, tuple[str, str]] = {}
    for node in tree.body:
        if not (isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"):
            continue
        for statement in node.body:
            if not isinstance(statement, ast.ImportFrom):
                raise TypeError(f"{init_file}: the TYPE_CHECKING block may hold only 'from ... import' lines")
            module = importlib.util.resolve_name("." * statement.level + (statement.module or ""), package)
            for alias in statement.names:
                table[alias.asname or alias.name] = (module, alias.name)
    return table


def lazy_exports(package: str, init_file: str, *, moved: dict[str, tuple[str, str]] | None = None,
                 ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module ``__getattr__`` and ``__dir__`` (PEP 562) of a package whose public names load on first access.

    The package lists its public names once, as imports under ``if TYPE_CHECKING:``
    in its ``__init__.py``: type checkers and the API reference read them there,
    and the returned ``__getattr__`` imports a name's module only when the name is
    first used. So ``import nectargan_translate`` stays cheap and torch-free while
    ``from nectargan_translate import PairedDataset`` works::

        if TYPE_CHECKING:
            from .data.paired import PairedDataset

        __getattr__, __dir__ = lazy_exports(__name__, __file__)

    ``moved``: names that left the public API, kept for one release: ``{name:
    ("module:attribute", new home)}``; reading one warns (DeprecationWarning,
    pointing at the caller's line) with the new home, then gives the object.
    """
    table: dict[str, tuple[str, str]] = {}
    moved = dict(moved or {})

    def __getattr__(name: str) -> Any:
        if name in moved:
            import warnings

            reference, instead = moved[name]
            level, frame = 2, sys._getframe(1)  # the caller's line, past a package __getattr__ that wraps this one
            while frame is not None and frame.f_code.co_filename == init_file:
                level, frame = level + 1, frame.f_back
            warnings.warn(f"{package}.{name} is deprecated and goes in the next release: import {instead}",
                          DeprecationWarning, stacklevel=level)
            return resolve(reference)
        if not table:
            table.update(_type_checking_imports(package, init_file))
        if name not in table:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, attr = table[name]
        imported = importlib.import_module(module)
        # `from . import sub` names a submodule, which its package may not hold as an attribute yet
        value = getattr(imported, attr) if module != package or attr in vars(imported) \
            else importlib.import_module(f"{package}.{attr}")
        setattr(sys.modules[package], name, value)  # later accesses skip __getattr__
        return value

    def __dir__() -> list[str]:
        if not table:
            table.update(_type_checking_imports(package, init_file))
        return sorted(set(vars(sys.modules[package])) | set(table))

    return __getattr__, __dir__
