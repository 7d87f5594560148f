"""Options of the visdom visualizer (pydantic only: loaded by ``nectargan plugins list``)."""

from __future__ import annotations

from typing import Annotated, Optional

from pydantic import Field

from nectargan_core import Seconds, Section, at_most

#: Most updates that may wait for a slow server; each may hold an example image.
MAX_QUEUE = 100_000


class VisdomOptions(Section):
    """Where the plots go, what is plotted, and how much may wait for a slow server."""

    server: str = Field("127.0.0.1", description="Host (or http:// URL) of the visdom server", min_length=1)
    port: int = Field(8097, description="Port of the visdom server", ge=1, le=65535)
    env: Optional[str] = Field(None, description="visdom environment (null: <run name>_v<version>)",
                               pattern=r"^[^/\\]+$")
    losses: bool = Field(True, description="Plot training losses, one window per network (G/..., D/...)")
    details: bool = Field(False, description="Also plot dotted detail keys such as G/l1.raw")
    log_scale: bool = Field(False, description="Logarithmic y axis in the loss windows")
    lr: bool = Field(True, description="Plot the learning rate of each optimizer")
    validation: bool = Field(True, description="Plot validation metrics, one window per metric")
    config: bool = Field(True, description="Show the resolved run config as text")
    images_every_epochs: Optional[int] = Field(
        1, description="Show the newest example grid every N epochs (null: never)", ge=1)
    queue_size: Annotated[int, at_most(MAX_QUEUE, "waiting updates stay in memory, and each may hold an image")] = Field(
        1000, description="Updates that may wait for the sender; beyond that the oldest is dropped", ge=1)
    timeout: Seconds = Field(2.0, description="Seconds one request to the server may take", gt=0)
    retry_max: Seconds = Field(
        10.0, description="Longest wait in seconds between reconnection attempts (starts at 0.5, doubles)", gt=0)
    flush_timeout: Seconds = Field(
        5.0, description="Seconds the end of training waits for queued updates to be sent", ge=0)
