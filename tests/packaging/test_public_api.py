"""The public API line: each distribution exports its API in its top-level ``__all__``, and every plugin of this
repository (with the scaffolds, the tests' example plugin and the Python of the docs) imports another
distribution only through those names, as a third party must (docs/plugins/compatibility.md)."""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from nectargan_core.lazy import _type_checking_imports
from nectargan_core.scaffold import KINDS, render
from support import ROOT

DISTRIBUTIONS = {path.name.replace("-", "_"): path for path in (ROOT / "plugins").iterdir()
                 if (path / "pyproject.toml").exists()}
DISTRIBUTIONS["nectargan_core"] = ROOT
PUBLIC_MODULES = {"nectargan_core.testing"}  # a pytest plugin: its fixtures are public (docs/api/testing.md)


def public_names(package: str) -> set[str]:
    return set(importlib.import_module(package).__all__)


def private_imports(source: str, own: str | None, where: str = "<source>") -> list[str]:
    """``file:line: what`` for each import in ``source`` of another distribution that is not one of its public names."""
    problems = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".")[0]
                if top in DISTRIBUTIONS and top != own and "." in alias.name and alias.name not in PUBLIC_MODULES:
                    problems.append(f"{where}:{node.lineno}: import {alias.name} (a submodule)")
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            top = node.module.split(".")[0]
            if top not in DISTRIBUTIONS or top == own or node.module in PUBLIC_MODULES:
                continue
            if node.module != top:
                problems.append(f"{where}:{node.lineno}: from {node.module} import ... (a submodule)")
                continue
            for alias in node.names:
                if alias.name not in public_names(top):
                    problems.append(f"{where}:{node.lineno}: {top}.{alias.name} is not in {top}.__all__")
    return problems


def python_sources() -> list[tuple[Path, str | None]]:
    """Every Python file of the plugins and the tests' example plugins, with its own package."""
    files = []
    for folder in [*(ROOT / "plugins").glob("*/nectargan_*"), *(ROOT / "tests" / "plugins").glob("*/nectargan_*")]:
        files += [(path, folder.name) for path in folder.rglob("*.py") if "build" not in path.parts]
    return files


def docs_python() -> list[tuple[str, str]]:
    """The Python the docs and examples show: each ```python block whole, and import statements on other lines
    (inline code, ``python -c`` in the examples' shell scripts), with where each comes from."""
    sources = []
    for path in [*sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md", *sorted((ROOT / "examples").glob("*.sh"))]:
        text, where = path.read_text(), str(path.relative_to(ROOT))
        rest = text
        for block in re.finditer(r"^```python\n(.*?)^```", text, re.M | re.S):
            try:
                ast.parse(block.group(1))
            except SyntaxError:  # a signature or an outline, not a program: its import lines are read below
                continue
            sources.append((f"{where}:{text.count(chr(10), 0, block.start()) + 2}", block.group(1)))
            rest = rest.replace(block.group(0), "")
        for number, line in enumerate(rest.splitlines(), 1):
            for statement in re.findall(r"(?:^|[\";`])\s*((?:from|import) nectargan_[\w.]+[^;\"`\n]*)", line):
                sources.append((f"{where}:~{number}", statement.strip()))
    return sources


def test_the_plugins_import_only_public_names():
    sources = python_sources()
    assert len(sources) > 100
    problems = []
    for path, own in sources:
        problems += private_imports(path.read_text(), own, str(path.relative_to(ROOT)))
    assert problems == []


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_the_scaffolds_import_only_public_names(kind, tmp_path):
    project = render(f"acme_{kind}", kind, tmp_path)
    sources = sorted(project.rglob("*.py"))
    assert sources
    problems = [problem for path in sources
                for problem in private_imports(path.read_text(), None, str(path.relative_to(tmp_path)))]
    assert problems == []


def test_the_docs_and_examples_import_only_public_names():
    sources = docs_python()
    assert len(sources) > 15
    problems = [problem for where, source in sources for problem in private_imports(source, None, where)]
    assert problems == []


def test_the_check_finds_submodule_and_unlisted_imports():
    source = textwrap.dedent("""
        from nectargan_core import Trainer, hookimpl
        from nectargan_core.config import Section
        import nectargan_translate.data.paired
        from nectargan_translate import PairedDataset, _private_helper
        from nectargan_core.testing import tiny_config
        from nectargan_pix2pix.trainer import Pix2pixTrainer
        from .options import Mine
        def later():
            from nectargan_losses.schedules import build_schedule
    """)
    assert private_imports(source, own="nectargan_toy") == [
        "<source>:3: from nectargan_core.config import ... (a submodule)",
        "<source>:4: import nectargan_translate.data.paired (a submodule)",
        "<source>:5: nectargan_translate._private_helper is not in nectargan_translate.__all__",
        "<source>:7: from nectargan_pix2pix.trainer import ... (a submodule)",
        "<source>:10: from nectargan_losses.schedules import ... (a submodule)",
    ]
    # inside its own distribution a module imports what it likes
    assert private_imports("from nectargan_translate.data.paired import PairedDataset", "nectargan_translate") == []


@pytest.mark.parametrize("package", sorted(DISTRIBUTIONS))
def test_each_package_lists_its_public_names_once_and_each_resolves(package):
    module = importlib.import_module(package)
    exported = module.__all__
    assert len(exported) == len(set(exported)), "a name is listed twice"
    init = Path(module.__file__)
    lazy = _type_checking_imports(package, str(init))
    eager = {name for name in exported if name in vars(module) and name not in lazy}
    assert set(lazy) <= set(exported), "a name is imported for type checkers but not exported"
    assert set(exported) - {"__version__"} == (set(lazy) | eager) - {"__version__"}
    for name in exported:
        assert getattr(module, name) is not None, name
    for name, (source, attr) in lazy.items():
        assert getattr(module, name) is getattr(importlib.import_module(source), attr)
    assert set(exported) - {"__version__"} <= set(dir(module))
    # importing a submodule sets the package attribute of its name: a public name must not be one
    assert set(exported) & {info.name for info in pkgutil.iter_modules(module.__path__)} == set()


def test_importing_the_packages_imports_no_torch():
    code = ("import sys\nimport nectargan_core, nectargan_translate, nectargan_models, nectargan_losses, "
            "nectargan_pix2pix, nectargan_cyclegan, nectargan_visdom, nectargan_tensorboard\n"
            "from nectargan_core import Section, at_most, atomic_write\n"
            "from nectargan_translate import PairedDataOptions\n"
            "print(sorted(m for m in ('torch', 'torchvision') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_lazy_exports_loads_a_name_on_first_access_only(tmp_path, monkeypatch):
    package = tmp_path / "lazypkg"
    package.mkdir()
    (package / "__init__.py").write_text(textwrap.dedent("""
        from typing import TYPE_CHECKING
        from nectargan_core import lazy_exports
        if TYPE_CHECKING:
            from .heavy import Heavy
            from .heavy import helper as public_helper
        __all__ = ["Heavy", "public_helper"]
        __getattr__, __dir__ = lazy_exports(__name__, __file__)
    """))
    (package / "heavy.py").write_text("class Heavy: pass\ndef helper(): return 42\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    lazypkg = importlib.import_module("lazypkg")
    assert "lazypkg.heavy" not in sys.modules
    assert {"Heavy", "public_helper"} <= set(dir(lazypkg))
    assert lazypkg.public_helper() == 42
    assert "lazypkg.heavy" in sys.modules
    assert lazypkg.Heavy is sys.modules["lazypkg.heavy"].Heavy
    with pytest.raises(AttributeError, match="module 'lazypkg' has no attribute 'helper'"):
        lazypkg.helper  # exported only under its public name
    for name in ("lazypkg", "lazypkg.heavy"):
        sys.modules.pop(name)


def test_lazy_exports_refuses_a_block_it_cannot_read(tmp_path):
    init = tmp_path / "__init__.py"
    init.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import os\n")
    with pytest.raises(TypeError, match="may hold only 'from ... import' lines"):
        _type_checking_imports("broken", str(init))


def test_a_moved_name_warns_for_one_release_and_still_works():
    import warnings

    import nectargan_core
    import nectargan_translate

    assert "GeneratorSpec" not in nectargan_core.__all__ and "GeneratorSpec" in nectargan_translate.__all__
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        old = nectargan_core.GeneratorSpec
    assert [str(w.message) for w in caught] == [
        "nectargan_core.GeneratorSpec is deprecated and goes in the next release: import "
        "nectargan_translate.GeneratorSpec"]
    assert caught[0].category is DeprecationWarning and caught[0].filename == __file__  # points at the caller
    # what the inference commands read of a spec, the old class has too
    spec = old(model="unet", in_channels=1, out_channels=3)
    new = nectargan_translate.GeneratorSpec(model="unet", in_channels=1, out_channels=3)
    assert (spec.model, spec.in_channels, spec.out_channels) == (new.model, new.in_channels, new.out_channels)


def test_lazy_exports_reads_a_zip_imported_package_and_a_submodule_export(tmp_path, monkeypatch):
    """The block is read through the package's loader (no file on disk in a zip), and ``from . import sub``
    exports the submodule itself."""
    import zipfile

    archive = tmp_path / "zipped.zip"
    with zipfile.ZipFile(archive, "w") as bundle:
        bundle.writestr("zippkg/__init__.py", textwrap.dedent("""
            from typing import TYPE_CHECKING
            from nectargan_core import lazy_exports
            if TYPE_CHECKING:
                from . import tools
                from .tools import answer
            __all__ = ["tools", "answer"]
            __getattr__, __dir__ = lazy_exports(__name__, __file__)
        """))
        bundle.writestr("zippkg/tools.py", "answer = 42\n")
    monkeypatch.syspath_prepend(str(archive))
    zippkg = importlib.import_module("zippkg")
    assert zippkg.answer == 42
    assert zippkg.tools is sys.modules["zippkg.tools"]
    for name in ("zippkg", "zippkg.tools"):
        sys.modules.pop(name)


@pytest.mark.parametrize("package", ["nectargan_core", "nectargan_translate"])
def test_every_deprecated_name_warns_gives_its_new_object_and_is_listed_on_the_compatibility_page(package):
    import importlib
    import warnings

    module = importlib.import_module(package)
    section = (ROOT / "docs" / "plugins" / "compatibility.md").read_text().split("## Deprecated names")[1]
    section = section.split("\n## ")[0]
    assert module._DEPRECATED
    for name, (reference, instead) in module._DEPRECATED.items():
        assert name not in module.__all__
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            value = getattr(module, name)
        assert [(w.category, w.filename) for w in caught] == [(DeprecationWarning, __file__)]
        assert str(caught[0].message) == (f"{package}.{name} is deprecated and goes in the next release: "
                                          f"import {instead}")
        new = instead.split(" ")[0]
        if reference.replace(":", ".") == new:  # moved as it is: the new name gives the same object
            home, _, attr = new.rpartition(".")
            assert value is getattr(importlib.import_module(home), attr)
        assert f"- `{package}.{name}`: import `{new}`" in section
