"""Plugin discovery, isolation of broken plugins, and the NECTARGAN_* switches."""

from __future__ import annotations

import importlib
import json

import pytest

from nectargan_core.errors import PluginError

GOOD = """
from nectargan_core import hookimpl

class Options:
    pass

@hookimpl
def register_losses(register):
    register("fake_abs", "fake_good:abs_loss", description="absolute error")

def abs_loss():
    return lambda a, b: abs(a - b)
"""


def test_installed_distribution_is_discovered(host_factory):
    host = host_factory()
    info = host.get("toy")
    assert info.status == "loaded"
    assert info.distribution == "nectargan-toy"
    assert info.version == "0.1.0"
    assert "register_trainers" in info.hooks
    assert {c.name for c in info.components} >= {"toy", "toy_linear", "toy_mse", "recorder"}
    # the distribution name works as well as the entry-point name
    assert host.get("nectargan-toy") is info
    assert host.registry.get("trainer", "toy").provider == "toy"


def test_core_builtins_register_like_plugins(host_factory):
    info = host_factory().get("core")
    assert info.builtin and info.status == "loaded"
    assert [c.name for c in info.components] == ["console"]


def test_fake_dist_info_plugin_is_listed_and_usable(fake_dist, host_factory):
    fake_dist("fake-good", "fake_good", GOOD)
    host = host_factory()
    info = host.get("fake_good")
    assert info.status == "loaded" and info.distribution == "fake-good"
    loss = host.registry.get("loss", "fake_abs").load()()
    assert loss(5, 7) == 2


BROKEN = {
    "import": ("fake-import", "fake_import", "raise ImportError('missing dependency foo')\n",
               "import of 'fake_import' failed: ImportError: missing dependency foo"),
    "registered-twice-by-itself": ("fake-twice", "fake_twice", """
        from nectargan_core import hookimpl
        @hookimpl
        def register_losses(register):
            register("twice", "torch.nn:L1Loss")
            register("twice", "torch.nn:MSELoss")
        """, "loss 'twice' is registered twice by plugin 'fake_twice' (fake-twice)"),
    "missing-class": ("fake-nocls", "fake_nocls", """
        from nectargan_core import hookimpl
        @hookimpl
        def register_visualizers(register):
            register("nocls", "fake_nocls:Missing")
        """, "visualizer 'nocls': module 'fake_nocls' has no class 'Missing'"),
    "argument": ("fake-arg", "fake_arg", """
        from nectargan_core import hookimpl
        @hookimpl
        def register_models(registrar):
            pass
        """, "fake_arg.py:3: register_models(registrar): argument 'registrar' is not in the spec "
             "register_models(register); did you mean 'register'?"),
    "unknown-hook": ("fake-hook", "fake_hook", """
        from nectargan_core import hookimpl
        @hookimpl
        def register_model(register):
            pass
        """, "fake_hook.py:3: hook 'register_model' is not a nectargan hook; did you mean 'register_models'?"),
    "run-hook-on-module": ("fake-runhook", "fake_runhook", """
        from nectargan_core import hookimpl
        @hookimpl
        def on_epoch_end(trainer):
            pass
        """, "hook 'on_epoch_end' is a run hook"),
    "raises": ("fake-raise", "fake_raise", """
        from nectargan_core import hookimpl
        @hookimpl
        def register_losses(register):
            register("half_done", "fake_raise:x")
            raise RuntimeError("boom")
        """, "registration failed: RuntimeError: boom"),
    "bad-name": ("fake-name", "fake_name", """
        from nectargan_core import hookimpl
        @hookimpl
        def register_losses(register):
            register("1 bad name", "fake_name:x")
        """, "invalid loss name '1 bad name'"),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_broken_plugin_is_reported_and_others_keep_working(case, fake_dist, host_factory):
    dist, module, source, message = BROKEN[case]
    fake_dist(dist, module, source)
    host = host_factory()
    info = host.get(module)
    assert info.status == "error"
    assert message in info.error
    assert host.get("toy").status == "loaded"
    assert host.registry.get("trainer", "toy").provider == "toy"
    # nothing of a failed plugin stays registered
    assert not host.registry.provided_by(module)
    with pytest.raises(PluginError, match="NECTARGAN_STRICT_PLUGINS"):
        host_factory(NECTARGAN_STRICT_PLUGINS="1")


def test_broken_plugin_in_cli_list_warns_once_and_exits_zero(fake_dist, cli, tmp_path):
    root = fake_dist("fake-import", "fake_import", "raise ImportError('missing dependency foo')\n")
    result = cli("plugins", "list", "--json", env={"PYTHONPATH": str(root)})
    assert result.returncode == 0, result.stderr
    listed = {p["name"]: p for p in json.loads(result.stdout)}
    assert listed["fake_import"]["status"] == "error"
    assert "missing dependency foo" in listed["fake_import"]["error"]
    assert listed["toy"]["status"] == "loaded"
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and "fake_import" in warnings[0]
    assert "Traceback" not in result.stderr
    # --help still works, and strict mode turns the failure into an error exit
    assert cli("--help", env={"PYTHONPATH": str(root)}).returncode == 0
    strict = cli("plugins", "list", env={"PYTHONPATH": str(root), "NECTARGAN_STRICT_PLUGINS": "1"})
    assert strict.returncode != 0
    assert strict.stderr.startswith("error: plugin 'fake_import'")
    assert "Traceback" not in strict.stderr


SIDE_EFFECT = """
import pathlib, os
pathlib.Path(os.environ["MARKER"]).write_text("imported")
from nectargan_core import hookimpl
@hookimpl
def register_losses(register):
    register("marker_loss", "x:y")
"""


@pytest.mark.parametrize("blocked", ["fake_marker", "fake-marker", "FAKE_MARKER"])
def test_disabled_plugin_is_never_imported(blocked, fake_dist, host_factory, tmp_path, monkeypatch):
    marker = tmp_path / "marker"
    monkeypatch.setenv("MARKER", str(marker))
    fake_dist("fake-marker", "fake_marker", SIDE_EFFECT)
    host = host_factory(NECTARGAN_DISABLE_PLUGINS=f"something-else,{blocked}", MARKER=str(marker))
    assert host.get("fake_marker").status == "disabled"
    assert not marker.exists()
    assert not host.registry.has("loss", "marker_loss")
    assert host.get("toy").status == "loaded"


def test_allow_list_loads_only_named_plugins_and_the_core(fake_dist, host_factory, tmp_path, monkeypatch):
    marker = tmp_path / "marker"
    monkeypatch.setenv("MARKER", str(marker))
    fake_dist("fake-marker", "fake_marker", SIDE_EFFECT)
    host = host_factory(NECTARGAN_LOAD_PLUGINS="nectargan-toy")
    assert host.get("toy").status == "loaded"
    assert host.get("core").status == "loaded"
    assert host.get("fake_marker").status == "not-allowed"
    assert not marker.exists()
    empty = host_factory(NECTARGAN_LOAD_PLUGINS="")
    assert empty.get("toy").status == "not-allowed"
    assert empty.get("core").status == "loaded"


def test_trace_prints_every_hook_call(cli):
    result = cli("plugins", "list", env={"NECTARGAN_TRACE_PLUGINS": "1"})
    assert result.returncode == 0
    traced = [line for line in result.stderr.splitlines() if line.startswith("nectargan trace:")]
    assert any("register_trainers(register) -> [toy]" in line for line in traced)
    assert any("register_visualizers(register) -> [core]" in line for line in traced)


def test_plugins_show_and_unknown_name(cli):
    shown = cli("plugins", "show", "nectargan-toy", "--json")
    assert shown.returncode == 0
    data = json.loads(shown.stdout)
    assert data["name"] == "toy"
    assert {p["name"] for p in data["parts"]} >= {"toy", "recorder", "toy_extra"}
    missing = cli("plugins", "show", "toyy")
    assert missing.returncode == 1
    assert missing.stderr.strip() == "error: no plugin named 'toyy' (did you mean 'toy'?); see 'nectargan plugins list --all'"


def test_plugin_command_is_added(cli):
    result = cli("toy-hello", "--name", "tester")
    assert result.returncode == 0 and result.stdout.strip() == "hello tester from toy"
    assert "toy-hello" in cli("--help").stdout


def test_list_hides_builtins_unless_all(cli):
    plain = json.loads(cli("plugins", "list", "--json").stdout)
    everything = json.loads(cli("plugins", "list", "--json", "--all").stdout)
    assert "core" not in {p["name"] for p in plain}
    assert "core" in {p["name"] for p in everything}


@pytest.mark.parametrize("dependency, line", [
    ("import json\njson.string_  # as tensorboard 2.16 with numpy 2: np.string_ is gone\n",
     "importing fake_dep failed: module 'json' has no attribute 'string_'; install a version of fake_dep that "
     "works with the installed packages (usually a newer one: pip install -U fake_dep), or disable that plugin"),
    ("import fake_not_installed\n",
     "No module named 'fake_not_installed'; install it (pip install fake_not_installed), or disable that plugin"),
    (None, "module 'types' has no attribute 'NoSuchType'; reinstall or disable that plugin"),
], ids=["broken-dependency", "missing-dependency", "own-bug"])
def test_a_part_that_cannot_be_loaded_says_whose_fault_it_is(fake_dist, tmp_path, dependency, line):
    """"Reinstall that plugin" was the advice for every failure, also when a dependency of the plugin failed."""
    from nectargan_core import Run

    source = ("import fake_dep\n" if dependency is not None else "") + \
        "from nectargan_core import hookimpl\nclass Viz:\n    pass\n" + \
        "@hookimpl\ndef register_visualizers(register):\n    register('fakeviz', 'fake_viz_mod:Viz')\n"
    viz_module = "fake_viz_mod"
    fake_dist("fake-viz", "fake_viz_plugin", "from nectargan_core import hookimpl\n"
              "@hookimpl\ndef register_visualizers(register):\n"
              f"    register('fakeviz', '{viz_module}:{'Viz' if dependency is not None else 'broken'}')\n")
    if dependency is not None:
        (tmp_path / "site" / "fake_dep.py").write_text(dependency)
    (tmp_path / "site" / f"{viz_module}.py").write_text(source if dependency is not None else
                                                        "import types\nbroken = types.NoSuchType\n")
    config = {"trainer": "toy", "run": {"output_dir": str(tmp_path / "runs"), "device": "cpu"},
              "toy": {"samples": 2, "batch_size": 2, "val_samples": 0}, "visualizers": ["fakeviz"]}
    importlib.invalidate_caches()  # the folder's listing may be cached from within the same mtime tick
    with pytest.raises(PluginError) as caught:
        Run.create(config)
    assert str(caught.value) == f"visualizer 'fakeviz' from plugin 'fake_viz_plugin' cannot be loaded: {line}"
