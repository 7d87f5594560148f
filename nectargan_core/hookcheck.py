"""Checking hook implementations against the hook specs, before anything runs them.

pluggy checks a hook implementation only when an object is registered with a
plugin manager, and a run-hook class (a trainer, visualizer or callback) is
registered only when a run starts, after its run directory exists. This module
finds the same mistakes earlier and says each in one line with the file and
line: a hook name that is not a hook (with a "did you mean"), an argument the
spec does not have, a wrapper that does not yield.

Two ways in, with the same rules and messages:

* :func:`check_reference` reads the source of a part registered as a
  ``"package.module:Class"`` string with :mod:`ast`, following base classes,
  without importing it. ``nectargan plugins list`` and ``plugins install`` use it,
  so listing plugins still imports no torch.
* :func:`check_object` inspects a class, instance or module that is already
  imported. ``nectargan train`` and ``config validate`` use it on the parts a
  config names, so what the static reading cannot follow is still caught
  before a run directory is created.

Both only report what is certain: a decorator they cannot identify as
nectargan's ``hookimpl``, or a base class they cannot find, is left alone.
"""

from __future__ import annotations

import ast
import difflib
import functools
import importlib.util
import inspect
import sys
import types
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

from . import hookspecs
from .errors import PluginError
from .hookproxy import hook_implementations
from .registry import RUN_HOOK_KINDS, Component

if TYPE_CHECKING:  # pragma: no cover
    from .config import CoreConfig
    from .registry import Registry

#: Modules whose ``hookimpl`` is nectargan's marker.
MARKER_MODULES = ("nectargan_core", "nectargan_core.hookspecs")


def _spec_args(spec_class: type) -> dict[str, tuple[str, ...]]:
    specs = {}
    for name, func in vars(spec_class).items():
        if callable(func) and not name.startswith("_"):
            specs[name] = tuple(p for p in inspect.signature(func).parameters if p != "self")
    return specs


RUN_SPECS = _spec_args(hookspecs.RunSpecs)
REGISTRATION_SPECS = _spec_args(hookspecs.RegistrationSpecs)


@dataclass(frozen=True)
class Impl:
    """One hook implementation, as found in source or on a live object."""

    hook: str  # the spec it implements (pluggy's ``specname`` or the function's name)
    function: str  # the function's own name
    args: tuple[str, ...]  # the arguments pluggy passes by name (no self, none with defaults)
    where: str  # file:line
    wrapper: bool = False
    generator: bool = True


def problems_of(impls: Iterable[Impl], label: str, family: str = "run") -> list[str]:
    """One line per mistake in ``impls``; ``family`` is ``run`` (classes) or ``registration`` (modules)."""
    specs, other = (RUN_SPECS, REGISTRATION_SPECS) if family == "run" else (REGISTRATION_SPECS, RUN_SPECS)
    lines = []
    for impl in impls:
        at = f"{label} ({impl.where})" if label and impl.where else (label or impl.where)
        spec = specs.get(impl.hook)
        if spec is None:
            lines.append(f"{at}: {unknown_hook_message(impl.hook, family)}")
            continue
        for arg in impl.args:
            if arg not in spec:
                close = difflib.get_close_matches(arg, spec, n=1)
                hint = f"; did you mean '{close[0]}'?" if close else ""
                lines.append(f"{at}: {impl.function}({', '.join(impl.args)}): argument '{arg}' is not in the "
                             f"spec {impl.hook}({', '.join(spec)}){hint}")
        if impl.wrapper and not impl.generator:
            lines.append(f"{at}: {impl.function} is declared as a wrapper but does not yield")
    return lines


def unknown_hook_message(name: str, family: str = "registration") -> str:
    """Why ``name`` is not a hook of ``family``, with a "did you mean" (one line, no label)."""
    if family == "registration" and name in RUN_SPECS:
        return (f"hook '{name}' is a run hook and cannot be implemented on a plugin module; "
                "put it on a class registered with register_callbacks or register_visualizers")
    if family == "run" and name in REGISTRATION_SPECS:
        return f"hook '{name}' is a registration hook: implement it on the plugin module, not on a class"
    known = list(RUN_SPECS if family == "run" else REGISTRATION_SPECS)
    close = difflib.get_close_matches(name, known, n=1)
    hint = f"; did you mean '{close[0]}'?" if close else f"; known hooks: {', '.join(known)}"
    what = "a run hook" if family == "run" else "a nectargan hook"
    return f"hook '{name}' is not {what}{hint}"


# -- live objects ------------------------------------------------------------
def live_impls(obj: Any) -> list[Impl]:
    """The hook implementations pluggy would find on ``obj`` (a module, class or instance), found
    without running any of its code (:func:`nectargan_core.hookproxy.hook_implementations`)."""
    impls = []
    for name, (function, opts) in hook_implementations(obj).items():
        code_func, bound = _code_function(function)
        code = getattr(code_func, "__code__", None)
        if code is None:
            continue
        args = code.co_varnames[: code.co_argcount]
        defaults = getattr(code_func, "__defaults__", None) or ()
        if defaults:
            args = args[: -len(defaults)]
        if args and (bound or _bound_on_an_instance(obj, name)):
            args = args[1:]  # self or cls, which pluggy does not pass
        impls.append(Impl(
            hook=opts.get("specname") or name, function=name, args=tuple(args),
            where=_where(code.co_filename, code.co_firstlineno, getattr(code_func, "__module__", None)),
            wrapper=bool(opts.get("wrapper") or opts.get("hookwrapper")),
            generator=inspect.isgeneratorfunction(code_func),
        ))
    return impls


def _code_function(function: Any) -> tuple[Any, bool]:
    """The function whose code pluggy reads through ``function`` (following bound methods and ``__wrapped__``),
    and whether a bound method on the way takes its first argument (``@hookimpl`` above ``@classmethod``)."""
    bound = False
    for _ in range(100):
        if inspect.ismethod(function):
            bound, function = True, function.__func__
            continue
        wrapped = inspect.getattr_static(function, "__wrapped__", None)
        if wrapped is None:
            break
        function = wrapped
    return function, bound


def _bound_on_an_instance(obj: Any, name: str) -> bool:
    """A plain function of a class: registered as an instance, where it is bound."""
    return isinstance(obj, type) and not isinstance(inspect.getattr_static(obj, name, None), staticmethod)


#: Parts registered as a function that builds them; checked with isinstance, which asks the object nothing
#: (inspect.isroutine asks the type for __get__, and a metaclass's __getattr__ would run).
_FACTORIES = (types.FunctionType, types.BuiltinFunctionType, types.MethodType, functools.partial)


def check_object(obj: Any, label: str, family: str | None = None) -> list[str]:
    """Problems of the hooks on a class, instance or module: run hooks, or registration hooks for a
    module (unless ``family`` says which)."""
    if isinstance(obj, _FACTORIES):  # a factory: what it builds is only known when it runs
        return []
    family = family or ("registration" if inspect.ismodule(obj) else "run")
    return problems_of(live_impls(obj), label, family)


def _where(filename: str, line: int, module: str | None) -> str:
    """``package/module.py:12``: the file from its top-level package on."""
    path = Path(filename)
    depth = len(module.split(".")) if module else 1
    if path.name == "__init__.py":
        depth += 1
    return f"{'/'.join(path.parts[-depth:])}:{line}"


# -- source, without importing -------------------------------------------------
def check_reference(ref: str, label: str) -> list[str]:
    """Problems of the run hooks of the class that ``"package.module:Class"`` names, read from source."""
    module, sep, attr = ref.partition(":")
    if not sep or not module or not attr or "." in attr:
        return []
    found = _find_class(module, attr, 0)
    if isinstance(found, str):
        return [f"{label}: {found}"]
    if found is None:
        return []
    return problems_of(found, label, "run")


def _find_class(module: str, name: str, depth: int) -> list[Impl] | str | None:
    """The hook implementations of class ``module.name`` and its bases; a message if it surely does not
    exist; None when the source cannot say (compiled module, dynamic class, unknown decorator...)."""
    if depth > 12:
        return None
    source = _parse(module)
    if isinstance(source, str) or source is None:
        return source
    binding = source.bindings.get(name)
    if binding is None:
        if source.open_ended:
            return None
        return f"module '{module}' has no class '{name}'"
    if isinstance(binding, tuple):  # imported: from other import name
        other, original = binding
        return _find_class(other, original, depth + 1)
    if not isinstance(binding, ast.ClassDef):
        return None
    return _class_impls(source, binding, depth)


def _class_impls(source: "_Source", node: ast.ClassDef, depth: int) -> list[Impl] | None:
    own: list[Impl] = []
    defined: set[str] = set()
    for item in node.body:
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
            defined.add(item.name)
            impl = source.impl(item)
            if impl is not None:
                own.append(impl)
        elif isinstance(item, ast.Assign):
            defined.update(t.id for t in item.targets if isinstance(t, ast.Name))
        elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
            defined.add(item.target.id)
    inherited: list[Impl] = []
    for base in node.bases:
        target = source.base(base)
        if target is None:
            if isinstance(base, ast.Name) and base.id == "object":
                continue
            return own if own else None  # an unknown base: report only what this class itself declares
        found = _find_class(target[0], target[1], depth + 1)
        if isinstance(found, str) or found is None:
            return own if own else None
        inherited.extend(impl for impl in found if impl.function not in defined)
    return own + inherited


class _Source:
    """One module's syntax tree and what its top-level names are bound to."""

    def __init__(self, module: str, path: Path, tree: ast.Module) -> None:
        self.module = module
        self.path = path
        self.package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        #: name -> ClassDef / other node / (module, name) for imports
        self.bindings: dict[str, Any] = {}
        self.markers: set[str] = set()  # local names of nectargan's hookimpl
        self.marker_modules: set[str] = set()  # local names of modules whose .hookimpl is it
        self.open_ended = False  # star import or module __getattr__: names may come from anywhere
        self._walk(tree.body)

    def _walk(self, body: list[ast.stmt]) -> None:
        for stmt in body:
            if isinstance(stmt, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                self.bindings.setdefault(stmt.name, stmt)
                if stmt.name == "__getattr__":
                    self.open_ended = True
            elif isinstance(stmt, ast.ImportFrom):
                origin = self._absolute(stmt)
                for alias in stmt.names:
                    if alias.name == "*":
                        self.open_ended = True
                        continue
                    local = alias.asname or alias.name
                    if origin is not None:
                        self.bindings.setdefault(local, (origin, alias.name))
                        if origin in MARKER_MODULES and alias.name == "hookimpl":
                            self.markers.add(local)
                    else:
                        self.bindings.setdefault(local, stmt)
            elif isinstance(stmt, ast.Import):
                for alias in stmt.names:
                    local = alias.asname or alias.name.partition(".")[0]
                    self.bindings.setdefault(local, ("module", alias.name if alias.asname else local))
                    if (alias.asname and alias.name in MARKER_MODULES) or (not alias.asname and local == "nectargan_core"):
                        self.marker_modules.add(local)
            elif isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                for target in targets:
                    for name in ast.walk(target):
                        if isinstance(name, ast.Name):
                            self.bindings.setdefault(name.id, stmt)
                            if isinstance(stmt, ast.Assign) and self._is_marker_value(stmt.value):
                                self.markers.add(name.id)
            elif isinstance(stmt, ast.If):
                self._walk(stmt.body)
                self._walk(stmt.orelse)
            elif isinstance(stmt, ast.Try):
                self._walk(stmt.body)
                for handler in stmt.handlers:
                    self._walk(handler.body)
                self._walk(stmt.orelse)
                self._walk(stmt.finalbody)
            elif isinstance(stmt, (ast.With, ast.For, ast.While)):
                self.open_ended = True  # names bound in ways this reading does not follow

    def _absolute(self, stmt: ast.ImportFrom) -> str | None:
        if not stmt.level:
            return stmt.module
        parts = self.package.split(".") if self.package else []
        if stmt.level - 1 > len(parts):
            return None
        base = parts[: len(parts) - (stmt.level - 1)]
        return ".".join(base + ([stmt.module] if stmt.module else [])) or None

    def _is_marker_value(self, value: ast.expr) -> bool:
        """``HookimplMarker("nectargan")``, ``pluggy.HookimplMarker("nectargan")`` or ``nectargan_core.hookimpl``."""
        if isinstance(value, ast.Attribute) and value.attr == "hookimpl" and isinstance(value.value, ast.Name):
            return value.value.id in self.marker_modules
        if isinstance(value, ast.Name):
            return value.id in self.markers
        if isinstance(value, ast.Call) and value.args and isinstance(value.args[0], ast.Constant):
            func = value.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            return called == "HookimplMarker" and value.args[0].value == hookspecs.PROJECT_NAME
        return False

    def base(self, node: ast.expr) -> tuple[str, str] | None:
        """(module, class) of a base class expression, or None when it cannot be followed."""
        if isinstance(node, ast.Name):
            binding = self.bindings.get(node.id)
            if isinstance(binding, ast.ClassDef):
                return self.module, node.id
            if isinstance(binding, tuple) and binding[0] != "module":
                return binding
            return None
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            binding = self.bindings.get(node.value.id)
            if isinstance(binding, tuple) and binding[0] == "module":
                return binding[1], node.attr
        return None

    def impl(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> Impl | None:
        opts: dict[str, Any] | None = None
        static = False
        for decorator in node.decorator_list:
            if isinstance(decorator, ast.Name) and decorator.id == "staticmethod":
                static = True
                continue
            call = decorator if isinstance(decorator, ast.Call) else None
            target = call.func if call is not None else decorator
            ours = (isinstance(target, ast.Name) and target.id in self.markers) or (
                isinstance(target, ast.Attribute) and target.attr == "hookimpl"
                and isinstance(target.value, ast.Name) and target.value.id in self.marker_modules)
            if ours:
                opts = {}
                for keyword in call.keywords if call is not None else ():
                    if keyword.arg and isinstance(keyword.value, ast.Constant):
                        opts[keyword.arg] = keyword.value.value
                    elif keyword.arg:
                        return None  # an option computed at import time: leave it to pluggy
        if opts is None:
            return None
        positional = [a.arg for a in (*node.args.posonlyargs, *node.args.args)]
        if node.args.defaults:
            positional = positional[: -len(node.args.defaults)]
        if positional and not static:
            positional = positional[1:]
        return Impl(
            hook=opts.get("specname") or node.name, function=node.name, args=tuple(positional),
            where=f"{self._shown_path()}:{min([node.lineno, *(d.lineno for d in node.decorator_list)])}",
            wrapper=bool(opts.get("wrapper") or opts.get("hookwrapper")),
            generator=_yields(node),
        )

    def _shown_path(self) -> str:
        depth = len(self.module.split(".")) + (1 if self.path.name == "__init__.py" else 0)
        return "/".join(self.path.parts[-depth:])


def _yields(node: ast.AST) -> bool:
    """Whether a function body yields (not counting functions nested in it)."""
    stack = list(ast.iter_child_nodes(node))
    while stack:
        child = stack.pop()
        if isinstance(child, (ast.Yield, ast.YieldFrom)):
            return True
        if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            stack.extend(ast.iter_child_nodes(child))
    return False


def _parse(module: str) -> "_Source | str | None":
    """A module's parsed source; a message if the module surely does not exist; None if unreadable."""
    located = locate(module)
    if isinstance(located, str) or located is None:
        return located
    try:
        stat = located.stat()
    except OSError:
        return None
    return _parse_file(module, located, stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=256)
def _parse_file(module: str, path: Path, mtime_ns: int, size: int) -> "_Source | None":
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
        return None  # importing it will report the real error
    return _Source(module, path, tree)


def locate(module: str) -> "Path | str | None":
    """The ``.py`` file of ``module`` without importing it (parent packages neither).

    A message when it surely does not exist; None when it cannot be told
    (an extension module, a custom importer).
    """
    loaded = sys.modules.get(module)
    if loaded is not None:
        file = getattr(loaded, "__file__", None)
        return Path(file) if file and file.endswith(".py") else None
    parts = module.split(".")
    locations: list[str] | None = None
    start = 1
    for index in range(len(parts) - 1, 0, -1):  # the innermost package that is already imported
        parent = sys.modules.get(".".join(parts[:index]))
        if parent is not None and hasattr(parent, "__path__"):
            locations, start = list(parent.__path__), index
            break
    if locations is None:
        try:
            spec = importlib.util.find_spec(parts[0])
        except (ImportError, ValueError):
            return None
        if spec is None:
            return f"module '{parts[0]}' is not installed"
        if len(parts) == 1:
            return Path(spec.origin) if spec.origin and spec.origin.endswith(".py") else None
        if spec.submodule_search_locations is None:
            return f"module '{module}' not found ('{parts[0]}' is not a package)"
        locations = list(spec.submodule_search_locations)
    for part in parts[start:-1]:
        locations = [str(Path(loc) / part) for loc in locations if (Path(loc) / part).is_dir()]
    last = parts[-1]
    for loc in locations:
        for candidate in (Path(loc) / f"{last}.py", Path(loc) / last / "__init__.py"):
            if candidate.is_file():
                return candidate
        if any((Path(loc)).glob(f"{last}.*")) or (Path(loc) / last).is_dir():
            return None  # compiled, or a namespace package
    return f"module '{module}' not found"


def check_part(component: Component) -> list[str]:
    """Problems of a registered trainer, visualizer or callback (nothing for other kinds), without importing it
    when it was registered by reference."""
    if component.kind not in RUN_HOOK_KINDS:
        return []
    label = f"{component.kind} '{component.name}'"
    if isinstance(component.ref, str):
        return check_reference(component.ref, label)
    return check_object(component.ref, label)


def check_run_parts(config: "CoreConfig", registry: "Registry") -> None:
    """Import the trainer, visualizers and callbacks ``config`` names and check their hooks; raise
    :class:`PluginError` with one line per problem. Runs before a run directory is created."""
    named: list[tuple[str, str]] = [("trainer", config.trainer)] if config.trainer else []
    named += [("visualizer", name) for name in config.visualizers]
    named += [("callback", name) for name in config.callbacks]
    problems: list[str] = []
    for kind, name in named:
        component = registry.get(kind, name)
        problems += check_object(component.load(), f"{kind} '{name}' from {component.source}")
    if problems:
        raise PluginError("\n".join(problems))
