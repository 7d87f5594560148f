"""NectarGAN pix2pix: paired image datasets, their tools, and the pix2pix trainer."""
