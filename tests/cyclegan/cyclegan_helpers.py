"""Settings shared by the CycleGAN tests (a module of its own: ``from conftest import`` depends on which
conftest pytest loaded last)."""

#: A ResNet of 2 blocks and 8 base channels (inputs: multiples of 4), a 2-layer PatchGAN of 8 channels.
TINY_MODELS = {"generator": {"name": "resnet", "n_blocks": 2, "ngf": 8},
               "discriminator": {"ndf": 8, "n_layers": 2}}
TINY_SETTINGS = ("models.generator.name=resnet", "models.generator.n_blocks=2", "models.generator.ngf=8",
                 "models.discriminator.ndf=8", "models.discriminator.n_layers=2")
