"""Release the distributions of this repository together, at one version.

The core and every plugin under plugins/ are one release train: they share a
version number, and each pins its in-repository requirements to it
(``nectargan-core==X``), because that is the only combination CI tests.

    python .ci/release.py version 0.2.0     # set the version everywhere (pyproject.toml files, pins)
    python .ci/release.py check             # every distribution agrees on the version and pins
    python .ci/release.py build [--out dist] [--no-isolation]
                                            # wheels and sdists of all, then ``twine check``
    python .ci/release.py index DIST INDEX  # a PEP 503 simple index of DIST's files in INDEX

``build`` needs the ``release`` extra (``pip install -e '.[release]'``). The
files it writes are what ``twine upload dist/*`` would publish; ``index``
serves them (``python -m http.server -d INDEX``) so that a fresh environment
installs them by name, as users will from PyPI. CHANGELOG.md gets a heading
per release.
"""

from __future__ import annotations

import argparse
import html
import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
VERSION_LINE = re.compile(r'^version = "([^"]+)"$', re.M)


def folders() -> list[Path]:
    """The core's folder, then each plugin's."""
    return [ROOT] + sorted(p.parent for p in ROOT.glob("plugins/*/pyproject.toml"))


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def projects() -> dict[Path, dict]:
    return {folder: tomllib.loads((folder / "pyproject.toml").read_text())["project"] for folder in folders()}


def names() -> set[str]:
    return {normalize(project["name"]) for project in projects().values()}


def _pin_pattern(ours: set[str]) -> re.Pattern[str]:
    """A requirement of one of ``ours`` as an item of a TOML array: a line that starts with the quoted string."""
    alternatives = "|".join(sorted(re.escape(name) for name in ours))
    return re.compile(rf'^(\s+)"({alternatives})(\[[^\]]*\])?(==[^";]*)?(\s*;[^"]*)?"', re.M)


def check() -> list[str]:
    """One line per distribution whose version, or pin of another distribution of ours, disagrees."""
    all_projects = projects()
    version = all_projects[ROOT]["version"]
    ours = names()
    problems = []
    for folder, project in all_projects.items():
        where = (folder / "pyproject.toml").relative_to(ROOT)
        if not re.fullmatch(r"nectargan-[a-z0-9]+(-[a-z0-9]+)*", project["name"]) or (
                folder != ROOT and project["name"] != folder.name):
            problems.append(f"{where}: name {project['name']!r} is not the distribution's name"
                            + ("" if folder == ROOT else f" ({folder.name!r})"))
        if project["version"] != version:
            problems.append(f"{where}: version {project['version']} but nectargan-core is {version}")
        requirements = list(project.get("dependencies", []))
        for items in project.get("optional-dependencies", {}).values():
            requirements += items
        for requirement in requirements:
            name = normalize(re.split(r"[\s\[=<>!~;]", requirement, maxsplit=1)[0])
            if name in ours and folder != ROOT and f"=={version}" not in requirement:
                problems.append(f"{where}: {requirement!r} must pin {name}=={version} (released together)")
    return problems


def set_version(version: str) -> None:
    if not re.fullmatch(r"\d+\.\d+\.\d+([a-z]+\d+)?", version):
        raise SystemExit(f"error: {version!r} is not a version like 1.2.3 or 1.2.3rc1")
    pins = _pin_pattern(names())
    for folder in folders():
        path = folder / "pyproject.toml"
        text = VERSION_LINE.sub(f'version = "{version}"', path.read_text(), count=1)
        if folder != ROOT:
            text = pins.sub(lambda m: f'{m.group(1)}"{m.group(2)}{m.group(3) or ""}=={version}{m.group(5) or ""}"', text)
        path.write_text(text)
    print(f"version {version} set in {len(folders())} distributions; add a '## {version}' section to CHANGELOG.md")


def build(out: Path, isolation: bool) -> list[Path]:
    """Wheels and sdists of every distribution into ``out``, checked with ``twine check --strict``."""
    problems = check()
    if problems:
        raise SystemExit("\n".join(f"error: {line}" for line in problems))
    missing = [tool for tool in ("build", "twine") if importlib.util.find_spec(tool) is None]
    if missing:
        raise SystemExit(f"error: {' and '.join(missing)} not installed; install the release tools: "
                         "pip install -e '.[release]'")
    version = projects()[ROOT]["version"]
    stale = sorted(p.name for p in out.glob("nectargan*") if f"-{version}" not in p.name) if out.is_dir() else []
    if stale:
        raise SystemExit(f"error: {out} holds files of other versions ({', '.join(stale[:3])}"
                         f"{', ...' if len(stale) > 3 else ''}); remove them or build into another --out, "
                         "so that an upload of the folder publishes only this version")
    out.mkdir(parents=True, exist_ok=True)
    for folder in folders():
        command = [sys.executable, "-m", "build", "--sdist", "--wheel", "--outdir", str(out), str(folder)]
        if not isolation:
            command.insert(4, "--no-isolation")
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
        for leftover in (folder / "build",):  # setuptools' scratch folder, so the next build starts clean
            shutil.rmtree(leftover, ignore_errors=True)
    files = sorted(p for p in out.iterdir() if p.suffix == ".whl" or p.name.endswith(".tar.gz"))
    subprocess.run([sys.executable, "-m", "twine", "check", "--strict", *map(str, files)], check=True,
                   stdout=subprocess.DEVNULL)
    return files


def write_index(dist: Path, index: Path) -> None:
    """A PEP 503 simple index in ``index``: ``index/<project>/`` lists the project's files in ``dist``."""
    if not dist.is_dir():
        raise SystemExit(f"error: {dist}: no such folder; build first: python .ci/release.py build --out {dist}")
    projects: dict[str, list[Path]] = {}
    for path in sorted(dist.iterdir()):
        if path.suffix == ".whl":
            project = path.name.split("-")[0]
        elif path.name.endswith(".tar.gz"):
            project = path.name[: -len(".tar.gz")].rsplit("-", 1)[0]
        else:
            continue
        projects.setdefault(normalize(project), []).append(path)
    index.mkdir(parents=True, exist_ok=True)
    links = []
    for project, files in sorted(projects.items()):
        folder = index / project
        folder.mkdir(exist_ok=True)
        anchors = []
        for path in files:
            shutil.copy2(path, folder / path.name)
            anchors.append(f'<a href="{html.escape(path.name)}">{html.escape(path.name)}</a><br>')
        (folder / "index.html").write_text(f"<!DOCTYPE html><html><body>{''.join(anchors)}</body></html>\n")
        links.append(f'<a href="{project}/">{project}</a><br>')
    (index / "index.html").write_text(f"<!DOCTYPE html><html><body>{''.join(links)}</body></html>\n")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, as everywhere in the project
        self.exit(2, f"error: {message}; see: python .ci/{self.prog} --help\n")


def main(argv: list[str]) -> int:
    parser = _Parser(prog="release.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    version = commands.add_parser("version", help="set the version of every distribution and their pins")
    version.add_argument("version")
    commands.add_parser("check", help="every distribution agrees on the version and the pins")
    built = commands.add_parser("build", help="wheels and sdists of all, then twine check --strict")
    built.add_argument("--out", type=Path, default=ROOT / "dist", help="the folder (default: dist/)")
    built.add_argument("--no-isolation", action="store_true", help="build with the installed setuptools")
    index = commands.add_parser("index", help="a PEP 503 simple index of a folder of distributions")
    index.add_argument("dist", type=Path)
    index.add_argument("index", type=Path)
    args = parser.parse_args(argv)
    if args.command == "version":
        set_version(args.version)
    elif args.command == "check":
        problems = check()
        for line in problems:
            print(f"error: {line}", file=sys.stderr)
        if problems:
            return 1
        print(f"{len(folders())} distributions at version {projects()[ROOT]['version']}")
    elif args.command == "build":
        for path in build(args.out, isolation=not args.no_isolation):
            print(path)
    else:
        write_index(args.dist, args.index)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
