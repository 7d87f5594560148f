"""The presets this plugin registers: recipes as config values (torch-free, read when a preset is asked for).

``cyclegan-reference`` is the training and test recipe of the CycleGAN
reference (junyanz/pytorch-CycleGAN-and-pix2pix, ``train.py --model cycle_gan``
and ``test.py --model cycle_gan`` with their defaults), key by key:

* ``--n_epochs 100 --n_epochs_decay 100 --lr_policy linear``: 200 epochs, the
  LR constant for 100 and decaying linearly over 100 (``pix2pix_linear``).
* ``--lr 0.0002 --beta1 0.5``: one Adam over G_A and G_B, one over D_A and D_B,
  betas (0.5, 0.999), picking its kernel as ``torch.optim.Adam(params, lr, betas)``
  does (``default``).
* ``--netG resnet_9blocks --netD basic --norm instance --ngf 64 --ndf 64``, no
  dropout (the cycle_gan model sets ``--no_dropout``), ``--init_type normal
  --init_gain 0.02``; fp32 (no autocast).
* ``--gan_mode lsgan --lambda_A 10 --lambda_B 10 --lambda_identity 0.5
  --pool_size 50``.
* ``--dataset_mode unaligned --direction AtoB --batch_size 1 --load_size 286
  --crop_size 256`` with flips and a random B per item, resized by PIL through 8 bits.
* ``test.py``: ``load_size`` = ``crop_size`` = 256 (a plain resize, no crop, no
  flip), batch 1, B in order, the first 50 images (``--num_test 50``), and no
  ``eval()`` (``test.mode: train``; with instance norm and no dropout the same).
* The reference never validates, and saves every 5 epochs.
"""

from __future__ import annotations

from typing import Any

from nectargan_translate import reference_recipe

#: ``train.py``/``test.py`` of the reference with ``--model cycle_gan`` and its defaults (the values shared with
#: ``--model pix2pix`` are ``nectargan_translate.presets.REFERENCE_COMMON``).
CYCLEGAN_REFERENCE: dict[str, Any] = reference_recipe(
    "cyclegan",
    data={"name": "unpaired", "serial": False},
    models={
        "generator": {"name": "resnet_9blocks", "norm": "instance", "ngf": 64, "dropout": 0.0, "init": "normal",
                      "init_gain": 0.02},
        "discriminator": {"name": "patchgan_70", "norm": "instance", "ndf": 64, "n_layers": 3, "conditional": False,
                          "init": "normal", "init_gain": 0.02},
    },
    loss={"gan_mode": "lsgan", "lambda_A": 10.0, "lambda_B": 10.0, "lambda_identity": 0.5},
    pool={"size": 50},
)
