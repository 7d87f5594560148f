"""``python -m nectargan_core`` runs the CLI (used under torchrun)."""

from .cli.main import main
from .launchfolder import recording_exit_code

if __name__ == "__main__":  # pragma: no cover
    with recording_exit_code():
        main()
