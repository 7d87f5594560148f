"""How much of each generated series a test run takes.

By default every series runs a small seeded sample (the CI run). Set
``NECTARGAN_LONG_SERIES=1`` to run the long series as well: the tests marked
``slow`` that skip without it (hundreds of image mutants, every signal and
worker combination at several random steps, both ranks stopped).
``NECTARGAN_SERIES_SEED=N`` draws another sample (the default seed is fixed,
so a failure reproduces).
"""

from __future__ import annotations

import os
from typing import Any

import pytest

LONG = os.environ.get("NECTARGAN_LONG_SERIES", "") not in ("", "0")
SEED = int(os.environ.get("NECTARGAN_SERIES_SEED", "0") or 0)



def long_series(test: Any) -> Any:
    """Mark a test of the long series: slow, and skipped unless NECTARGAN_LONG_SERIES=1."""
    skip = pytest.mark.skipif(not LONG, reason="long series: set NECTARGAN_LONG_SERIES=1 to run it")
    return pytest.mark.slow(skip(test))
