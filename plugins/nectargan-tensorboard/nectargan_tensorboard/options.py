"""Options of the tensorboard visualizer (torch-free, so listing plugins stays fast)."""

from __future__ import annotations

import string
from typing import Annotated, Optional

from pydantic import Field, field_validator

from nectargan_core import MAX_SECONDS, SECONDS_WHY, Section, at_most

#: Placeholders a ``log_dir`` may use, filled from the run when training starts.
LOG_DIR_FIELDS = ("name", "version")


class TensorBoardOptions(Section):
    """Where the event files go and what is written to them."""

    log_dir: Optional[str] = Field(
        None, description="Folder of the event files (null: <run_dir>/tensorboard); {name} and {version} "
                          "are filled from the run",
    )
    flush_secs: Annotated[int, at_most(int(MAX_SECONDS), SECONDS_WHY)] = Field(30, gt=0, description="Write buffered events to disk at least this often (seconds)")
    details: bool = Field(False, description="Also write dotted detail keys (G/l1.raw, D/gan_d.weight)")
    images_every_epochs: Optional[int] = Field(
        1, gt=0, description="Add the newest example grid every N epochs (null: never)"
    )

    @field_validator("log_dir")
    @classmethod
    def _placeholders(cls, value: Optional[str]) -> Optional[str]:
        """Catch a misspelt placeholder when the config is read, not when training starts."""
        if value is None:
            return value
        try:
            fields = [field for _, field, _, _ in string.Formatter().parse(value) if field is not None]
        except ValueError as exc:
            raise ValueError(f"{exc} (write {{{{ or }}}} for a literal brace)") from None
        unknown = [field for field in fields if field not in LOG_DIR_FIELDS]
        if unknown:
            allowed = ", ".join(f"{{{name}}}" for name in LOG_DIR_FIELDS)
            raise ValueError(f"unknown placeholder {{{unknown[0]}}}; use {allowed}")
        return value
