"""Re-create nectargan_visdom/_vendor/ from its sources, or check it against them offline.

What lives in ``nectargan_visdom/_vendor/`` (see its README.md) comes from two
places, each pinned here with the sha256 of every file as committed:

* the Python server and client of visdom 0.2.4, from its PyPI sdist, with
  imports made relative (:func:`patch_python`) so that this copy never loads,
  nor is shadowed by, a ``visdom`` the user installed;
* the browser assets visdom's page loads, from the npm registry at the exact
  versions visdom 0.2.4 downloads from CDNs (``visdom/server/build.py``),
  with each package's licence.

Usage (from the repository root):

    python plugins/nectargan-visdom/refresh_vendored.py --check   # offline: every file present, every hash right
    python plugins/nectargan-visdom/refresh_vendored.py           # download (pip, npm), verify, write

The second form needs ``pip`` and ``npm`` with access to their registries; it
writes nothing unless every fetched file has the hash recorded below.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import os
import re
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import NamedTuple, Optional

HERE = Path(__file__).resolve().parent
VENDOR = HERE / "nectargan_visdom" / "_vendor"
VISDOM = VENDOR / "visdom"
STATIC = VISDOM / "static"
LICENSES = VENDOR / "licenses"

VISDOM_VERSION = "0.2.4"
VISDOM_SDIST_SHA256 = "84a911d3c8814a056d54812b381bd938cb44bcfc503a85fe0f701502bb720574"
#: visdom's files kept, relative to ``py/visdom/`` in the sdist (``LICENSE`` and ``AUTHORS`` from its root),
#: with their sha256 as committed (after :func:`patch_python` for .py files).
VISDOM_FILES = {
    "LICENSE": "58d1e17ffe5109a7ae296caafcadfdbe6a7d176f0bc4ab01e12a689b0499d8bd",
    "AUTHORS": "0f7629b6a46411241c7c143a3afae5575e3b99a7ae3a4489b1165a149fd75f02",
    "VERSION": "1725bfa6524c5265e7c171cf06568417d39b947fff49c242f03859479c82334b",
    "__init__.py": "22d6b38cca0eac931aab78f86b580d6c23fee0de083fec4f2d7ec4a8a3326451",
    "server/__init__.py": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "server/app.py": "c2ec2e12596e1121dc1373b66d3dce31f4c7155c8f519b363b7bc72575be6a47",
    "server/defaults.py": "f7f7fc7813bb2ad1dd079ea91ac8926df2779f781bd9e4b799aa8866226a8a15",
    "server/handlers/__init__.py": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "server/handlers/base_handlers.py": "5e047d75c6b253845f1454e43d73eba5a06e35b117fd742b3b75161e4064ebab",
    "server/handlers/socket_handlers.py": "91aee14337cf1f5bcc07109350e3c4873cf79e056bbc52654546812935470906",
    "server/handlers/web_handlers.py": "3b60b681211d9fbb6c3426d624eb8bf15dbc476228800b010b10812fa9a56a9c",
    "utils/__init__.py": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "utils/server_utils.py": "b921ef11223ed76c36bc0721f97f0a3d1c7565bd04ef444bc2e09a8d30bbc99c",
    "utils/shared_utils.py": "c945b9e1961975a44193f5370e714b912ac6975261519ad8492263aa7d1fbc86",
    "static/index.html": "b60f0ea418d1736ddc220c35285aaa492d56d59b295eb3584100faff6fca97d9",
    "static/css/style.css": "fdc4bde3dd810bfd583bb723f2c02f2e5adce6fd68bc8368e8ca52fd5fa41e66",
    "static/css/network.css": "4f58ceb1f15afd8cfd9739cab3ac695e185df378977780bd4f5cf4e3465f96ab",
    "static/js/main.js": "042107c7a338962bd49b82184cddaebb60d4ee8f7f48b9f80832ead35f5d4d63",
}


class Asset(NamedTuple):
    """One file from an npm package: where it is in the package, where it goes under ``static/``, its hash."""

    package: str
    version: str
    source: str
    target: str
    sha256: str


#: The files of visdom's page (``static/index.html``) that visdom 0.2.4 fetches from CDNs at start-up,
#: and what those load in turn (bootstrap's fonts, MathJax's parts), from the same releases on npm.
ASSETS = [
    Asset("jquery", "3.1.1", "dist/jquery.min.js", "js/jquery.min.js",
          "85556761a8800d14ced8fcd41a6b8b26bf012d44a318866c0d81a62092efd9bf"),
    Asset("bootstrap", "3.3.7", "dist/js/bootstrap.min.js", "js/bootstrap.min.js",
          "53964478a7c634e8dad34ecc303dd8048d00dce4993906de1bacf67f663486ef"),
    Asset("bootstrap", "3.3.7", "dist/css/bootstrap.min.css", "css/bootstrap.min.css",
          "f75e846cc83bd11432f4b1e21a45f31bc85283d11d372f7b19accd1bf6a2635c"),
    Asset("bootstrap", "3.3.7", "dist/fonts/glyphicons-halflings-regular.woff2", "fonts/glyphicons-halflings-regular.woff2",
          "fe185d11a49676890d47bb783312a0cda5a44c4039214094e7957b4c040ef11c"),
    Asset("bootstrap", "3.3.7", "dist/fonts/glyphicons-halflings-regular.woff", "fonts/glyphicons-halflings-regular.woff",
          "a26394f7ede100ca118eff2eda08596275a9839b959c226e15439557a5a80742"),
    Asset("react", "16.2.0", "umd/react.production.min.js", "js/react-react.min.js",
          "c28b91922bca297037cba02ec85c1c0dc179d1a942355f0b6e085f6021fa67df"),
    Asset("react-dom", "16.2.0", "umd/react-dom.production.min.js", "js/react-dom.min.js",
          "f61ac9c43e0842c58774da732e424a606898fd211914925252ac9e64f34a77c8"),
    # The same file as https://cdn.plot.ly/plotly-2.11.1.min.js; plotly.js-dist-min carries only this build
    # (plotly.js@2.11.1's dist/plotly.min.js has the same sha256, in a 20 MB package).
    Asset("plotly.js-dist-min", "2.11.1", "plotly.min.js", "js/plotly-plotly.min.js",
          "dd146b2db18d4ced4743018fa65ada14b723bf1aae08b559a5576ba8116cd889"),
    Asset("layout-bin-packer", "1.4.0", "dist/layout-bin-packer.js", "js/layout_bin_packer.js",
          "312ed1834f78f497ac3c9e943ce4657679d26ad8cd62d7f722912d26c9d0ed29"),
    Asset("d3", "3.5.17", "d3.min.js", "js/d3.v3.min.js",
          "76c39718d1c0a3fb321676b3b7e29306c0907919a5716d5728bd1b08ae0169e7"),
    Asset("d3-selection-multi", "1.0.1", "build/d3-selection-multi.min.js", "js/d3-selection-multi.v1.js",
          "f5dbdedd97d54d99f6e41d545629a1bcf1785dfe6ae9536c6c16ce7eb124966c"),
    Asset("save-svg-as-png", "1.4.17", "lib/saveSvgAsPng.js", "js/saveSvgAsPng.js",
          "71c46f2411daf6ba2a4e38ec563d92f1da42f88da9247a2bdd5c8a10bde93ae3"),
    Asset("react-resizable", "1.4.6", "css/styles.css", "css/react-resizable-styles.css",
          "7c9122a97c86b4be7839fd3d23c37d06aec1ece3ef830f8bae3a8c121056d528"),
    Asset("react-grid-layout", "0.16.3", "css/styles.css", "css/react-grid-layout-styles.css",
          "4ec035a50c31ec008bab5794e88ef056043e63aaa8dcbb24d36e5a73780b4dbc"),
    Asset("mathjax", "2.7.5", "MathJax.js", "js/mathjax/2.7.5/MathJax.js",
          "9ef249bfdc162849bcf2abe8425f5e90bd89fa4fd1588b1a492731c65b2bbfc9"),
    Asset("mathjax", "2.7.5", "config/TeX-AMS-MML_HTMLorMML.js", "js/mathjax/2.7.5/config/TeX-AMS-MML_HTMLorMML.js",
          "f380ca5d5257b34fc5f0e4cccd7e1447dd3dfa3b65e06ed23f2a4f6af17e19f0"),
]

#: Each npm package's licence as committed under ``_vendor/licenses/``. ``None`` as the source: the
#: package ships no licence file (its package.json names the licence), so the text was written from it.
NPM_LICENSES = {
    ("jquery", "3.1.1"): ("LICENSE.txt", "f980a306a01e5881cc8004115f7e6dde44e7f5296477237d37d169a86ce7c094"),
    ("bootstrap", "3.3.7"): ("LICENSE", "8a68c27ad022244b78dc5c9adb4cc5a4c92a994e3e11d356b291f227b2b04eaf"),
    ("react", "16.2.0"): ("LICENSE", "f657f99d3fb9647db92628e96007aabb46e5f04f33e49999075aab8e250ca7ce"),
    ("react-dom", "16.2.0"): ("LICENSE", "f657f99d3fb9647db92628e96007aabb46e5f04f33e49999075aab8e250ca7ce"),
    ("plotly.js-dist-min", "2.11.1"): ("LICENSE", "67a26cf80f03ff388f26945dfc1f6caed1a0746ff43871190339b3aee49b94bb"),
    ("layout-bin-packer", "1.4.0"): (None, "f6d705845627d7f6ea07638dfceee443bbb82ea8802c2cd39d949b4f38919e2a"),
    ("d3", "3.5.17"): ("LICENSE", "e4796bd1fdc09e06a3683957a177d59b38aec4143df81b2d25472438f5763482"),
    ("d3-selection-multi", "1.0.1"): ("LICENSE", "e4796bd1fdc09e06a3683957a177d59b38aec4143df81b2d25472438f5763482"),
    ("save-svg-as-png", "1.4.17"): ("LICENSE", "2441ab817f7521374b8557423d95aafa0ea6bb07b86846befef42101f9c17fce"),
    ("react-resizable", "1.4.6"): (None, "58549978e997f48f54e8d51cddfcf364f2d9fcf8c719da7b51c615ef56a6fc02"),
    ("react-grid-layout", "0.16.3"): ("LICENSE", "3883d1bc08d302413bf1b7a65e4f699f8aa68f96a5b71df3f9a0262a76a65c17"),
    ("mathjax", "2.7.5"): ("LICENSE", "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30"),
}

ABSOLUTE_IMPORT = re.compile(r"^(\s*)(from|import) visdom\b", re.MULTILINE)
MODIFIED_NOTICE = ("# Modified for nectargan-visdom (see nectargan_visdom/_vendor/README.md): imports of the\n"
                   "# `visdom` package made relative, so this copy never loads, nor is shadowed by, an installed visdom.\n")


def license_name(package: str, version: str) -> str:
    return f"{package}-{version}.txt"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def patch_python(relpath: str, text: str) -> str:
    """visdom's absolute ``visdom.`` imports, made relative to where ``relpath`` sits in the package."""
    up = "." * (relpath.count("/") + 1)
    text = text.replace("import visdom.extra_deps.bhtsne.bhtsne as bhtsne",
                        f"from {up}extra_deps.bhtsne import bhtsne  # not vendored: ImportError, handled below")
    text = text.replace("from visdom import server", f"from {up} import server")
    text = re.sub(r"^(\s*)from visdom\.", lambda m: f"{m.group(1)}from {up}", text, flags=re.MULTILINE)
    text = text.replace('cwd = os.path.dirname(importlib.util.find_spec("visdom").origin)',
                        "cwd = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # this copy's root")
    left = ABSOLUTE_IMPORT.findall(text)
    if left or 'find_spec("visdom")' in text:
        raise SystemExit(f"{relpath}: an absolute visdom import is left after patching; extend patch_python")
    if not text.strip():
        return text
    lines = text.splitlines(keepends=True)
    header = 0
    while header < len(lines) and lines[header].startswith("#"):
        header += 1  # after the shebang and the copyright block
    return "".join(lines[:header]) + MODIFIED_NOTICE + "".join(lines[header:])


# -- fetching ------------------------------------------------------------------------------------

def fetch_visdom(scratch: Path) -> dict[str, bytes]:
    """visdom's files from its sdist on PyPI, patched, keyed as in VISDOM_FILES."""
    # pip prepares an sdist's metadata even for `download`; visdom's setup.py needs pkg_resources,
    # which newer setuptools lack, so the build environment gets an older one (maintainers only).
    constraint = scratch / "build-constraint.txt"
    constraint.write_text("setuptools<70\n")
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
                    "--dest", str(scratch), f"visdom=={VISDOM_VERSION}"],
                   check=True, env={**os.environ, "PIP_CONSTRAINT": str(constraint)})
    sdist = scratch / f"visdom-{VISDOM_VERSION}.tar.gz"
    digest = sha256(sdist.read_bytes())
    if digest != VISDOM_SDIST_SHA256:
        raise SystemExit(f"{sdist.name}: sha256 {digest}, expected {VISDOM_SDIST_SHA256}")
    root = f"visdom-{VISDOM_VERSION}"
    files = {}
    with tarfile.open(sdist) as tar:
        for relpath in VISDOM_FILES:
            inside = f"{root}/{relpath}" if relpath in ("LICENSE", "AUTHORS") else f"{root}/py/visdom/{relpath}"
            data = tar.extractfile(inside).read()
            if relpath.endswith(".py"):
                data = patch_python(relpath, data.decode("utf-8")).encode("utf-8")
            files[relpath] = data
    return files


def npm_pack(package: str, version: str, scratch: Path) -> tarfile.TarFile:
    """``npm pack`` (which checks the registry's integrity hash) into scratch, opened."""
    done = subprocess.run(["npm", "pack", "--silent", "--pack-destination", str(scratch), f"{package}@{version}"],
                          check=True, capture_output=True, text=True)
    return tarfile.open(scratch / done.stdout.strip().splitlines()[-1])


def fetch_npm(scratch: Path) -> tuple[dict[str, bytes], dict[str, bytes]]:
    assets, licenses = {}, {}
    packages = dict.fromkeys((a.package, a.version) for a in ASSETS)
    for package, version in packages:
        with npm_pack(package, version, scratch) as tar:
            for asset in ASSETS:
                if (asset.package, asset.version) == (package, version):
                    assets[asset.target] = tar.extractfile(f"package/{asset.source}").read()
            source, _ = NPM_LICENSES[(package, version)]
            if source is not None:
                licenses[license_name(package, version)] = tar.extractfile(f"package/{source}").read()
    return assets, licenses


# -- checking ------------------------------------------------------------------------------------

def expected() -> dict[Path, str]:
    """Every vendored file with its recorded sha256."""
    files = {VISDOM / rel: digest for rel, digest in VISDOM_FILES.items()}
    files.update({STATIC / a.target: a.sha256 for a in ASSETS})
    files.update({LICENSES / license_name(*key): digest for key, (_, digest) in NPM_LICENSES.items()})
    return files


def check(files: dict[Path, bytes]) -> list[str]:
    """Problems with ``files`` (path -> content) against the recorded hashes; [] when all is well."""
    problems = []
    for path, digest in expected().items():
        data = files.get(path)
        shown = path.relative_to(HERE)
        if data is None:
            problems.append(f"{shown}: missing")
        elif sha256(data) != digest:
            problems.append(f"{shown}: sha256 {sha256(data)}, expected {digest}")
    return problems


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="verify the committed files offline; change nothing")
    args = parser.parse_args(argv)
    if args.check:
        on_disk = {path: path.read_bytes() for path in expected() if path.is_file()}
        problems = check(on_disk)
    else:
        with tempfile.TemporaryDirectory(prefix="nectargan-vendor-") as tmp:
            scratch = Path(tmp)
            visdom_files = fetch_visdom(scratch)
            assets, licenses = fetch_npm(scratch)
        fetched = {VISDOM / rel: data for rel, data in visdom_files.items()}
        fetched.update({STATIC / rel: data for rel, data in assets.items()})
        fetched.update({LICENSES / name: data for name, data in licenses.items()})
        written = {path: path.read_bytes() for path in expected() if path.is_file() and path not in fetched}
        problems = check({**written, **fetched})
        if not problems:
            for path, data in fetched.items():
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data)
    for problem in problems:
        print(problem, file=sys.stderr)
    total = sum(path.stat().st_size for path in expected() if path.is_file())
    print(f"{len(expected())} vendored files, {total} bytes: {'OK' if not problems else f'{len(problems)} problem(s)'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
