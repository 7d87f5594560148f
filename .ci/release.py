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
import fcntl
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
    try:
        import tomli as tomllib
    except ImportError:
        sys.exit("error: Python 3.10 reads pyproject.toml with tomli: pip install tomli, or use Python 3.11+")

ROOT = Path(__file__).resolve().parents[1]
VERSION_LINE = re.compile(r'^version = "([^"]*)"$', re.M)
REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*([^;]*?)\s*(;.*)?$")
ARRAY_ITEM = re.compile(r'([\[,](?:\s|#[^\n]*)*)"([^"]*)"')  # a string in a TOML array, comments allowed
WHEEL = re.compile(r"^([A-Za-z0-9_.]+)-([^-]+)(-\d[^-]*)?-[^-]+-[^-]+-[^-]+\.whl$")
SDIST = re.compile(r"^([A-Za-z0-9_.-]+)-([^-]+)\.tar\.gz$")


class ReleaseError(Exception):
    """A mistake the maintainer can fix; main() prints it as one line."""


def folders() -> list[Path]:
    """The core's folder, then each plugin's."""
    return [ROOT] + sorted(p.parent for p in ROOT.glob("plugins/*/pyproject.toml"))


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def projects() -> dict[Path, dict]:
    found = {}
    for folder in folders():
        path = folder / "pyproject.toml"
        try:
            found[folder] = tomllib.loads(path.read_text())["project"]
        except (tomllib.TOMLDecodeError, KeyError) as exc:
            raise ReleaseError(f"{path.relative_to(ROOT)}: cannot read its [project] table ({exc})") from None
    return found


def names() -> set[str]:
    return {normalize(project.get("name", "")) for project in projects().values()}


def requirements_of(project: dict) -> list[str]:
    texts = list(project.get("dependencies", []))
    for items in project.get("optional-dependencies", {}).values():
        texts += items
    return texts


def check() -> list[str]:
    """One line per distribution whose name, version, or requirement of another distribution of ours is wrong."""
    all_projects = projects()
    version = all_projects[ROOT].get("version")
    ours = names()
    problems = []
    for folder, project in all_projects.items():
        where = (folder / "pyproject.toml").relative_to(ROOT)
        name = project.get("name", "")
        if not re.fullmatch(r"nectargan-[a-z0-9]+(-[a-z0-9]+)*", name) or (folder != ROOT and name != folder.name):
            problems.append(f"{where}: name {name!r} is not the distribution's name"
                            + ("" if folder == ROOT else f" ({folder.name!r})"))
        if "version" not in project:
            problems.append(f"{where}: the version must be written in pyproject.toml (release.py sets it), "
                            "not dynamic")
        elif project["version"] != version:
            problems.append(f"{where}: version {project['version']} but nectargan-core is {version}")
        pinned_core = False
        for requirement in requirements_of(project):
            match = REQUIREMENT.match(requirement)
            other = normalize(match.group(1)) if match else ""
            if other not in ours:
                continue
            spec = re.sub(r"\s+", "", match.group(3))
            if other == normalize(name):  # the distribution's own extra: no version of its own
                if spec:
                    problems.append(f"{where}: {requirement!r} names its own distribution: drop the version")
                continue
            if spec != f"=={version}":
                problems.append(f"{where}: {requirement!r} must pin {other}=={version} (released together)")
            pinned_core |= other == "nectargan-core" and requirement in project.get("dependencies", [])
        if folder != ROOT and not pinned_core:
            problems.append(f"{where}: the dependencies must require nectargan-core=={version}")
    return problems


def set_version(version: str) -> None:
    if not re.fullmatch(r"\d+\.\d+\.\d+((a|b|rc)\d+)?", version):
        raise ReleaseError(f"{version!r} is not a version like 1.2.3 or 1.2.3rc1")
    canonical = {normalize(p.get("name", "")): p.get("name", "") for p in projects().values()}
    for folder in folders():
        path = folder / "pyproject.toml"
        text = path.read_text()
        if not VERSION_LINE.search(text):
            raise ReleaseError(f"{path.relative_to(ROOT)}: no 'version = \"...\"' line to set")
        text = VERSION_LINE.sub(f'version = "{version}"', text, count=1)
        own = normalize(tomllib.loads(text)["project"].get("name", ""))

        def pin(item: re.Match[str]) -> str:
            match = REQUIREMENT.match(item.group(2))
            other = normalize(match.group(1)) if match else ""
            if other not in canonical or other == own:
                return item.group(0)
            extras, marker = match.group(2) or "", match.group(4) or ""
            return f'{item.group(1)}"{canonical[other]}{extras}=={version}{marker}"'

        path.write_text(ARRAY_ITEM.sub(pin, text))
    problems = check()
    if problems:
        raise ReleaseError(f"version {version} set, but: {problems[0]}"
                           + (f" (and {len(problems) - 1} more: run check)" if len(problems) > 1 else ""))
    print(f"version {version} set in {len(folders())} distributions; add a '## {version}' section to CHANGELOG.md")


def expected_files(version: str) -> set[str]:
    stems = [re.sub(r"[-.]+", "_", project["name"]) for project in projects().values()]
    return {f"{stem}-{version}-py3-none-any.whl" for stem in stems} | {f"{stem}-{version}.tar.gz" for stem in stems}


def build(out: Path, isolation: bool) -> list[Path]:
    """Wheels and sdists of every distribution into ``out``, checked with ``twine check --strict``."""
    problems = check()
    if problems:
        raise ReleaseError(problems[0] + (f" (and {len(problems) - 1} more: run check)" if len(problems) > 1 else ""))
    missing = [tool for tool in ("build", "twine") if importlib.util.find_spec(tool) is None]
    if missing:
        raise ReleaseError(f"{' and '.join(missing)} not installed; install the release tools: "
                           "pip install -e '.[release]'")
    version = projects()[ROOT]["version"]
    expected = expected_files(version)
    if out.exists() and not out.is_dir():
        raise ReleaseError(f"{out}: not a folder; name a folder for the distributions with --out")
    other = sorted(p.name for p in out.iterdir() if p.name not in expected) if out.is_dir() else []
    if other:
        raise ReleaseError(f"{out} holds other files ({', '.join(other[:3])}{', ...' if len(other) > 3 else ''}); "
                           "remove them or build into another --out, so that an upload of the folder publishes "
                           "only this version")
    out.mkdir(parents=True, exist_ok=True)
    # setuptools writes into the source folders (build/, *.egg-info): one build or install at a time
    # (.ci/install_dists.py takes the same lock).
    (ROOT / ".ci").mkdir(exist_ok=True)
    with open(ROOT / ".ci" / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for folder in folders():
            command = [sys.executable, "-m", "build", "--sdist", "--wheel", "--outdir", str(out), str(folder)]
            if not isolation:
                command.insert(4, "--no-isolation")
            shutil.rmtree(folder / "build", ignore_errors=True)  # setuptools' scratch folder: start clean
            done = subprocess.run(command, capture_output=True, text=True)
            shutil.rmtree(folder / "build", ignore_errors=True)
            if done.returncode != 0:
                reason = next((line.strip() for line in reversed(done.stderr.splitlines())
                               if line.strip() and not line.startswith(("Traceback", " "))), "see its output")
                raise ReleaseError(f"building {folder.relative_to(ROOT.parent)} failed ({reason}); "
                                   f"run: python -m build {folder} to see it whole")
    files = sorted(out / name for name in expected)
    absent = [f.name for f in files if not f.is_file()]
    if absent:
        raise ReleaseError(f"the build did not write {', '.join(absent)}")
    checked = subprocess.run([sys.executable, "-m", "twine", "check", "--strict", *map(str, files)],
                             capture_output=True, text=True)
    if checked.returncode != 0:
        failed = [line for line in checked.stdout.splitlines() if "FAILED" in line or "ERROR" in line]
        raise ReleaseError(f"twine check --strict failed: {failed[0].strip() if failed else checked.stderr.strip()}")
    return files


def write_index(dist: Path, index: Path) -> None:
    """A PEP 503 simple index in ``index``: ``index/<project>/`` lists the project's files in ``dist``."""
    if not dist.is_dir():
        raise ReleaseError(f"{dist}: no such folder; build first: python .ci/release.py build --out {dist}")
    if index.resolve() == dist.resolve() or dist.resolve() in index.resolve().parents:
        raise ReleaseError(f"{index}: inside {dist}; write the index elsewhere, so that an upload of {dist} "
                           "publishes only distributions")
    if index.exists() and not index.is_dir():
        raise ReleaseError(f"{index}: not a folder")
    projects_found: dict[str, list[Path]] = {}
    for path in sorted(p for p in dist.iterdir() if p.is_file()):
        match = WHEEL.match(path.name) or SDIST.match(path.name)
        if match is None:
            raise ReleaseError(f"{path}: not a wheel or sdist file name (name-version[-tags].whl or "
                               "name-version.tar.gz); remove it from the folder")
        projects_found.setdefault(normalize(match.group(1)), []).append(path)
    if not projects_found:
        raise ReleaseError(f"{dist}: no distributions in it; build first: python .ci/release.py build --out {dist}")
    index.mkdir(parents=True, exist_ok=True)
    links = []
    for project, files in sorted(projects_found.items()):
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
    try:
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
    except ReleaseError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"error: {exc.filename or ''}: {exc.strerror or exc}".replace("error: : ", "error: "), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
