"""The plugin as users see it: listed by the CLI, cheap to load."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from losses_fixtures import registry_fixture  # noqa: F401 - pytest fixtures

LOSSES = ["l1", "l2", "smooth_l1", "charbonnier", "sobel", "laplacian", "ssim", "vgg",
          "vanilla", "lsgan", "hinge", "wgan-gp"]
SPECS = ["basic", "extended", "basic+vgg", "extended+vgg"]
SCHEDULES = ["constant", "linear", "exponential", "cosine", "warmup", "pix2pix_linear"]


def test_plugins_list_shows_every_part_as_loaded(cli):
    result = cli("plugins", "list", "--json")
    assert result.returncode == 0, result.stderr
    info = next(p for p in json.loads(result.stdout) if p["name"] == "losses")
    assert info["status"] == "loaded" and info["distribution"] == "nectargan-losses"
    assert info["hooks"] == ["register_loss_specs", "register_losses", "register_schedules"]
    assert info["components"] == {"loss": LOSSES, "loss_spec": SPECS, "schedule": SCHEDULES}


def test_plugins_show_marks_gan_objectives(cli):
    result = cli("plugins", "show", "losses", "--json")
    parts = {p["name"]: p for p in json.loads(result.stdout)["parts"] if p["kind"] == "loss"}
    assert [name for name, part in parts.items() if part["gan"]] == ["vanilla", "lsgan", "hinge", "wgan-gp"]


def test_registration_and_config_modules_do_not_import_torch():
    probe = ("import sys, nectargan_losses.plugin, nectargan_losses.config, nectargan_losses.schedules; "
             "print(sorted(m for m in ('torch', 'torchvision', 'torchmetrics') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def doc_row(text: str, name: str) -> str:
    rows = [line for line in text.splitlines() if line.startswith(f"| `{name}` |")]
    assert len(rows) == 1, name
    return rows[0]


def test_docs_list_every_part_with_its_options_and_defaults(registry):
    text = (Path(__file__).resolve().parents[2] / "docs" / "plugins" / "losses.md").read_text()
    for kind in ("loss", "schedule"):
        for component in registry.all(kind):
            if component.provider != "losses":
                continue
            row = doc_row(text, component.name)
            model = component.options
            if model is None:
                assert "| none |" in row, component.name
                continue
            for name, field in model.model_fields.items():
                if field.is_required():
                    assert f"`{name}` (required" in row, (component.name, name)
                else:
                    default = json.dumps(field.get_default(call_default_factory=True))
                    assert f"`{name}` = `{default}`" in row, (component.name, name, default)
    for component in registry.all("loss_spec"):
        row = doc_row(text, component.name)
        for base in ("extended", "basic"):  # "extended + ..." rows list only the added terms
            if f"| {base} + " in row:
                row += doc_row(text, base)
        for name, term in component.load().terms.items():
            suffix = " (D)" if term.role == "discriminator" else ""
            assert f"`{name}` = {term.weight:g} · {term.loss}{suffix}" in row, (component.name, name)
