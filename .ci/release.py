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

import html
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
    alternatives = "|".join(sorted(re.escape(name) for name in ours))
    return re.compile(rf'"({alternatives})(\[[^\]]*\])?(==[^";]*)?(\s*;[^"]*)?"')


def check() -> list[str]:
    """One line per distribution whose version, or pin of another distribution of ours, disagrees."""
    all_projects = projects()
    version = all_projects[ROOT]["version"]
    ours = names()
    problems = []
    for folder, project in all_projects.items():
        where = (folder / "pyproject.toml").relative_to(ROOT)
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
            text = pins.sub(lambda m: f'"{m.group(1)}{m.group(2) or ""}=={version}{m.group(4) or ""}"', text)
        path.write_text(text)
    print(f"version {version} set in {len(folders())} distributions; add a '## {version}' section to CHANGELOG.md")


def build(out: Path, isolation: bool) -> list[Path]:
    """Wheels and sdists of every distribution into ``out``, checked with ``twine check --strict``."""
    problems = check()
    if problems:
        raise SystemExit("\n".join(f"error: {line}" for line in problems))
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


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    command, args = argv[0], argv[1:]
    if command == "version" and len(args) == 1:
        set_version(args[0])
    elif command == "check" and not args:
        problems = check()
        for line in problems:
            print(f"error: {line}", file=sys.stderr)
        if problems:
            return 1
        print(f"{len(folders())} distributions at version {projects()[ROOT]['version']}")
    elif command == "build":
        out = Path(args[args.index("--out") + 1]) if "--out" in args else ROOT / "dist"
        for path in build(out, isolation="--no-isolation" not in args):
            print(path)
    elif command == "index" and len(args) == 2:
        write_index(Path(args[0]), Path(args[1]))
    else:
        print(f"error: unknown or incomplete command {' '.join(argv)!r}; see: python .ci/release.py --help",
              file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
