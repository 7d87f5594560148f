"""What the training thread hands to the sender, and the queue between them.

The training thread only builds small records and appends them here; it never
waits for the network. The queue is bounded and drops its *oldest* record when
full, so memory stays bounded while a slow server falls behind, and the plots
show the most recent state of the run.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Optional, Union


@dataclass(frozen=True)
class LogUpdate:
    """One metrics record: losses and learning rates at fractional epoch ``x``."""

    x: float
    losses: Optional[Mapping[str, float]]
    lr: Optional[Mapping[str, float]]


@dataclass(frozen=True)
class ValidationUpdate:
    x: float
    metrics: Mapping[str, float]


@dataclass(frozen=True)
class ImageUpdate:
    path: Path
    caption: str


Update = Union[LogUpdate, ValidationUpdate, ImageUpdate]


class UpdateQueue:
    """A bounded FIFO whose ``put`` never blocks: when full, the oldest update is dropped and counted."""

    def __init__(self, maxsize: int) -> None:
        self._items: deque[Update] = deque()
        self._maxsize = maxsize
        self._cond = threading.Condition()
        self._closed = False
        self.dropped = 0

    def put(self, update: Update) -> None:
        with self._cond:
            if len(self._items) >= self._maxsize:
                self._items.popleft()
                self.dropped += 1
            self._items.append(update)
            self._cond.notify()

    def take_all(self, timeout: Optional[float]) -> list[Update]:
        """Everything queued; waits up to ``timeout`` seconds (None: forever) while empty and open."""
        with self._cond:
            if not self._items and not self._closed:
                self._cond.wait(timeout)
            items = list(self._items)
            self._items.clear()
            return items

    def close(self) -> None:
        """Wake the consumer for the last time; later ``take_all`` calls never wait."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    @property
    def closed(self) -> bool:
        return self._closed
