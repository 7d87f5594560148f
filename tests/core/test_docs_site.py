"""The docs site (mkdocs.yml, docs/about-docs.md): it builds with warnings as errors, and its API reference
is exactly the list of covered names in docs/plugins/compatibility.md, each with a docstring."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from pathlib import Path

import griffe
import pytest
from pydantic import BaseModel

from support import ROOT

API_PAGES = sorted((ROOT / "docs" / "api").glob("*.md"))
COMPATIBILITY = ROOT / "docs" / "plugins" / "compatibility.md"
PACKAGES = {"nectargan_core": ".", "nectargan_models": "plugins/nectargan-models",
            "nectargan_losses": "plugins/nectargan-losses", "nectargan_translate": "plugins/nectargan-translate",
            "nectargan_pix2pix": "plugins/nectargan-pix2pix"}


def rendered_names() -> list[str]:
    """The ``::: name`` directives of the API pages, in page order."""
    return [name for page in API_PAGES for name in re.findall(r"^::: (\S+)\s*$", page.read_text(), re.M)]


def covered_names(text: str | None = None) -> list[str]:
    """The names listed between the covered-api markers of compatibility.md."""
    text = COMPATIBILITY.read_text() if text is None else text
    block = text.split("<!-- covered-api: start -->")[1].split("<!-- covered-api: end -->")[0]
    return re.findall(r"^- `([\w.]+)`$", block, re.M)


# Runs `mkdocs build` in a Python whose sockets refuse to leave the machine: a theme asset, an inventory or
# any other download at build time fails the build, as it would in CI without internet.
OFFLINE = """
import socket, sys
def refuse(address):
    raise OSError(f"the docs build tried to reach {address!r}; it must download nothing")
def connect(self, address, *rest):
    if self.family in (socket.AF_INET, socket.AF_INET6):
        refuse(address)
    return reach(self, address, *rest)
def lookup(host, *rest, **options):
    if host not in (None, "localhost", "127.0.0.1", "::1"):
        refuse(host)
    return resolve(host, *rest, **options)
reach, resolve = socket.socket.connect, socket.getaddrinfo
socket.socket.connect = socket.socket.connect_ex = connect
socket.getaddrinfo = lookup
"""
OFFLINE_MKDOCS = OFFLINE + """
from mkdocs.__main__ import cli
sys.argv[0] = "mkdocs"
cli()
"""


def build_site(config: Path, out: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", OFFLINE_MKDOCS, "build", "--strict", "-f", str(config),
                           "-d", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> tuple[subprocess.CompletedProcess, Path]:
    out = tmp_path_factory.mktemp("site")
    return build_site(ROOT / "mkdocs.yml", out), out


@pytest.fixture(scope="module")
def api() -> dict[str, griffe.Object]:
    """The packages as griffe (what mkdocstrings renders from) reads them, with the same extension."""
    loader = griffe.GriffeLoader(search_paths=[str(ROOT / path) for path in PACKAGES.values()],
                                 extensions=griffe.load_extensions({"griffe_pydantic": {"schema": False}}))
    packages = {name: loader.load(name) for name in PACKAGES}
    loader.resolve_aliases(external=False)
    return packages


def test_the_site_builds_with_warnings_as_errors(site):
    built, out = site
    assert built.returncode == 0, built.stdout + built.stderr
    assert "WARNING" not in built.stderr, built.stderr
    pages = {p.relative_to(out).as_posix() for p in out.rglob("*.html")}
    sources = {p.relative_to(ROOT / "docs").with_suffix(".html").as_posix() for p in (ROOT / "docs").rglob("*.md")}
    assert sources <= pages  # every docs page is on the site


def test_the_offline_guard_refuses_a_download():
    fetched = subprocess.run([sys.executable, "-c", OFFLINE + "import urllib.request\n"
                              "urllib.request.urlopen('https://pypi.org/simple/', timeout=5)"],
                             capture_output=True, text=True, timeout=60)
    assert fetched.returncode == 1
    assert "the docs build tried to reach 'pypi.org'; it must download nothing" in fetched.stderr


def test_the_pages_load_nothing_from_other_sites(site):
    _, out = site
    for page in out.rglob("*.html"):
        html = page.read_text()
        assert not re.search(r"<(script|link|img)[^>]+(src|href)=\"(https?:)?//", html), page


def test_every_covered_name_is_rendered_with_its_signature(site):
    _, out = site
    html = "".join(page.read_text() for page in (out / "api").glob("*.html"))
    for name in covered_names():
        assert f'id="{name}"' in html, name  # mkdocstrings' heading for the object
    # functions and classes show their signature: e.g. Trainer.track's parameters and return type
    assert re.search(r'id="nectargan_core\.Trainer\.track".*?track.*?name.*?obj', html, re.S)


def test_the_compatibility_promise_covers_exactly_the_api_pages():
    rendered, covered = rendered_names(), covered_names()
    assert len(covered) == len(set(covered)), "a name is listed twice"
    assert sorted(rendered) == sorted(covered)
    assert len(covered) > 80


def runtime_object(name: str) -> object:
    """The object a dotted covered name stands for, imported: its longest importable module, then attributes."""
    parts = name.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            value = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attr in parts[cut:]:
            value = getattr(value, attr)
        return value
    raise LookupError(name)


PUBLIC = ("nectargan_core", "nectargan_models", "nectargan_losses", "nectargan_translate", "nectargan_core.testing")


def exported_names() -> list[str]:
    """Every name the public packages export in ``__all__``, qualified by its package."""
    return [f"{package}.{name}" for package in PUBLIC for name in importlib.import_module(package).__all__
            if not name.startswith("__")]


def test_the_covered_names_are_exactly_what_the_packages_export():
    covered, exported = covered_names(), exported_names()
    assert sorted(covered) == sorted(exported)
    for name in covered:
        assert runtime_object(name) is not None, name
    # a name dropped from the list, or listed under a submodule's path, is caught
    assert set(exported) - set(covered[1:]) == {covered[0]}
    assert "nectargan_translate.data.paired.PairedDataset" not in exported


def test_the_list_reader_fails_on_a_missing_or_extra_name():
    text = COMPATIBILITY.read_text()
    assert covered_names(text.replace("- `nectargan_core.Trainer`\n", "")) != covered_names()
    assert "nectargan_core.Extra" in covered_names(text.replace("<!-- covered-api: end -->",
                                                                "- `nectargan_core.Extra`\n<!-- covered-api: end -->"))


def undocumented(api: dict[str, griffe.Object], names: list[str]) -> list[str]:
    """Covered names, and public methods, properties and class attributes of covered classes, without a docstring.

    An override is documented by the member it overrides; a pydantic field by its ``description``.
    """
    missing = []
    for name in names:
        package, _, path = name.partition(".")
        obj = api[package][path]
        obj = obj.final_target if obj.is_alias else obj
        if not obj.docstring:
            missing.append(name)
        if not obj.is_class:
            continue
        runtime = getattr(importlib.import_module(obj.module.path), obj.name)
        fields = runtime.model_fields if isinstance(runtime, type) and issubclass(runtime, BaseModel) else {}
        for member_name, member in obj.members.items():
            if member_name.startswith("_") or member.is_alias or member.docstring:
                continue
            if "instance-attribute" in member.labels and "pydantic-field" not in member.labels:
                continue  # set in __init__: shown only when documented
            if member_name in fields and fields[member_name].description:
                continue
            inherited = any(member_name in base.members and base.members[member_name].docstring
                            for base in obj.mro())
            if not inherited:
                missing.append(f"{name}.{member_name}")
    return missing


def test_every_covered_name_and_its_public_members_have_docstrings(api):
    assert undocumented(api, covered_names()) == []


def test_the_docstring_check_finds_a_missing_docstring(api):
    schedules = api["nectargan_losses"]["schedules"]
    saved = schedules["Ramp"].members["interpolate"].docstring
    schedules["Ramp"].members["interpolate"].docstring = None
    try:
        assert undocumented(api, ["nectargan_losses.schedules.Ramp", "nectargan_losses.schedules.Linear"]) == [
            "nectargan_losses.schedules.Ramp.interpolate", "nectargan_losses.schedules.Linear.interpolate"]
    finally:
        schedules["Ramp"].members["interpolate"].docstring = saved


def test_the_docs_tools_are_in_the_docs_extra_which_the_test_extra_includes():
    text = (ROOT / "pyproject.toml").read_text()
    docs = re.search(r"^docs = \[(.*?)^\]", text, re.M | re.S).group(1)
    for tool in ("mkdocs", "mkdocstrings[python]", "griffe-pydantic", "pymdown-extensions"):
        assert f'"{tool}' in docs, tool
    assert '"nectargan-core[docs]"' in re.search(r"^test = \[(.*?)^\]", text, re.M | re.S).group(1)
