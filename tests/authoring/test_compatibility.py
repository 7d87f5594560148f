"""The promises of docs/plugins/compatibility.md, checked against the installed pluggy, and the CLI docs."""

from __future__ import annotations

import pluggy
import pytest

from nectargan_core import hookimpl, hookspec
from nectargan_core.hookspecs import PROJECT_NAME
from support import ROOT


class Specs:
    @hookspec
    def on_epoch_end(self, trainer, epoch, metrics, duration):
        """A release added ``duration``."""

    @hookspec(warn_on_impl=DeprecationWarning("on_batch_end is deprecated"))
    def on_batch_end(self, trainer):
        """A hook on its way out."""


def manager() -> pluggy.PluginManager:
    pm = pluggy.PluginManager(PROJECT_NAME)
    pm.add_hookspecs(Specs)
    return pm


def test_a_new_argument_reaches_only_implementations_that_name_it():
    seen = []

    class Old:
        @hookimpl
        def on_epoch_end(self, epoch):
            seen.append(("old", epoch))

    class New:
        @hookimpl
        def on_epoch_end(self, epoch, duration):
            seen.append(("new", epoch, duration))

    pm = manager()
    pm.register(Old())
    pm.register(New())
    pm.hook.on_epoch_end(trainer=None, epoch=3, metrics={}, duration=1.5)
    assert sorted(seen) == [("new", 3, 1.5), ("old", 3)]


def test_a_deprecated_hook_warns_when_a_plugin_implements_it():
    class Late:
        @hookimpl
        def on_batch_end(self):
            pass

    with pytest.warns(DeprecationWarning, match="on_batch_end is deprecated"):
        manager().register(Late())


def test_the_cli_reference_documents_the_author_commands():
    text = (ROOT / "docs" / "cli.md").read_text()
    for command in ("plugins new", "plugins install", "plugins uninstall"):
        assert f"## `nectargan {command}`" in text
    index = (ROOT / "docs" / "index.md").read_text()
    assert "(plugins/tutorial.md)" in index and "(plugins/compatibility.md)" in index
