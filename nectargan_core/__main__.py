"""``python -m nectargan_core`` runs the CLI (used under torchrun)."""

from .cli.main import main

if __name__ == "__main__":  # pragma: no cover
    main()
