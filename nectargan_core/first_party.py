"""What the project's own plugin distributions provide, for one hint: which one to install.

A user who follows the CycleGAN guide with only ``nectargan-pix2pix`` installed
gets ``unknown trainer 'cyclegan'``; naming the distribution saves a search.
This is data, not a dependency: the core imports none of these plugins, and
``tests/packaging/test_first_party.py`` checks the table against what the
installed distributions really register, so it cannot drift.
"""

from __future__ import annotations

#: distribution -> kind -> names; "command" is a top-level ``nectargan`` command, "plugin" the entry-point name.
PROVIDED: dict[str, dict[str, frozenset[str]]] = {
    "nectargan-pix2pix": {
        "plugin": frozenset({"pix2pix"}),
        "trainer": frozenset({"pix2pix"}),
        "preset": frozenset({"pix2pix-reference", "pix2pix-tiny"}),
    },
    "nectargan-cyclegan": {
        "plugin": frozenset({"cyclegan"}),
        "trainer": frozenset({"cyclegan"}),
        "preset": frozenset({"cyclegan-reference"}),
    },
    "nectargan-translate": {
        "plugin": frozenset({"translate"}),
        "dataset": frozenset({"paired", "unpaired"}),
        "metric": frozenset({"l1", "psnr", "ssim"}),
        "command": frozenset({"data", "test", "predict", "export"}),
    },
    "nectargan-models": {
        "plugin": frozenset({"models"}),
        "model": frozenset({"unet_256", "unet_128", "unet", "resnet_9blocks", "resnet_6blocks", "resnet",
                            "patchgan_70", "patchgan", "patchgan_multiscale", "pixelgan"}),
        "command": frozenset({"models"}),
    },
    "nectargan-losses": {
        "plugin": frozenset({"losses"}),
        "loss": frozenset({"l1", "l2", "smooth_l1", "charbonnier", "sobel", "laplacian", "ssim", "vgg", "vanilla",
                           "lsgan", "hinge", "wgan-gp"}),
        "loss_spec": frozenset({"basic", "extended", "basic+vgg", "extended+vgg"}),
        "schedule": frozenset({"constant", "linear", "exponential", "cosine", "warmup", "pix2pix_linear"}),
    },
    "nectargan-visdom": {"plugin": frozenset({"visdom"}), "visualizer": frozenset({"visdom"}),
                         "command": frozenset({"visdom"})},
    "nectargan-tensorboard": {"plugin": frozenset({"tensorboard"}), "visualizer": frozenset({"tensorboard"})},
}


def provider_hint(kind: str, name: str) -> str | None:
    """``it comes with nectargan-cyclegan: pip install nectargan-cyclegan``, or None for a name of nobody's."""
    for distribution, kinds in PROVIDED.items():
        if name in kinds.get(kind, ()):
            return f"it comes with {distribution}: pip install {distribution}"
    return None
