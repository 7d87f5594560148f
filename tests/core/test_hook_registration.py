"""Registering a part with a plugin manager runs none of its code, whatever the pluggy release.

pluggy up to 1.6 found hook implementations with ``getattr``, which ran a
trainer's properties before ``setup()`` ("'Pix2pixTrainer' object has no
attribute 'val_set'" on every ``nectargan train``); 1.7 uses
``inspect.getattr_static``. The ``getattr_discovery`` fixture puts the old
discovery back into whichever pluggy is installed, so these tests fail without
the hook proxy on every release. The floors CI job runs the CLI suite on the
oldest pluggy declared.
"""

from __future__ import annotations

import inspect

import pluggy
import pytest

from nectargan_core import Run, hookimpl
from nectargan_core.hookproxy import MARKER, HookProxy, hook_implementations, part_of, proxy_for
from nectargan_core.hookspecs import PROJECT_NAME, RunSpecs


def _old_parse_hookimpl_opts(self, plugin, name):
    """pluggy 1.3-1.6's ``PluginManager.parse_hookimpl_opts``, word for word in effect."""
    method = getattr(plugin, name)
    if not inspect.isroutine(method):
        return None
    try:
        res = getattr(method, self.project_name + "_impl", None)
    except Exception:
        res = {}
    if res is not None and not isinstance(res, dict):
        res = None
    return res


@pytest.fixture
def getattr_discovery(monkeypatch):
    monkeypatch.setattr(pluggy.PluginManager, "parse_hookimpl_opts", _old_parse_hookimpl_opts)


class Trap:
    """A part whose every dynamic attribute raises: a property, ``__getattr__`` and ``__dir__``."""

    def __init__(self):
        self.seen = []

        def on_log(record):  # a function stored on the instance: Python does not bind it
            self.seen.append(("on_log", record["step"]))

        self.on_log = hookimpl(on_log)

    @property
    def val_set(self):
        raise AttributeError("'Trap' object has no attribute 'val_set'")

    def __getattr__(self, name):
        raise RuntimeError(f"__getattr__({name!r}) ran")

    def __dir__(self):
        raise RuntimeError("__dir__ ran")

    @hookimpl
    def on_epoch_end(self, epoch):
        self.seen.append(("on_epoch_end", epoch))

    @hookimpl
    @staticmethod
    def on_train_start(trainer):
        Trap.started.append(trainer.name)

    @hookimpl(specname="on_validation_end")
    def _after_validation(self, epoch):  # any marked name counts, as in pluggy
        self.seen.append(("on_validation_end", epoch))

    def not_a_hook(self):
        raise AssertionError("never called")


Trap.started = []


def test_hooks_are_found_without_running_the_part():
    trap = Trap()
    found = hook_implementations(trap)
    assert sorted(found) == ["_after_validation", "on_epoch_end", "on_log", "on_train_start"]
    found["on_epoch_end"][0](epoch=4)  # bound to the instance, as getattr would bind it
    found["on_log"][0]({"step": 9})
    found["_after_validation"][0](epoch=5)
    assert trap.seen == [("on_epoch_end", 4), ("on_log", 9), ("on_validation_end", 5)]
    assert inspect.ismethod(found["on_epoch_end"][0])
    assert not inspect.ismethod(found["on_train_start"][0]) and not inspect.ismethod(found["on_log"][0])
    for function, options in found.values():
        assert getattr(function, MARKER) is options  # what a getattr-based pluggy reads


def test_a_marker_above_staticmethod_is_carried_to_the_registered_function():
    class Above:
        @staticmethod
        def on_train_end(trainer):
            return "ended"

    holder = Above.__dict__["on_train_end"]
    setattr(holder, MARKER, {"tryfirst": True})  # hookimpl applied above @staticmethod
    function, options = hook_implementations(Above())["on_train_end"]
    assert options == {"tryfirst": True} and getattr(function, MARKER) == options
    assert function(trainer=None) == "ended"


def test_modules_and_classes_are_read_the_same_way(tmp_path, monkeypatch):
    module = tmp_path / "lazy_plugin.py"
    module.write_text(
        "from nectargan_core import hookimpl\n"
        "@hookimpl\n"
        "def register_losses(register):\n"
        "    pass\n"
        "def __getattr__(name):\n"
        "    raise RuntimeError('module __getattr__ ran')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    import lazy_plugin

    assert list(hook_implementations(lazy_plugin)) == ["register_losses"]
    on_class = hook_implementations(Trap)  # a class: its functions unbound, as getattr gives them
    assert sorted(on_class) == ["_after_validation", "on_epoch_end", "on_train_start"]
    assert not inspect.ismethod(on_class["on_epoch_end"][0])


def test_the_proxy_holds_only_hooks_and_reads_the_rest_from_the_part(getattr_discovery):
    trap = Trap()
    proxy = proxy_for(trap, "callback 'trap'")
    assert isinstance(proxy, HookProxy) and part_of(proxy) is trap and part_of(trap) is trap
    assert not hasattr(proxy, "seen")  # nothing is forwarded: pluggy's hasattr() must not reach the part
    pm = pluggy.PluginManager(PROJECT_NAME)
    pm.add_hookspecs(RunSpecs)
    pm.register(proxy, name="callback:trap")
    assert sorted(c.name for c in pm.get_hookcallers(proxy)) == [
        "on_epoch_end", "on_log", "on_train_start", "on_validation_end"]
    pm.hook.on_epoch_end(trainer=None, epoch=1, metrics={}, duration=0.5)
    assert trap.seen == [("on_epoch_end", 1)]
    unnamed = proxy_for(Trap(), "callback 'unnamed'")  # pluggy names it from __name__: the proxy's, not the part's
    pm.register(unnamed)
    assert pm.get_name(unnamed) == str(id(unnamed))


def test_registering_the_part_itself_fails_under_getattr_discovery(getattr_discovery):
    """The fixture is a faithful stand-in: without the proxy, registration runs the property."""
    pm = pluggy.PluginManager(PROJECT_NAME)
    pm.add_hookspecs(RunSpecs)
    with pytest.raises(RuntimeError, match="(__dir__|__getattr__).* ran"):
        pm.register(Trap())

    class PropertyOnly:
        @property
        def val_set(self):
            raise AttributeError("'PropertyOnly' object has no attribute 'val_set'")

    with pytest.raises(AttributeError, match="val_set"):
        pm.register(PropertyOnly())


def test_a_run_registers_trainer_callbacks_and_api_plugins_without_running_them(
        getattr_discovery, tiny_config, tiny_paired_dataset):
    """The reported failure: pix2pix's trainer, under getattr discovery, trains."""
    trap = Trap()
    Trap.started.clear()
    config = tiny_config("pix2pix", data={"root": str(tiny_paired_dataset)}, loop={"epochs": 2})
    config["callbacks"] = {}
    run = Run.create(config, plugins=[trap]).fit()
    assert [entry for entry in trap.seen if entry[0] == "on_epoch_end"] == [("on_epoch_end", 0), ("on_epoch_end", 1)]
    assert any(entry[0] == "on_log" for entry in trap.seen)
    assert ("on_validation_end", 1) in trap.seen
    assert Trap.started == ["pix2pix"]
    assert run.metrics()[-1]["epoch"] == 1
    assert isinstance(run.pm.get_plugin("trainer:pix2pix"), HookProxy)


TRAPPED_PARTS = """
from nectargan_core import hookimpl

class NeedsRun:
    def __init__(self, **options):
        self.records = 0

    @property
    def board(self):  # only valid once the run started
        raise AttributeError("'NeedsRun' object has no attribute 'board'")

    @hookimpl
    def on_log(self, record):
        self.records += 1

    @hookimpl
    def on_train_end(self, trainer):
        (trainer.run_dir.path / "trapped-parts.txt").write_text(f"{type(self).__name__} {self.records}")

class TrappedVisualizer(NeedsRun):
    pass

class TrappedCallback(NeedsRun):
    pass

@hookimpl
def register_visualizers(register):
    register("trapped", "fake_trapped:TrappedVisualizer", description="a visualizer with a property")

@hookimpl
def register_callbacks(register):
    register("trapped", "fake_trapped:TrappedCallback", description="a callback with a property")
"""


@pytest.mark.parametrize("kind", ["visualizers", "callbacks"])
def test_installed_visualizers_and_callbacks_train_under_getattr_discovery(
        getattr_discovery, fake_dist, tmp_path, kind, cli):
    fake_dist("fake-trapped", "fake_trapped", TRAPPED_PARTS)
    config = {
        "trainer": "toy",
        "run": {"output_dir": str(tmp_path / "runs"), "name": "toy", "seed": 3, "device": "cpu"},
        "loop": {"epochs": 1, "log_every_steps": 1},
        "toy": {"samples": 4, "batch_size": 2, "val_samples": 2},
        "visualizers": [],
        kind: ["trapped"],
    }
    run = Run.create(config).fit()
    assert (run.dir / "trapped-parts.txt").read_text() == f"Trapped{kind[:-1].title()} 2"
    assert isinstance(run.pm.get_plugin(f"{kind[:-1]}:trapped"), HookProxy)


class _LoudMeta(type):
    def __getattr__(cls, name):
        raise RuntimeError(f"metaclass __getattr__({name!r}) ran")


class MetaPart(metaclass=_LoudMeta):
    """Looking an attribute up on the class (hasattr(type(part), '__get__')) would run the metaclass."""

    def __init__(self):
        self.epochs = []

    @hookimpl
    def on_epoch_end(self, epoch):
        self.epochs.append(epoch)


class ClassMethodAbove:
    """The marker above @classmethod: pluggy 1.7 registers it bound to the class."""

    seen: list = []

    @hookimpl
    @classmethod
    def on_train_start(cls, trainer):
        cls.seen.append(trainer.name)


def _toy_config(tmp_path):
    return {"trainer": "toy", "run": {"output_dir": str(tmp_path / "runs"), "name": "toy", "seed": 3, "device": "cpu"},
            "loop": {"epochs": 2, "log_every_steps": 1}, "toy": {"samples": 4, "batch_size": 2, "val_samples": 2},
            "visualizers": []}


@pytest.mark.parametrize("discovery", ["installed", "getattr"])
def test_a_metaclass_getattr_and_a_marker_above_classmethod_register_like_pluggy_1_7(discovery, request, tmp_path):
    if discovery == "getattr":
        request.getfixturevalue("getattr_discovery")
    meta, ClassMethodAbove.seen = MetaPart(), []
    Run.create(_toy_config(tmp_path), plugins=[meta, ClassMethodAbove()]).fit()
    assert meta.epochs == [0, 1]
    assert ClassMethodAbove.seen == ["toy"]


LAZY_MODULE_PLUGIN = """
from nectargan_core import hookimpl

@hookimpl
def register_losses(register):
    register("lazy_l1", "torch.nn:L1Loss", description="an L1 loss from a plugin with a module __getattr__")

def __getattr__(name):  # PEP 562: a lazily importing plugin module
    if name.startswith("__") and name.endswith("__"):
        raise AttributeError(name)
    raise RuntimeError(f"module __getattr__({name!r}) ran while plugins loaded")
"""


@pytest.mark.parametrize("discovery", ["installed", "getattr"])
def test_a_plugin_module_getattr_never_runs_and_blames_nobody(discovery, request, fake_dist, host_factory, cli):
    """pluggy <= 1.6's subset_hook_caller asks hasattr(plugin, hook) of every registered plugin: with the proxy
    forwarding to the module, its __getattr__ ran and the other plugins' registrations failed."""
    if discovery == "getattr":
        request.getfixturevalue("getattr_discovery")
        monkeypatch = request.getfixturevalue("monkeypatch")
        monkeypatch.setattr(pluggy.PluginManager, "subset_hook_caller", _old_subset_hook_caller)
    site = fake_dist("fake-lazy", "fake_lazy", LAZY_MODULE_PLUGIN)
    host = host_factory()
    broken = {key: info.errors for key, info in host.plugins.items() if info.status != "loaded"}
    assert broken == {}
    assert host.registry.get("loss", "lazy_l1").provider == "fake_lazy"
    if discovery == "installed":  # and the CLI, in a real process, with its commands from every plugin
        listed = cli("plugins", "list", env={"PYTHONPATH": str(site)})
        assert listed.returncode == 0 and "fake_lazy (fake-lazy 0.1) [loaded]" in listed.stdout, listed.stderr


def _old_subset_hook_caller(self, name, remove_plugins):
    """pluggy 1.3-1.6's first step of ``subset_hook_caller``: it asks every plugin to remove ``hasattr(plug, name)``."""
    {plug for plug in remove_plugins if hasattr(plug, name)}  # noqa: B018 - the lookup is the point
    return _NEW_SUBSET(self, name, remove_plugins)


_NEW_SUBSET = pluggy.PluginManager.subset_hook_caller
