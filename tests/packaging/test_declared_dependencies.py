"""Each distribution declares what it imports, with a floor, and the floors file says the same.

The floors CI job pins exactly the declared floors; a package a distribution
imports without declaring it would float to its newest release there, and
the floors job would test less than it claims. So: every third-party module a
distribution imports (outside ``try: ... except ImportError`` and
``if TYPE_CHECKING:``) belongs to a requirement it declares, every declared
requirement is imported (or named below with the reason it is not), and
``constraints-floors.txt`` is what ``.ci/floors.py`` makes of them.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

import pytest

from support import ROOT

#: Declared but never imported by the distribution's own code, and why.
USED_WITHOUT_IMPORT = {
    ("nectargan-translate", "onnxscript"): "torch.onnx.export imports it",
    ("nectargan-tensorboard", "tensorboard"): "torch.utils.tensorboard imports it",
}
#: Imported under another distribution's name, which fixes its version exactly.
PROVIDED_BY = {"pydantic-core": "pydantic"}
#: Modules that only a host process imports: nectargan_core.testing is loaded by pytest (pytest11 entry point).
HOST_IMPORTS = {("nectargan-core", "pytest")}
#: Extras of development tools, not of the product.
TOOL_EXTRAS = {"test", "docs", "release", "lint"}


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def distributions() -> dict[str, tuple[Path, list[Path], dict]]:
    found = {}
    for folder in [ROOT] + sorted(p.parent for p in ROOT.glob("plugins/*/pyproject.toml")):
        project = tomllib.loads((folder / "pyproject.toml").read_text())["project"]
        packages = [p for p in folder.iterdir() if p.is_dir() and p.name.startswith("nectargan_")
                    and (p / "__init__.py").is_file()]
        found[normalize(project["name"])] = (folder, packages, project)
    return found


def _optional(node: ast.AST, parents: dict[ast.AST, ast.AST], vendored: bool) -> bool:
    """Inside ``try`` with an ImportError handler, under ``if TYPE_CHECKING``, or, in vendored code, inside a
    function (visdom's video, audio, plotly and networkx features, which NectarGAN never calls)."""
    child, parent = node, parents.get(node)
    while parent is not None:
        if isinstance(parent, ast.Try) and child in parent.body:
            for handler in parent.handlers:
                caught = [n.id for n in ast.walk(handler.type) if isinstance(n, ast.Name)] if handler.type else ["*"]
                if {"ImportError", "ModuleNotFoundError", "Exception", "*"} & set(caught):
                    return True
        if isinstance(parent, ast.If) and "TYPE_CHECKING" in ast.unparse(parent.test):
            return True
        if vendored and isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return True
        child, parent = parent, parents.get(parent)
    return False


def imported_modules(packages: list[Path]) -> dict[str, tuple[str, bool]]:
    """``{top-level module: (file, optional)}`` of the absolute imports in ``packages``; a module is optional
    when every import of it is (see :func:`_optional`)."""
    found: dict[str, tuple[str, bool]] = {}
    for package in packages:
        for path in sorted(package.rglob("*.py")):
            tree = ast.parse(path.read_text(), str(path))
            parents = {child: parent for parent in ast.walk(tree) for child in ast.iter_child_nodes(parent)}
            vendored = "_vendor" in path.relative_to(package).parts
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                    names = [node.module]
                else:
                    continue
                optional = _optional(node, parents, vendored)
                for name in names:
                    module = name.split(".")[0]
                    where, was_optional = found.get(module, (str(path.relative_to(ROOT)), True))
                    if was_optional and not optional:
                        where = str(path.relative_to(ROOT))
                    found[module] = (where, was_optional and optional)
    return found


def requirement_names(project: dict, tools: bool) -> set[str]:
    texts = list(project.get("dependencies", []))
    for extra, items in project.get("optional-dependencies", {}).items():
        if tools or extra not in TOOL_EXTRAS:
            texts += items
    return {normalize(re.split(r"[\s\[=<>!~;]", text, maxsplit=1)[0]) for text in texts}


DISTRIBUTIONS = distributions()
MODULE_OWNERS = {module: [normalize(d) for d in dists] for module, dists in metadata.packages_distributions().items()}


@pytest.mark.parametrize("dist", sorted(DISTRIBUTIONS))
def test_every_import_is_declared_and_every_declaration_used(dist):
    folder, packages, project = DISTRIBUTIONS[dist]
    declared = requirement_names(project, tools=True)
    ours = set(DISTRIBUTIONS)
    stdlib = set(sys.stdlib_module_names) | {"__future__"}
    own_modules = {p.name for p in packages}
    used: set[str] = set()
    missing = []
    for module, (where, optional) in sorted(imported_modules(packages).items()):
        if module in stdlib or module in own_modules:
            continue
        owners = MODULE_OWNERS.get(module)
        if not owners:  # not installed here: a fallback for another Python, or an optional feature
            assert optional or normalize(module) in declared, \
                f"{where}: imports '{module}', which no installed distribution provides and {dist} does not declare"
            used.add(normalize(module))
            continue
        owner = PROVIDED_BY.get(owners[0], owners[0])
        used.add(owner)
        if owner in ours or (dist, owner) in HOST_IMPORTS or optional:
            continue
        if owner not in declared:
            missing.append(f"{where} imports '{module}' (distribution {owner})")
    assert not missing, f"{dist} does not declare: " + "; ".join(missing)
    unused = {name for name in requirement_names(project, tools=False) - used - ours
              if (dist, name) not in USED_WITHOUT_IMPORT}
    assert not unused, f"{dist} declares but never imports: {sorted(unused)}"


def test_tomli_is_the_python_3_10_fallback_it_is_declared_as():
    _, packages, project = DISTRIBUTIONS["nectargan-core"]
    assert "tomli>=2.0; python_version < '3.11'" in project["dependencies"]
    assert "import tomli as tomllib" in (ROOT / "nectargan_core" / "config" / "loading.py").read_text()


def test_the_floors_file_is_generated_from_the_declarations():
    result = subprocess.run([sys.executable, str(ROOT / ".ci" / "floors.py"), "--check"], capture_output=True,
                            text=True)
    assert result.returncode == 0, result.stderr
    pins = dict(line.split("==") for line in (ROOT / "constraints-floors.txt").read_text().splitlines()
                if line and not line.startswith("#"))
    assert pins["torch"] == "2.11" and pins["torchvision"] == "0.26" and pins["pluggy"] == "1.3"
    for dist, (_, _, project) in DISTRIBUTIONS.items():
        for name in requirement_names(project, tools=False) - set(DISTRIBUTIONS):
            assert name in pins, f"{dist}: {name} has no floor in constraints-floors.txt"


def test_a_requirement_without_a_floor_is_refused(tmp_path):
    """The floors script reads the repository it sits in; a copy with one floor removed is refused."""
    copy = tmp_path / "repo"
    (copy / ".ci").mkdir(parents=True)
    (copy / ".ci" / "floors.py").write_text((ROOT / ".ci" / "floors.py").read_text())
    (copy / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text().replace('"rich>=13.0"', '"rich"'))
    result = subprocess.run([sys.executable, str(copy / ".ci" / "floors.py")], capture_output=True, text=True)
    assert result.returncode == 1
    assert result.stderr.strip() == "error: pyproject.toml: 'rich' has no floor; declare the oldest version CI may " \
                                    "test (>=)"


def test_every_distribution_is_released_at_one_version():
    result = subprocess.run([sys.executable, str(ROOT / ".ci" / "release.py"), "check"], capture_output=True,
                            text=True)
    assert result.returncode == 0, result.stderr
    version = DISTRIBUTIONS["nectargan-core"][2]["version"]
    assert result.stdout.strip() == f"{len(DISTRIBUTIONS)} distributions at version {version}"
    import nectargan_core

    assert nectargan_core.__version__ == version == metadata.version("nectargan-core")
