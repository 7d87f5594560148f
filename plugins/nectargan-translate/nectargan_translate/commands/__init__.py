"""The ``test``, ``predict`` and ``export`` commands (click only; torch loads when one runs)."""

from .export_cmd import export_command
from .predict_cmd import predict_command
from .test_cmd import test_command

COMMANDS = (test_command, predict_command, export_command)

__all__ = ["COMMANDS", "export_command", "predict_command", "test_command"]
