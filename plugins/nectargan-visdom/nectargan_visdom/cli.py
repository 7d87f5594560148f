"""``nectargan visdom serve``: a visdom server that starts offline (visdom itself is imported only when it runs)."""

from __future__ import annotations

import os

import click


@click.group("visdom")
def visdom_group() -> None:
    """Live training plots in visdom."""


@visdom_group.command("serve")
@click.option("--port", type=click.IntRange(1, 65535), default=8097, show_default=True, help="Port to listen on.")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to bind; 0.0.0.0 makes the server reachable from other machines.")
@click.option("--env-path", type=click.Path(file_okay=False), default=os.path.join("~", ".visdom"), show_default=True,
              help="Folder where envs saved from the web page are kept.")
def serve_command(port: int, host: str, env_path: str) -> None:
    """Start a visdom server without downloading anything.

    \b
    Examples:
      nectargan visdom serve
      nectargan visdom serve --port 8098 --env-path runs/visdom
    Then train with `visualizers: {visdom: {port: 8098}}` and open http://127.0.0.1:8098.
    """
    from .server import serve

    try:
        serve(host, port, os.path.expanduser(env_path), say=click.echo, warn=lambda line: click.echo(line, err=True))
    except OSError as exc:
        raise click.ClickException(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
