"""The presets this plugin registers: recipes as config values (torch-free, read when a preset is asked for).

``pix2pix-reference`` is the training and test recipe of the pix2pix reference
(junyanz/pytorch-CycleGAN-and-pix2pix, ``train.py --model pix2pix`` and
``test.py --model pix2pix`` with their defaults), key by key:

* ``--n_epochs 100 --n_epochs_decay 100 --lr_policy linear``: 200 epochs, the
  LR constant for 100 and decaying linearly over 100 (``pix2pix_linear``).
* ``--lr 0.0002 --beta1 0.5``: Adam for G and D, betas (0.5, 0.999), picking its
  kernel as ``torch.optim.Adam(params, lr, betas)`` does (``default``).
* ``--netG unet_256 --netD basic --norm batch --ngf 64 --ndf 64``, dropout on,
  ``--init_type normal --init_gain 0.02``; fp32 (no autocast).
* ``--gan_mode vanilla --lambda_L1 100``: the ``basic`` loss spec.
* ``--dataset_mode aligned --direction AtoB --batch_size 1 --load_size 286
  --crop_size 256`` with flips, resized by PIL through 8 bits.
* ``test.py``: ``load_size`` = ``crop_size`` = 256 (a plain resize, no crop, no
  flip), batch 1, the first 50 images (``--num_test 50``), and no ``eval()``:
  dropout on and batch statistics (``test.mode: train``).
* The reference never validates, and saves every 5 epochs.
"""

from __future__ import annotations

from typing import Any

from nectargan_translate import reference_recipe

#: ``train.py``/``test.py`` of the reference with ``--model pix2pix`` and its defaults.
PIX2PIX_REFERENCE: dict[str, Any] = reference_recipe(
    "pix2pix",
    data={"name": "paired", "layout": "aligned"},
    models={
        "generator": {"name": "unet_256", "norm": "batch", "ngf": 64, "dropout_layers": 3, "dropout": 0.5,
                      "init": "normal", "init_gain": 0.02},
        "discriminator": {"name": "patchgan_70", "norm": "batch", "ndf": 64, "n_layers": 3, "conditional": True,
                          "init": "normal", "init_gain": 0.02},
    },
    loss={"spec": "basic", "gan_mode": "vanilla"},
    optim={"d_every": 1, "g_every": 1},
)

#: A run that takes seconds on a CPU, for tests of plugins used under pix2pix (the ``tiny_config("pix2pix")``
#: fixture of nectargan_core.testing starts from it): 32x32 images in the main process, a 5-level UNet and a
#: 2-layer PatchGAN 8 channels wide, batches of 4. Give it a dataset with ``data.root``.
PIX2PIX_TINY: dict[str, Any] = {
    "trainer": "pix2pix",
    "data": {
        "name": "paired",
        "load_size": 32,
        "crop_size": 32,
        "batch_size": 4,
        "num_workers": 0,
        "persistent_workers": False,
        "val": {"batch_size": 4},
        "test": {"batch_size": 4},
    },
    "models": {
        "generator": {"name": "unet", "depth": 5, "ngf": 8, "max_width": 32},
        "discriminator": {"name": "patchgan", "n_layers": 2, "ndf": 8, "max_width": 32},
    },
    "examples": {"count": 2},
}
