"""Helpers for presets of image-translation trainers: the part of the reference's recipe every model shares.

The pix2pix/CycleGAN reference (junyanz/pytorch-CycleGAN-and-pix2pix) gives
``--model pix2pix`` and ``--model cycle_gan`` the same base, train and test
options; :data:`REFERENCE_COMMON` is that part as config values, and
:func:`reference_recipe` adds a model's own sections to it (torch-free).
"""

from __future__ import annotations

import copy
from typing import Any

#: What the reference's ``train.py``/``test.py`` set alike for ``--model pix2pix`` and ``--model cycle_gan``
#: (its base, train and test options): the part of ``pix2pix-reference`` and ``cyclegan-reference`` they share.
REFERENCE_COMMON: dict[str, Any] = {
    "loop": {"epochs": 200, "val_every_epochs": None},
    "checkpoint": {"every_epochs": 5},
    "data": {
        "direction": "AtoB",
        "in_channels": 3,
        "out_channels": 3,
        "load_size": 286,
        "crop_size": 256,
        "interpolation": "bicubic",
        "resize_rounding": "uint8",
        "augment": [{"name": "hflip", "p": 0.5}],
        "batch_size": 1,
        "shuffle": True,
        "drop_last": False,
        "val": {"batch_size": 1, "preprocess": "resize"},
        "test": {"batch_size": 1, "preprocess": "resize", "max_images": 50},
    },
    "optim": {
        "lr_g": 2e-4, "lr_d": 2e-4, "beta1": 0.5, "beta2": 0.999, "weight_decay": 0.0,
        "implementation": "default",
        "lr_schedule": {"name": "pix2pix_linear", "n_epochs": 100, "n_epochs_decay": 100, "epoch_count": 1},
        "lr_schedule_d": None,
        "gradient_accumulation": 1, "grad_clip": None,
    },
    "precision": {"amp": "off", "channels_last": False, "compile": "off"},
    "validation": {"eval_mode": False},
    "test": {"mode": "train"},
}


def reference_recipe(trainer: str, **sections: dict[str, Any]) -> dict[str, Any]:
    """A reference recipe for ``trainer``: :data:`REFERENCE_COMMON` with each of ``sections`` added to its section.

    A section's keys are added to (or replace) the common section's keys; a
    section the common part lacks (``models``, ``loss``) is taken as given.
    """
    recipe: dict[str, Any] = {"trainer": trainer, **copy.deepcopy(REFERENCE_COMMON)}
    for name, values in sections.items():
        recipe[name] = {**recipe.get(name, {}), **values}
    return recipe
