"""NectarGAN CycleGAN: unpaired image-to-image translation (Zhu et al., 2017) and unpaired datasets."""
