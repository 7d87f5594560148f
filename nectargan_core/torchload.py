"""Loading torch, or saying in one line why it cannot load, before any of it is mapped.

Under an address-space limit (``ulimit -v``) below what ``import torch``
maps, the import fails inside the dynamic loader: an ImportError traceback
("failed to map segment from shared object"), or, a little higher, an abort
in the C runtime with no Python frame at all ("cannot allocate memory for
thread-local data"), which no handler can turn into a message. So the
commands that need torch check the limit they can see first, and turn a
torch that fails to import for any other reason into one line too.
"""

from __future__ import annotations

import sys
from types import ModuleType

from .errors import NectarGANError

#: Address space ``import torch`` needs (torch 2.14, x86_64 CPU build, measured: the import failed under a limit of
#: 3 GiB, with an ImportError at 2 GiB and an abort at 3 GiB, and loaded at 4 GiB; training needs more).
TORCH_ADDRESS_SPACE = 4 * 1024 ** 3


def address_space_limit() -> int | None:
    """This process's soft address-space limit in bytes (``ulimit -v``), or None when there is none."""
    try:
        import resource
    except ImportError:  # not on this platform
        return None
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    return None if soft == resource.RLIM_INFINITY else soft


def require_torch(command: str) -> ModuleType:
    """torch, imported; a NectarGANError naming ``command`` and what to change when it cannot be."""
    if "torch" in sys.modules:
        return sys.modules["torch"]
    limit = address_space_limit()
    if limit is not None and limit < TORCH_ADDRESS_SPACE:
        more = ", and training needs more" if command.endswith(" train") else ""
        raise NectarGANError(
            f"{command}: the address-space limit (ulimit -v) is {limit // 1024} KiB, below the "
            f"{TORCH_ADDRESS_SPACE // 1024} KiB torch needs to load{more}; raise it "
            "(ulimit -v unlimited) or run where it is higher")
    try:
        import torch
    except ImportError:  # not installed, or a library missing: the CLI's import-error line says what to install
        raise
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - whatever else a broken torch raises while it loads
        first = next((line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
        raise NectarGANError(f"{command}: torch cannot be imported ({type(exc).__name__}: {first}); reinstall it "
                             "(pip install --force-reinstall torch), check the libraries it needs, or raise the "
                             "memory limits (ulimit -v, ulimit -d)") from None
    return torch
