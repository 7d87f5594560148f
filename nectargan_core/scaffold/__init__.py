"""``nectargan plugins new``: render a complete plugin distribution from jinja2 templates.

Templates live in ``templates/common`` (shared by every kind) and
``templates/<kind>``; a path part named ``PKG`` becomes the plugin's module
name and a trailing ``.j2`` is dropped, so the tree on disk mirrors the output.
"""

from __future__ import annotations

import keyword
import re
from importlib import resources
from pathlib import Path

from .. import __version__
from ..errors import NectarGANError

KINDS = ("loss", "model", "trainer", "visualizer", "dataset", "command")
NAME_PATTERN = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
#: A trainer's config section is named after it, so it must not shadow a core section.
CORE_SECTIONS = frozenset({"trainer", "run", "loop", "checkpoint", "distributed", "visualizers", "callbacks"})


class ScaffoldError(NectarGANError):
    """A plugin cannot be scaffolded (bad name, existing folder)."""


def check_name(name: str) -> str:
    """NAME becomes a module suffix, a config section and a Python identifier in the templates."""
    if not NAME_PATTERN.match(name) or keyword.iskeyword(name):
        raise ScaffoldError(f"invalid plugin name {name!r}: use lowercase letters, digits and underscores, "
                            "starting with a letter (at most 40 characters), not a Python keyword")
    return name


def _templates(kind: str) -> list[tuple[str, str]]:
    """(template name, output path with PKG unresolved) for every file of ``kind``."""
    root = resources.files(__name__) / "templates"
    found = []
    for folder in ("common", kind):
        stack = [(root / folder, folder)]
        while stack:
            node, name = stack.pop()
            for child in node.iterdir():
                child_name = f"{name}/{child.name}"
                if child.is_dir():
                    if child.name != "__pycache__":
                        stack.append((child, child_name))
                elif child.name.endswith(".j2"):
                    found.append((child_name, child_name.split("/", 1)[1].removesuffix(".j2")))
    return sorted(found)


def render(name: str, kind: str = "loss", directory: str | Path = ".") -> Path:
    """Write ``nectargan-NAME`` under ``directory`` and return its path; never overwrites."""
    check_name(name)
    if kind not in KINDS:
        raise ScaffoldError(f"unknown kind {kind!r}; choose one of: {', '.join(KINDS)}")
    if kind == "trainer" and name in CORE_SECTIONS:
        raise ScaffoldError(f"a trainer cannot be called {name!r}: its config section would replace the core's")
    module = f"nectargan_{name}"
    target = Path(directory) / f"nectargan-{name.replace('_', '-')}"
    if target.exists():
        raise ScaffoldError(f"{target} already exists; choose another name or --dir")
    import jinja2  # only here: the CLI imports this module for KINDS

    env = jinja2.Environment(
        loader=jinja2.PackageLoader(__name__, "templates"),
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
    )
    context = {
        "name": name,
        "kind": kind,
        "module": module,
        "distribution": f"nectargan-{name.replace('_', '-')}",
        "command": name.replace("_", "-"),
        "title": name.replace("_", " ").title().replace(" ", ""),
        "core_version": __version__,
    }
    for template, relative in _templates(kind):
        path = target / relative.replace("PKG", module)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(env.get_template(template).render(context))
    return target
