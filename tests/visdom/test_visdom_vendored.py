"""The vendored visdom and its browser assets: complete, as recorded, installed, and independent of any ``visdom``."""

from __future__ import annotations

import ast
import hashlib
import importlib.metadata
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import nectargan_visdom
from support import ROOT

SCRIPT = ROOT / "plugins" / "nectargan-visdom" / "refresh_vendored.py"


def refresh_vendored():
    spec = importlib.util.spec_from_file_location("refresh_vendored", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_files_have_their_recorded_hashes():
    done = subprocess.run([sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert re.fullmatch(r"\d+ vendored files, \d+ bytes: OK\n", done.stdout)


def test_the_check_reports_a_changed_and_a_missing_file():
    module = refresh_vendored()
    files = {path: path.read_bytes() for path in module.expected()}
    assert module.check(files) == []
    plotly = module.STATIC / "js" / "plotly-plotly.min.js"
    files[plotly] += b"\n"
    del files[module.VISDOM / "LICENSE"]
    problems = module.check(files)
    assert len(problems) == 2
    assert problems[0] == "nectargan_visdom/_vendor/visdom/LICENSE: missing"
    assert problems[1].startswith("nectargan_visdom/_vendor/visdom/static/js/plotly-plotly.min.js: sha256 ")


def test_the_installed_package_holds_every_vendored_file():
    """The installed copy (site-packages in CI), not the checkout: package data must not be left out."""
    module = refresh_vendored()
    installed = Path(nectargan_visdom.__file__).resolve().parent / "_vendor"
    for path, digest in module.expected().items():
        copy = installed / path.relative_to(module.VENDOR)
        assert copy.is_file(), copy
        assert hashlib.sha256(copy.read_bytes()).hexdigest() == digest, copy
    for extra in ("README.md", "NOTICE"):
        assert (installed / extra).is_file()


def test_a_broken_visdom_on_the_path_changes_nothing(tmp_path):
    """A user's own visdom (here one that cannot even be imported) is never loaded nor needed."""
    fake = tmp_path / "site" / "visdom"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('the user visdom must not be imported')\n")
    code = ("import sys\n"
            "from nectargan_visdom.client import Client\n"
            "from nectargan_visdom.server import build_app, missing_assets\n"
            f"app = build_app(port=0, env_path={str(tmp_path / 'envs')!r})\n"
            "print(Client.__mro__[1].__module__, missing_assets(), 'visdom' in sys.modules)\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["nectargan_visdom._vendor.visdom", "[]", "False"]


def module_level_imports(path: Path) -> set[str]:
    """Top-level names of the absolute imports a module runs when loaded (optional ones in try/except skipped)."""
    names = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:  # module level only: not inside functions
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_the_distribution_declares_what_the_vendored_code_imports_and_not_visdom():
    dist = importlib.metadata.distribution("nectargan-visdom")
    declared = {normalize(re.split(r"[\s;<>=!~\[(]", requirement, maxsplit=1)[0]) for requirement in dist.requires}
    assert "visdom" not in declared
    vendored = Path(nectargan_visdom.__file__).resolve().parent / "_vendor" / "visdom"
    imported = set().union(*(module_level_imports(path) for path in vendored.rglob("*.py")))
    third_party = {name for name in imported if name not in sys.stdlib_module_names}
    assert third_party == {"numpy", "PIL", "requests", "websocket", "tornado", "jsonpatch"}
    providers = importlib.metadata.packages_distributions()
    for name in third_party:
        assert {normalize(d) for d in providers[name]} & declared, f"{name} is imported but not declared"
    # Nothing of the distribution lands in a top-level visdom/ folder, which would clash with a user's visdom.
    assert not [f for f in dist.files or [] if str(f).split("/")[0] == "visdom"]
