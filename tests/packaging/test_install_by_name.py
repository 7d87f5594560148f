"""`pip install nectargan-pix2pix`, by name, from an index, into an environment that already has torch.

What users will type once the distributions are on PyPI, done here against a
PEP 503 index served on 127.0.0.1: the wheels and sdists that
``.ci/release.py build`` makes (checked with ``twine check --strict``), plus
the third-party wheels they need at the versions this test environment runs.
The fresh virtual environment has no checkout to fall back on (pip is given
that index only, with no config file, find-links or constraints), and it
already has its own torch and torchvision (a GPU image, a cluster module):
installing NectarGAN must keep them as they are. It runs on the user's Python,
not this test's: ``NECTARGAN_USER_PYTHON`` (CI sets Python 3.13, the newest
the distributions claim; the suite itself runs on 3.11 and the floors job on
3.10), else this interpreter. Then the commands a user runs
next: plugins list, a short train, test, predict, export (ONNX, from the
``[onnx]`` extra), a CycleGAN run, the TensorBoard visualizer and the docs
tools' extra.
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
import sys
import tarfile
import threading
import zipfile
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from support import ROOT

pytestmark = pytest.mark.slow

#: What the user's machine brings; never part of the index, never replaced.
OWN_TORCH = ("torch", "torchvision")
#: The interpreter of the user's environment (see the module docstring).
USER_PYTHON = os.environ.get("NECTARGAN_USER_PYTHON") or sys.executable
#: What the user asks for by name.
WANTED = ("nectargan-pix2pix[onnx]", "nectargan-cyclegan", "nectargan-visdom", "nectargan-tensorboard",
          "nectargan-core[docs]")


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def third_party_pins(ours: set[str]) -> list[str]:
    """``name==version`` of every distribution our wanted ones need, as installed here; torch's subtree excluded."""
    pins: dict[str, str] = {}
    todo = [Requirement(text) for text in WANTED]
    seen: set[tuple[str, frozenset[str]]] = set()
    while todo:
        requirement = todo.pop()
        name = _normalize(requirement.name)
        key = (name, frozenset(requirement.extras))
        if name in OWN_TORCH or key in seen:
            continue
        seen.add(key)
        dist = metadata.distribution(name)
        if name not in ours:
            pins[name] = dist.version
        for text in dist.requires or []:
            child = Requirement(text)
            if child.marker is None or any(child.marker.evaluate({"extra": extra})
                                           for extra in (requirement.extras or {""})):
                todo.append(child)
    return [f"{name}=={version}" for name, version in sorted(pins.items())]


@pytest.fixture(scope="module")
def index_url(tmp_path_factory):
    """The index, served over HTTP on 127.0.0.1 for this module's tests."""
    work = tmp_path_factory.mktemp("index")
    dist, files, index = work / "dist", work / "files", work / "simple"
    built = subprocess.run([sys.executable, str(ROOT / ".ci" / "release.py"), "build", "--out", str(dist),
                            "--no-isolation"], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr[-3000:]
    names = {p.name for p in dist.iterdir()}
    for project in ("nectargan_core", "nectargan_models", "nectargan_losses", "nectargan_pix2pix",
                    "nectargan_cyclegan", "nectargan_visdom", "nectargan_tensorboard"):
        assert {f"{project}-0.1.0-py3-none-any.whl", f"{project}-0.1.0.tar.gz"} <= names, sorted(names)
    for wheel in dist.glob("*.whl"):  # the licence text travels with every wheel (and sdist)
        with zipfile.ZipFile(wheel) as archive:
            assert any(n.endswith((".dist-info/licenses/LICENSE", ".dist-info/LICENSE")) for n in archive.namelist()), \
                wheel.name
    for sdist in dist.glob("*.tar.gz"):
        with tarfile.open(sdist) as archive:
            assert any(n.endswith("/LICENSE") and n.count("/") == 1 for n in archive.getnames()), sdist.name
    ours = {_normalize(name.split("-")[0]) for name in names}
    # The third-party files come from the registries this machine's pip knows (CI has them too).
    downloaded = subprocess.run(  # wheels for the user's Python: the versions this environment runs
        [USER_PYTHON, "-m", "pip", "download", "--no-deps", "--quiet", "-d", str(files),
         *third_party_pins(ours)], capture_output=True, text=True, env=_without_pip_settings(keep_config=True))
    assert downloaded.returncode == 0, downloaded.stderr[-3000:]
    for path in dist.iterdir():
        os.link(path, files / path.name)
    subprocess.run([sys.executable, str(ROOT / ".ci" / "release.py"), "index", str(files), str(index)], check=True)
    handler = functools.partial(_QuietHandler, directory=str(index))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    thread.join(10)


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - http.server's signature
        pass


def _without_pip_settings(keep_config: bool = False) -> dict[str, str]:
    """This environment minus pip's settings (constraints, find-links, extra indexes), config files and any
    PYTHONPATH (the fresh environment must not see this checkout)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PIP_", "NECTARGAN_", "VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME"))}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    if not keep_config:
        env["PIP_CONFIG_FILE"] = os.devnull  # no config file at all: only the index we name
    return env


def _run(command: list[str], cwd: Path, env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess:
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, f"{' '.join(command)}\n{result.stdout[-2000:]}\n{result.stderr[-3000:]}"
    return result


def _torch_files(venv: Path) -> dict[str, float]:
    site = next(venv.glob("lib/python*/site-packages"))
    infos = [site / p.name for name in OWN_TORCH for p in site.glob(f"{name}-*.dist-info")]
    return {p.name: p.stat().st_mtime for p in infos} | \
        {"torch/__init__.py": (site / "torch" / "__init__.py").stat().st_mtime}


def test_a_fresh_environment_installs_by_name_keeps_its_torch_and_works(index_url, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([USER_PYTHON, "-m", "venv", str(venv)], check=True)
    python, bin_dir = venv / "bin" / "python", venv / "bin"
    version = _run([str(python), "-c", "import sys; print(sys.version.split()[0])"], tmp_path, os.environ.copy())
    print(f"user's Python: {USER_PYTHON} ({version.stdout.strip()})")
    # The machine's own torch, installed the way its owner did (from PyPI, or this machine's local files).
    own = [f"{name}=={metadata.version(name).split('+')[0]}" for name in OWN_TORCH]
    _run([str(python), "-m", "pip", "install", "--quiet", *own], tmp_path, _without_pip_settings(keep_config=True))
    before = _torch_files(venv)

    env = _without_pip_settings()
    installed = _run([str(python), "-m", "pip", "install", "--index-url", index_url, *WANTED], tmp_path, env)
    assert not re.search(r"^\s*(Collecting|Downloading) (\S*/)?torch(vision)?([-<>=!~ \[]|$)", installed.stdout,
                         re.M), installed.stdout
    done = [line for line in installed.stdout.splitlines() if line.startswith("Successfully installed")]
    assert done and "nectargan-pix2pix-0.1.0" in done[0] and not re.search(r" torch(vision)?-\d", done[0]), done
    assert _torch_files(venv) == before  # the machine's torch, untouched
    check = _run([str(python), "-m", "pip", "check"], tmp_path, env)
    assert "No broken requirements" in check.stdout

    work = tmp_path / "work"
    work.mkdir()
    env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
    nectargan = str(bin_dir / "nectargan")
    listing = _run([nectargan, "plugins", "list"], work, env).stdout
    for plugin in ("pix2pix", "cyclegan", "models", "losses", "visdom", "tensorboard"):
        assert re.search(rf"^{plugin} \(nectargan-{plugin} 0\.1\.0\) \[loaded\]$", listing, re.M), listing
    assert str(ROOT) not in _run([str(python), "-c", "import nectargan_core, nectargan_pix2pix; "
                                  "print(nectargan_core.__file__, nectargan_pix2pix.__file__)"], work, env).stdout

    _run([nectargan, "data", "synth", "data/synth", "--count", "40"], work, env)
    _run([nectargan, "train", "--preset", "pix2pix-tiny", "--set", "data.root=data/synth", "--set", "loop.epochs=1",
          "--set", "visualizers=[console, tensorboard]"], work, env)
    run = work / "runs" / "run" / "version_0"
    assert list((run / "tensorboard").glob("events.out.tfevents.*")), sorted(run.iterdir())
    tested = _run([nectargan, "test", str(run)], work, env)
    assert "psnr" in tested.stdout.lower()
    _run([nectargan, "predict", str(run), "data/synth/test", "-o", "predicted"], work, env)
    assert len(list((work / "predicted").glob("*.png"))) == len(list((work / "data/synth/test").glob("*.png")))
    exported = _run([nectargan, "export", str(run), "--format", "onnx"], work, env)
    assert "onnxruntime" in exported.stdout + exported.stderr
    assert len(list((run / "export").glob("*.onnx"))) == 1, sorted(run.rglob("*"))

    _run([nectargan, "data", "synth", "data/shapes", "--unpaired", "--count", "20", "--size", "32"], work, env)
    _run([nectargan, "train", "--trainer", "cyclegan", "--set", "data.root=data/shapes", "--set", "run.name=cycle",
          "--set", "loop.max_steps=2", "--set", "data.load_size=32", "--set", "data.crop_size=32",
          "--set", "models.generator={name: resnet_6blocks, ngf: 8}", "--set", "models.discriminator={ndf: 8}"],
         work, env)
    assert (work / "runs" / "cycle" / "version_0" / "status.json").is_file()
    assert _run([str(bin_dir / "mkdocs"), "--version"], work, env).stdout.startswith("mkdocs, version")
