"""The sender: the one thread per run that talks to visdom, so training never does.

It is started once, in ``on_train_start``, and stopped once, at the end of
the run. It folds queued updates into the :class:`~nectargan_visdom.board.Board`
and redraws the windows that changed. When the server cannot be reached it
warns once, keeps folding updates in (the board is the run's whole picture,
so nothing is lost while the server is away), retries with a doubling wait,
and redraws every window when a server answers again.
"""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass
from typing import Callable, Optional

from .board import Board, Window
from .client import Client, ServerRejected, describe_failure
from .updates import UpdateQueue

FIRST_RETRY = 0.5


@dataclass(frozen=True)
class Report:
    """How the run's plots fared, for the line printed when training ends."""

    dropped: int  # updates pushed out of the full queue before the sender took them
    undelivered: int  # windows whose newest content is not on the server
    stopped: bool  # False: the sender was still busy at the flush deadline


class Sender:
    def __init__(self, board: Board, queue: UpdateQueue, connect: Callable[[], Client], where: str,
                 retry_max: float, preload: Optional[Callable[[], None]] = None) -> None:
        self._board = board
        self._queue = queue
        self._connect = connect
        self._where = where
        self._retry_max = retry_max
        self._preload = preload
        self._client: Optional[Client] = None
        self._sentinel: Optional[str] = None  # a window drawn on the current server, to notice a restart
        self._deadline = float("inf")
        self._warned: set[str] = set()
        self._abandoned = False
        self._undelivered = 0
        self._thread = threading.Thread(target=self._run, name="nectargan-visdom", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, flush_timeout: float) -> Report:
        """Send what is queued, waiting at most ``flush_timeout`` seconds, then report."""
        self._deadline = time.monotonic() + flush_timeout
        self._queue.close()
        self._thread.join(flush_timeout)
        stopped = not self._thread.is_alive()
        self._abandoned = not stopped  # a late answer must not print into whatever runs next
        return Report(self._queue.dropped, self._undelivered, stopped)

    # -- the thread --------------------------------------------------------
    def _run(self) -> None:
        try:
            if self._preload is not None:
                self._preload()
            self._loop()
        except Exception as exc:  # noqa: BLE001 - a bug here must cost the plots, never the run
            self._warn("crash", f"the sender stopped ({type(exc).__name__}: {exc}); training continues without plots")
        finally:
            self._undelivered = len(self._board.dirty())
            if self._client is not None:
                self._client.disconnect()

    def _loop(self) -> None:
        delay, retry_at = FIRST_RETRY, 0.0
        while True:
            wait = max(0.0, retry_at - time.monotonic()) if self._board.dirty() else None
            updates = self._queue.take_all(wait)
            closing = self._queue.closed
            if closing:  # puts precede close(), so this takes the last of them
                updates += self._queue.take_all(0)
            for update in updates:
                self._board.apply(update)
            if self._board.dirty() and (closing or time.monotonic() >= retry_at):
                if self._deliver():
                    delay = FIRST_RETRY
                else:
                    retry_at = time.monotonic() + delay
                    delay = min(delay * 2, self._retry_max)
            if closing:
                return

    def _deliver(self) -> bool:
        """Draw every changed window; False when the server could not be reached."""
        try:
            self._ensure_connected()
            for window in self._board.dirty():
                if time.monotonic() > self._deadline:
                    return False
                self._draw(window)
            return True
        except (ConnectionError, ServerRejected) as exc:  # visdom turns every requests failure into ConnectionError
            if self._client is not None:
                self._client.disconnect()
                self._client = None
            self._warn("unreachable", f"cannot reach the server at {self._where} ({describe_failure(exc)}); "
                                      "training continues, and the plots are sent again when it answers")
            return False

    def _ensure_connected(self) -> None:
        if self._client is None:
            self._client = self._connect()
            self._sentinel = None
            self._board.mark_all_dirty()  # a new server, or the same one restarted: it may have nothing
        elif self._sentinel is not None and not self._client.has_window(self._sentinel):
            self._board.mark_all_dirty()  # restarted between two sends, without a failed request

    def _draw(self, window: Window) -> None:
        assert self._client is not None
        try:
            window.draw(self._client)
        except ConnectionError:
            raise
        except Exception as exc:  # noqa: BLE001 - one bad window (refused, unreadable image) must not stop the rest
            self._warn(f"window:{window.win}", f"window '{window.win}' was not drawn ({type(exc).__name__}: {exc})")
        else:
            self._sentinel = self._sentinel or window.win
        window.dirty = False

    def _warn(self, key: str, message: str) -> None:
        """One line on stderr, once per run and kind of problem."""
        if key in self._warned or self._abandoned:
            return
        self._warned.add(key)
        # sys.stderr looked up now: a progress bar may have replaced it since the run started.
        print(f"warning: visdom: {message}", file=sys.stderr, flush=True)
