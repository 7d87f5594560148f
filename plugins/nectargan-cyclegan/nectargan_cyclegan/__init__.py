"""NectarGAN CycleGAN: unpaired image-to-image translation with cycle consistency (Zhu et al., 2017)."""
