"""Presets: named run configs that plugins contribute through ``register_presets``.

A preset is a mapping of config values, like a config file, that names its
trainer; keys it leaves out keep their defaults. ``nectargan config init
--preset NAME`` writes it out as a complete, commented config. A trainer's
plugin registers the recipes that belong to it (``pix2pix-reference`` comes
with nectargan-pix2pix), so the core holds no list of them.
"""

from __future__ import annotations

import copy
from typing import Any, Mapping

from .errors import ConfigError, PluginError
from .registry import Registry


def preset_data(registry: Registry, name: str) -> dict[str, Any]:
    """A copy of preset ``name``'s config values; a one-line error for an unknown or malformed preset."""
    try:
        component = registry.get("preset", name, key="--preset")
    except PluginError as exc:
        raise ConfigError(str(exc)) from None
    data = component.load()
    if not isinstance(data, Mapping) or not isinstance(data.get("trainer"), str):
        raise PluginError(f"preset '{name}' from {component.provided_by} is not a config mapping that names its "
                          "trainer; report this to the plugin's authors")
    return copy.deepcopy(dict(data))
