"""Live training plots in visdom for NectarGAN runs, sent without ever slowing training."""
