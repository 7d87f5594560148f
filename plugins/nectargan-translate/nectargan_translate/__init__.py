"""NectarGAN translate: what image-to-image translation trainers share, whatever their networks."""
