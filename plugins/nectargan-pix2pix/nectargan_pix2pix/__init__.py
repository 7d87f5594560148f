"""NectarGAN pix2pix: paired image-to-image translation with a conditional GAN (Isola et al., 2017)."""
