"""Bounds on config and command-line values, so that a value that validates cannot exhaust the machine.

``data.num_workers: 1000000000`` is a valid integer, and it forks until memory
runs out. Every value whose size turns into processes, threads, memory or
waiting is bounded here, once, and config models and commands reuse the same
types: :data:`Seed`, :data:`ImageSide`, :data:`Workers`, :data:`Threads`,
:data:`Seconds` (pydantic) and :class:`BoundedInt` (click). A value out of
bounds is refused when the config is read, before any run directory exists,
with the reason in the one-line message. The config file as a whole is bounded
too (:func:`check_data`): its size, nesting depth and number of values, the
length of every text, and the characters in it.

The limits and their reasons are listed in docs/config.md ("Limits").
"""

from __future__ import annotations

import math
import os
from typing import Annotated, Any, Callable, Iterator, Optional, Union

import click
from pydantic import AfterValidator, Field

from .text import describe_char, printable, unsafe_char

MAX_CONFIG_BYTES = 1 << 20
"""Largest config file read (bytes). Real configs are a few kilobytes."""
MAX_DEPTH = 32
"""Deepest nesting of mappings and lists in a config (the deepest shipped structure has 7 levels)."""
MAX_VALUES = 10_000
"""Most values (keys, scalars, lists, mappings) a config may hold once YAML aliases are expanded. A pix2pix config
with every part switched on has under 1000."""
MAX_TEXT = 4096
"""Longest text value or key in a config (characters): PATH_MAX on Linux."""
MAX_NAME_BYTES = 255
"""Longest name that becomes one folder entry (run.name, split folders): the file name limit of Linux, macOS and
Windows file systems (NAME_MAX), in UTF-8 bytes."""
MAX_IMAGE_SIDE = 8192
"""Largest image side (pixels): the largest power of two whose square stays under Pillow's decompression-bomb limit
(89.5 megapixels), which refuses bigger images anyway."""
MAX_SEED = 2**32 - 1
"""Largest run seed: NumPy's seed range; the per-epoch, per-rank and per-worker seeds derived from it (``seed *
1000003 + epoch`` and similar) stay inside torch's 64-bit seed range."""
MIN_INT, MAX_INT = -(2**63), 2**63 - 1
"""Every integer of a config fits a signed 64-bit integer (torch and NumPy integers, JSON readers)."""
MAX_SECONDS = 86_400.0
"""Longest wait any option may ask for (seconds): one day."""
MAX_BATCH = 65_536
"""Largest batch: torch builds a list of batch-size entries per batch, and no device holds more images at once."""
PROCESSES_PER_CPU = 4
"""Processes and threads per CPU that ``data.num_workers``, ``run.threads`` and ``--nproc`` may use."""

SEED_WHY = "NumPy seeds are 32-bit, and the seeds derived from it must stay within torch's 64-bit range"
IMAGE_WHY = (f"the largest image side NectarGAN handles; Pillow refuses images over 89.5 megapixels "
             f"({MAX_IMAGE_SIDE}x{MAX_IMAGE_SIDE} is 67)")
"""Why no image side may exceed :data:`MAX_IMAGE_SIDE`: the reason an error gives with the bound."""
BATCH_WHY = "larger batches only allocate (torch builds a list of batch-size entries per batch)"
SECONDS_WHY = "a wait longer than a day is a mistake, and longer timeouts overflow the operating system's"
"""Why no wait may exceed :data:`MAX_SECONDS`: the reason an error gives with the bound."""


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity mask, e.g. under taskset or a container's cpuset)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):  # macOS, Windows
        return os.cpu_count() or 1


def process_limit() -> int:
    """Most worker processes, threads or training processes: :data:`PROCESSES_PER_CPU` per usable CPU."""
    return PROCESSES_PER_CPU * usable_cpus()


def processes_why() -> str:
    cpus = usable_cpus()
    return (f"{PROCESSES_PER_CPU} per CPU, and this machine lets NectarGAN use {cpus} CPU{'s' if cpus != 1 else ''}; "
            "more processes or threads only compete for the same CPUs and memory")


def at_most(limit: Union[int, float, Callable[[], Union[int, float]]], why: Union[str, Callable[[], str]]) -> Any:
    """``Annotated`` metadata: a value above ``limit`` is refused with ``why`` in the message.

    ``limit`` and ``why`` may be callables, for limits that depend on the machine
    validating the config (the number of CPUs).
    """

    def check(value: Any) -> Any:
        top = limit() if callable(limit) else limit
        if value is not None and value > top:
            reason = why() if callable(why) else why
            raise ValueError(f"must be at most {top} (got {value}): {reason}")
        return value

    return AfterValidator(check)


Seed = Annotated[int, Field(ge=0, json_schema_extra={"maximum": MAX_SEED}), at_most(MAX_SEED, SEED_WHY)]
"""The run seed."""
ImageSide = Annotated[int, Field(ge=1, json_schema_extra={"maximum": MAX_IMAGE_SIDE}),
                      at_most(MAX_IMAGE_SIDE, IMAGE_WHY)]
"""A side of an image in pixels (resize and crop sizes)."""
Batch = Annotated[int, Field(ge=1, json_schema_extra={"maximum": MAX_BATCH}), at_most(MAX_BATCH, BATCH_WHY)]
"""Images per batch."""
Workers = Annotated[int, Field(ge=0), at_most(process_limit, processes_why)]
"""DataLoader worker processes (0: load in the main process)."""
Threads = Annotated[int, Field(ge=1), at_most(process_limit, processes_why)]
"""Threads of one process."""
Seconds = Annotated[float, Field(json_schema_extra={"maximum": MAX_SECONDS}), at_most(MAX_SECONDS, SECONDS_WHY)]
"""A duration in seconds (give the lower bound, gt=0 or ge=0, at the field)."""


def check_name(value: str) -> str:
    """``value`` if it can name one folder entry, else a ValueError saying why."""
    if "/" in value or "\\" in value or value in {".", ".."}:
        raise ValueError("must be a plain name without path separators")
    bad = unsafe_char(value)
    if bad is not None:
        raise ValueError(f"must not contain {describe_char(bad)}")
    size = len(value.encode("utf-8", "surrogatepass"))
    if size > MAX_NAME_BYTES:
        raise ValueError(f"must be at most {MAX_NAME_BYTES} bytes in UTF-8 (got {size}): "
                         "the longest file name file systems allow")
    return value


# -- the config as a whole -------------------------------------------------------
def check_data(data: Any) -> Optional[str]:
    """The first problem of raw config data as ``key.path: message``, or None.

    Walks the data without recursion (so no depth can overflow the stack) and
    stops at the first problem: nesting deeper than :data:`MAX_DEPTH`, more
    than :data:`MAX_VALUES` values (shared YAML aliases count each time they
    are used), a key or text longer than :data:`MAX_TEXT`, or a character
    that changes what a terminal shows (see :mod:`nectargan_core.text`).
    """
    count = 0
    for path, depth, key, value in _walk(data):
        count += 1
        where = path or "(top level)"
        if count > MAX_VALUES:
            return f"{where}: the config holds more than {MAX_VALUES} values (counting each use of a YAML alias)"
        if isinstance(value, (dict, list, tuple)) and depth + 1 > MAX_DEPTH:
            return f"{where}: nested deeper than {MAX_DEPTH} levels"
        for text, what in ((key, "key"), (value, "text")):
            if not isinstance(text, str):
                continue
            if len(text) > MAX_TEXT:
                return f"{where}: {what} longer than {MAX_TEXT} characters ({len(text)})"
            bad = unsafe_char(text)
            if bad is not None:
                return (f"{where}: {what} contains {describe_char(bad)}; config text may not hold "
                        "control characters (they would reach file names and terminals)")
    return None


def _walk(data: Any) -> Iterator[tuple[str, int, Any, Any]]:
    """``(path, depth, key, value)`` for every value; depth counts the mappings and lists around it.

    The path shows keys escaped (:func:`~nectargan_core.text.printable`): it goes into one-line messages.
    """
    stack: list[tuple[str, int, Any, Any]] = [("", 0, None, data)]
    while stack:
        path, depth, key, value = stack.pop()
        yield path, depth, key, value
        if isinstance(value, dict):
            items = [(f"{path}.{printable(k)}" if path else printable(k), k, v) for k, v in value.items()]
        elif isinstance(value, (list, tuple)):
            items = [(f"{path}[{i}]", None, v) for i, v in enumerate(value)]
        else:
            continue
        stack.extend((child_path, depth + 1, k, v) for child_path, k, v in reversed(items))


# -- command-line options --------------------------------------------------------
class BoundedInt(click.ParamType):
    """An integer option within ``[low, high]``; the message says why ``high`` is the limit.

    ``high`` and ``why`` may be callables (limits that depend on the machine).
    """

    name = "integer"

    def __init__(self, low: int, high: Union[int, Callable[[], int]], why: Union[str, Callable[[], str]]) -> None:
        self.low, self.high, self.why = low, high, why

    def convert(self, value: Any, param: Optional[click.Parameter], ctx: Optional[click.Context]) -> int:
        """The value as an int within the bounds, or click's usage error naming the option, the bound and why."""
        if isinstance(value, bool):
            self.fail(f"{value!r} is not an integer", param, ctx)
        high = self.high() if callable(self.high) else self.high
        text = str(value).strip()
        shown = text if len(text) <= 30 else f"{text[:12]}... ({len(text)} characters)"
        if not isinstance(value, int):
            digits = text.lstrip("+-").lstrip("0")
            if text[:1] != "-" and digits.isdigit() and len(digits) > len(str(high)):
                value = high + 1  # int() refuses more than 4300 digits; any such number is too large
            else:
                try:
                    value = int(text)
                except ValueError:
                    self.fail(f"{shown!r} is not an integer", param, ctx)
                    raise  # unreachable: fail() raises
        if value < self.low:
            self.fail(f"{shown} is less than {self.low}", param, ctx)
        if value > high:
            why = self.why() if callable(self.why) else self.why
            self.fail(f"{shown} is more than {high}: {why}", param, ctx)
        return value

    def __repr__(self) -> str:
        return f"BoundedInt({self.low}, {self.high!r})"


class BoundedFloat(click.ParamType):
    """A finite number option within a range; ``nan``, ``inf`` and out-of-range values are refused in one line.

    ``click.FloatRange`` lets ``nan`` through (every comparison with it is false)
    and ``inf`` where no upper bound is set: a ``--deadline nan`` switched the
    deadline off. Every float option of every command uses this type instead.
    """

    name = "number"

    def __init__(self, low: float, high: float, why: str, *, low_open: bool = False, high_open: bool = False) -> None:
        self.low, self.high, self.why, self.low_open, self.high_open = low, high, why, low_open, high_open

    def allowed(self) -> str:
        """The range in words: ``a number > 0 and <= 604800``."""
        return (f"a number {'>' if self.low_open else '>='} {self.low:g} "
                f"and {'<' if self.high_open else '<='} {self.high:g}")

    def convert(self, value: Any, param: Optional[click.Parameter], ctx: Optional[click.Context]) -> float:
        """The value as a finite float within the bounds, or click's usage error naming the option, the bound and why."""
        text = str(value).strip()
        shown = text if len(text) <= 30 else f"{text[:12]}... ({len(text)} characters)"
        if isinstance(value, bool):
            self.fail(f"{value!r} is not a number; use {self.allowed()}", param, ctx)
        try:
            number = float(value if isinstance(value, (int, float)) else text)
        except (ValueError, OverflowError):
            self.fail(f"{shown!r} is not a number; use {self.allowed()}", param, ctx)
            raise  # unreachable: fail() raises
        if not math.isfinite(number):
            self.fail(f"{shown} is not a finite number; use {self.allowed()}", param, ctx)
        too_low = number <= self.low if self.low_open else number < self.low
        too_high = number >= self.high if self.high_open else number > self.high
        if too_low or too_high:
            self.fail(f"{shown} is out of range; use {self.allowed()}" + (f": {self.why}" if too_high else ""), param, ctx)
        return number

    def __repr__(self) -> str:
        return f"BoundedFloat({self.low}, {self.high})"


FRACTION_OPTION = BoundedFloat(0.0, 1.0, "a fraction of the pairs", high_open=True)
"""``--val``/``--test``-like options: a share of the pairs."""

IMAGE_SIDE_OPTION = BoundedInt(1, MAX_IMAGE_SIDE, IMAGE_WHY)
"""``--size``-like options: an image side in pixels."""
PROCESSES_OPTION = BoundedInt(1, process_limit, processes_why)
"""``--nproc``-like options: processes on this machine."""
BATCH_OPTION = BoundedInt(1, MAX_BATCH, BATCH_WHY)
"""``--batch-size``-like options."""
SEED_OPTION = BoundedInt(0, MAX_SEED, SEED_WHY)
"""``--seed``-like options."""
SMOOTH_OPTION = BoundedInt(1, 10_000, "a longer window flattens any curve, and each point averages its whole window")
"""``--smooth``: a moving-average window in logging intervals."""
RESTARTS_OPTION = BoundedInt(0, 1000, "a run that failed a thousand times will not succeed by restarting")
"""``train --max-restarts``: restarts of a failed distributed run."""
EXAMPLES_OPTION = BoundedInt(0, 10_000, "a page with more images than that does not load in a browser")
"""``report --max-examples``: example images on one page."""
TEST_IMAGES_OPTION = BoundedInt(0, 1000, "each is embedded in the one HTML file as input, output and target; "
                                "every image is on the folder's own results page")
"""``report --test-images``: images embedded per test results folder (each one input | output | target)."""
