"""The run configuration: one validated pydantic model, assembled from plugins.

The core owns the sections ``run``, ``loop``, ``checkpoint`` and
``distributed`` and the keys ``trainer``, ``visualizers`` and ``callbacks``.
The selected trainer adds its own top-level sections (the fields of its
``options`` model), plugins add sections through ``register_config_sections``,
and every named part chosen in the config (a model, a visualizer, ...)
validates its options against the model it registered. Any mistake is
reported with its key path, e.g. ``loop.epochs: Input should be greater than 0
(got -1)``.

One concept per module, each importing only those above it:

- :mod:`.strict`: no silent coercion (pydantic's lax mode would read ``'3'`` or
  ``true`` as numbers), integers within 64 bits;
- :mod:`.messages`: validation errors as one line each, with the key path;
- :mod:`.choices`: fields that name registered parts and validate their options;
- :mod:`.overrides`: ``--set KEY=VALUE``;
- :mod:`.sections`: ``Section`` and the core's sections;
- :mod:`.assembly`: the run's model, from the core, the trainer and plugins;
- :mod:`.loading`: config files and :func:`load_config`;
- :mod:`.starter`: ``nectargan config init``'s commented starter file.

Internal, as every submodule of ``nectargan_core``: plugins import the public
names from ``nectargan_core`` (``Section``, ``choice_of``, ``load_config``...).
"""

from __future__ import annotations

from .strict import KEYED_ERROR, OverrideText, at_key, is_subclass, refuse_coercion, scalar_kinds, within_int64
from .messages import PART_OPTION, allowed_keys, describe_errors, origin_of
from .choices import ComponentChoice, choice_of, name_of, names_to_dict, parts_of, registry_from, validate_options
from .overrides import KEY_PATTERN, apply_overrides, parse_override_value, read_override
from .sections import (DEVICE_PATTERN, MAX_DEVICE_INDEX, MAX_TIMEOUT_S, CheckpointSection, CoreConfig,
                       DistributedSection, LoopSection, PrecisionSection, RunSection, Section, plain_name)
from .assembly import build_config_model, derived_keys, validate_config
from .loading import CONFIG_SUFFIXES, DuplicateKeyError, dump_yaml, load_config, load_file, parse_file
from .starter import starter_yaml
