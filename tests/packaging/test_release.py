"""`.ci/release.py`: one version for every distribution, and its mistakes said in one line."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

from support import ROOT


def copy_of_the_repository(tmp_path: Path) -> Path:
    """What release.py reads: the pyproject.toml files and the script itself."""
    copy = tmp_path / "repo"
    (copy / ".ci").mkdir(parents=True)
    shutil.copy2(ROOT / ".ci" / "release.py", copy / ".ci" / "release.py")
    shutil.copy2(ROOT / "pyproject.toml", copy / "pyproject.toml")
    for path in ROOT.glob("plugins/*/pyproject.toml"):
        (copy / path.parent.relative_to(ROOT)).mkdir(parents=True)
        shutil.copy2(path, copy / path.relative_to(ROOT))
    return copy


def release(repo: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(repo / ".ci" / "release.py"), *args], capture_output=True, text=True,
                          timeout=120)


def test_a_new_version_reaches_every_distribution_and_pin_and_nothing_else(tmp_path):
    repo = copy_of_the_repository(tmp_path)
    before = {p: tomllib.loads(p.read_text())["project"] for p in repo.rglob("pyproject.toml")}
    done = release(repo, "version", "9.8.7rc1")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "version 9.8.7rc1 set in 8 distributions; add a '## 9.8.7rc1' section to CHANGELOG.md\n"
    for path, old in before.items():
        new = tomllib.loads(path.read_text())["project"]
        assert new["name"] == old["name"] and new["version"] == "9.8.7rc1", path
        for key in ("dependencies", "optional-dependencies", "classifiers", "description"):
            if key == "dependencies":
                expected = [r.replace("==0.1.0", "==9.8.7rc1") for r in old[key]]
                assert new[key] == expected, path
            else:
                assert new.get(key) == old.get(key) or key == "optional-dependencies", path
    pix2pix = tomllib.loads((repo / "plugins/nectargan-pix2pix/pyproject.toml").read_text())["project"]
    assert {"nectargan-core==9.8.7rc1", "nectargan-models==9.8.7rc1", "nectargan-losses==9.8.7rc1"} <= \
        set(pix2pix["dependencies"])
    checked = release(repo, "check")
    assert (checked.returncode, checked.stdout) == (0, "8 distributions at version 9.8.7rc1\n"), checked.stderr


def test_check_names_a_distribution_out_of_step(tmp_path):
    repo = copy_of_the_repository(tmp_path)
    path = repo / "plugins/nectargan-visdom/pyproject.toml"
    path.write_text(path.read_text().replace('version = "0.1.0"', 'version = "0.1.1"', 1)
                    .replace('"nectargan-core==0.1.0"', '"nectargan-core"'))
    checked = release(repo, "check")
    assert checked.returncode == 1
    assert checked.stderr.splitlines() == [
        "error: plugins/nectargan-visdom/pyproject.toml: version 0.1.1 but nectargan-core is 0.1.0",
        "error: plugins/nectargan-visdom/pyproject.toml: 'nectargan-core' must pin nectargan-core==0.1.0 "
        "(released together)",
    ]


def test_mistakes_are_one_line(tmp_path):
    repo = copy_of_the_repository(tmp_path)
    stale = tmp_path / "dist"
    stale.mkdir()
    (stale / "nectargan_core-0.0.9-py3-none-any.whl").write_bytes(b"")
    cases = [
        (["build", "--out", str(stale)], 1, f"error: {stale} holds other files "
         "(nectargan_core-0.0.9-py3-none-any.whl); remove them or build into another --out, so that an upload of "
         "the folder publishes only this version"),
        (["build", "--out", str(stale / "nectargan_core-0.0.9-py3-none-any.whl")], 1,
         f"error: {stale / 'nectargan_core-0.0.9-py3-none-any.whl'}: not a folder; name a folder for the "
         "distributions with --out"),
        (["index", str(stale), str(stale / "simple")], 1, f"error: {stale / 'simple'}: inside {stale}; write the "
         f"index elsewhere, so that an upload of {stale} publishes only distributions"),
        (["index", str(repo / ".ci"), str(tmp_path / "index")], 1, f"error: {repo / '.ci' / 'release.py'}: not a "
         "wheel or sdist file name (name-version[-tags].whl or name-version.tar.gz); remove it from the folder"),
        (["index", str(tmp_path / "none"), str(tmp_path / "index")], 1,
         f"error: {tmp_path / 'none'}: no such folder; build first: python .ci/release.py build --out "
         f"{tmp_path / 'none'}"),
        (["version", "two"], 1, "error: 'two' is not a version like 1.2.3 or 1.2.3rc1"),
        (["build", "--bogus"], 2, "error: unrecognized arguments: --bogus; see: python .ci/release.py --help"),
        (["index"], 2, "error: the following arguments are required: dist, index; see: python .ci/release.py index "
                       "--help"),
    ]
    for args, code, line in cases:
        done = release(repo, *args)
        assert (done.returncode, done.stderr, done.stdout) == (code, line + "\n", ""), args
    assert not (tmp_path / "index").exists()
    assert release(repo, "build", "--help").stdout.startswith("usage: release.py build")



def test_odd_spellings_of_a_pin_are_set_too_and_anything_version_cannot_set_is_refused(tmp_path):
    repo = copy_of_the_repository(tmp_path)
    pix2pix = repo / "plugins/nectargan-pix2pix/pyproject.toml"
    text = pix2pix.read_text()
    assert '"nectargan-models==0.1.0"' in text and '"nectargan-losses==0.1.0"' in text
    pix2pix.write_text(text.replace('"nectargan-models==0.1.0"', '"NectarGAN_Models == 0.1.0"'))
    translate = repo / "plugins/nectargan-translate/pyproject.toml"
    translate.write_text(translate.read_text().replace('onnx = ["onnx', 'onnx = ["nectargan-losses==0.1.0", "onnx'))
    done = release(repo, "version", "0.2.0")
    assert done.returncode == 0, done.stderr
    project = tomllib.loads(pix2pix.read_text())["project"]
    assert "nectargan-models==0.2.0" in project["dependencies"]
    assert project["optional-dependencies"]["onnx"] == ["nectargan-translate[onnx]==0.2.0"]  # an extra of a sibling
    extra = tomllib.loads(translate.read_text())["project"]["optional-dependencies"]["onnx"]
    assert extra[0] == "nectargan-losses==0.2.0"

    core = repo / "pyproject.toml"
    core.write_text(core.read_text().replace('"nectargan-core[docs]"', '"nectargan-core[docs]==0.2.0"'))
    visdom = repo / "plugins/nectargan-visdom/pyproject.toml"
    visdom.write_text(visdom.read_text().replace('    "nectargan-core==0.2.0",\n', ""))
    checked = release(repo, "check")
    assert checked.returncode == 1
    assert checked.stderr.splitlines() == [
        "error: pyproject.toml: 'nectargan-core[docs]==0.2.0' names its own distribution: drop the version",
        "error: plugins/nectargan-visdom/pyproject.toml: the dependencies must require nectargan-core==0.2.0",
    ]
    models = repo / "plugins/nectargan-models/pyproject.toml"
    models.write_text(models.read_text().replace('version = "0.2.0"', 'dynamic = ["version"]'))
    bumped = release(repo, "version", "0.3.0")
    assert (bumped.returncode, bumped.stderr) == (
        1, "error: plugins/nectargan-models/pyproject.toml: no 'version = \"...\"' line to set\n")
