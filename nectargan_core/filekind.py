"""What a path is, in words, and opening regular files only.

A FIFO opened for reading waits for a writer forever, a device such as
``/dev/zero`` never ends, and a symbolic link can point a write anywhere: a
file the project reads or writes by name (a config, a run's lock file) is
opened without blocking, checked to be a regular file, and, where it must be
the run's own, opened without following links.
"""

from __future__ import annotations

import errno
import os
import stat


class NotRegularFile(OSError):
    """The path exists but is a folder, FIFO, device, socket or (when links are not followed) a link."""


def kind_of(mode: int) -> str:
    """``a folder``, ``a FIFO``, ``a device``, ``a socket``, ``a symbolic link`` or ``a regular file``."""
    if stat.S_ISREG(mode):
        return "a regular file"
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    return "not a regular file"


def open_regular(path: str | os.PathLike[str], flags: int = os.O_RDONLY, mode: int = 0o644, *,
                 follow_links: bool = True) -> int:
    """``os.open`` that never blocks on a FIFO and returns a descriptor of a regular file only.

    Raises :class:`NotRegularFile` (``strerror`` says what the path is) for
    anything else; with ``follow_links=False`` a symbolic link is one too.
    """
    extra = os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow_links else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags | extra, mode)
    except OSError as exc:
        if not follow_links and exc.errno == errno.ELOOP:  # the last component is a link
            raise NotRegularFile(exc.errno, "a symbolic link", str(path)) from None
        raise
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise NotRegularFile(errno.EINVAL, kind_of(info.st_mode), str(path))
    os.set_blocking(fd, True)
    return fd
