"""Static scan: no code-execution or unsafe-deserialisation calls in shipped source.

An AST scan (not grep), so ``module.eval()`` is fine while a bare ``eval(...)``
is not. A regression anywhere in nectargan_core/ or plugins/*/ fails CI.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from support import ROOT


def sources() -> list[Path]:
    roots = [ROOT / "nectargan_core", *sorted((ROOT / "plugins").glob("*/nectargan_*"))]
    return [p for root in roots for p in sorted(root.rglob("*.py")) if "build" not in p.parts]


def dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Attribute):
        return f"{dotted(node.value)}.{node.attr}"
    return node.id if isinstance(node, ast.Name) else ""


def keyword(call: ast.Call, name: str) -> ast.AST | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def is_true(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is True


#: torchvision's native image decoders: untrusted bytes must not reach them (class 2 of issue 13).
TORCHVISION_DECODERS = {"decode_image", "decode_png", "decode_jpeg", "decode_webp", "decode_gif", "decode_avif",
                        "decode_heic"}


def problem(call: ast.Call) -> str | None:
    """Why this call is unsafe, or None."""
    name = dotted(call.func)
    if name in ("eval", "exec", "compile", "os.system", "os.popen", "yaml.unsafe_load", "yaml.full_load",
                "pickle.load", "pickle.loads", "marshal.load", "marshal.loads", "shelve.open", "dill.load"):
        return f"{name}()"
    if name.startswith(("torchvision.io.", "io.decode_")) or name in TORCHVISION_DECODERS:
        return f"{name}(): image bytes reach torchvision's decoders (one damaged PNG byte segfaulted them); use Pillow"
    if is_true(keyword(call, "shell")):
        return f"{name}(shell=True)"
    if name == "torch.load":
        return None if is_true(keyword(call, "weights_only")) else "torch.load() without weights_only=True"
    if name == "yaml.load":
        loader = keyword(call, "Loader") or (call.args[1] if len(call.args) > 1 else None)
        return None if loader is not None and "Safe" in dotted(loader) else "yaml.load() without a SafeLoader"
    return None


def scan(text: str) -> list[str]:
    tree = ast.parse(text)
    calls = [f"line {node.lineno}: {why}" for node in ast.walk(tree)
             if isinstance(node, ast.Call) and (why := problem(node))]
    imports = [f"line {node.lineno}: import from torchvision.io (its image decoders are not safe on damaged bytes)"
               for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module == "torchvision.io"]
    return calls + imports


def test_the_scan_covers_the_code():
    files = sources()
    assert any(p.name == "checkpoint.py" for p in files) and any("nectargan_pix2pix" in p.parts for p in files)


@pytest.mark.parametrize("snippet", [
    "eval(cfg)", "exec(code)", "import os\nos.system('ls')", "subprocess.run(cmd, shell=True)",
    "pickle.load(f)", "torch.load(p)", "torch.load(p, weights_only=False)", "yaml.load(s)",
    "yaml.load(s, Loader=yaml.Loader)", "yaml.unsafe_load(s)", "torchvision.io.decode_image(data)",
    "torchvision.io.read_image(p)", "from torchvision.io import decode_png", "decode_png(data)",
])
def test_the_scan_finds_unsafe_calls(snippet):
    assert scan(snippet)


@pytest.mark.parametrize("snippet", [
    "model.eval()", "torch.load(p, map_location='cpu', weights_only=True)", "yaml.safe_load(s)",
    "yaml.load(s, Loader=yaml.SafeLoader)", "subprocess.run(['git', 'status'])", "read_image(path)",
    "Image.open(path)",
])
def test_the_scan_allows_safe_calls(snippet):
    assert not scan(snippet)


def test_no_unsafe_calls_in_shipped_source():
    found = [f"{path.relative_to(ROOT)} {hit}" for path in sources() for hit in scan(path.read_text())]
    assert not found, "unsafe calls:\n" + "\n".join(found)
