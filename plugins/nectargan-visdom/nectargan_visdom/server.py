"""Run the vendored visdom server (``_vendor/visdom``) without its download step, so it starts offline.

``python -m visdom.server`` first fetches the browser's JavaScript, CSS and
fonts from CDNs and fails without internet. This package ships those files
in its copy of visdom's ``static`` folder (``_vendor/README.md``), and
:func:`serve` builds visdom's tornado ``Application`` directly, listening on
the address asked for. Should an asset be missing all the same (a damaged
install), one line says so; the data API (what training sends, and what
``Visdom.get_window_data`` reads) works regardless.

visdom's page also links ``static_url("../user/style.css")``, which tornado
6.6 and later refuse to fingerprint, failing the whole page with a 403;
:func:`page_safe_static_urls` makes such links (and those of missing assets)
plain URLs, without touching how files are served.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Callable, Optional

ASSET_REFERENCE = re.compile(r"""static_url\(\s*['"]([^'"]+)['"]\s*\)""")


def static_dir() -> Path:
    """The vendored visdom's ``static`` folder (the page and its assets), found without importing visdom."""
    return Path(__file__).resolve().parent / "_vendor" / "visdom" / "static"


def missing_assets(static: Optional[Path] = None) -> list[str]:
    """Files that visdom's page loads but that are not in its static folder (read from index.html itself)."""
    static = static or static_dir()
    page = (static / "index.html").read_text(encoding="utf-8")
    wanted = dict.fromkeys(ASSET_REFERENCE.findall(page))
    return [name for name in wanted if not name.startswith("..") and not (static / name).is_file()]


def page_safe_static_urls() -> type:
    """A tornado static handler class for building the page's asset URLs only (never for serving files)."""
    from tornado.web import StaticFileHandler

    class StaticURLs(StaticFileHandler):
        @classmethod
        def get_version(cls, settings: dict, path: str) -> Optional[str]:
            # No fingerprint for links that leave the static folder or name a
            # missing asset: tornado would fail the page (403) or log every load.
            if path.startswith("../") or not (Path(settings["static_path"]) / path).is_file():
                return None
            return super().get_version(settings, path)

    return StaticURLs


def build_app(port: int, env_path: str) -> Any:
    """visdom's tornado application, without autoreload and with page-safe asset URLs."""
    from ._vendor.visdom.server import app as visdom_app

    # visdom turns on tornado's debug mode, whose autoreload would restart the
    # server (dropping every plot it holds) whenever an imported file changes.
    visdom_app.tornado_settings["autoreload"] = False
    app = visdom_app.Application(port=port, env_path=env_path)
    app.settings["static_handler_class"] = page_safe_static_urls()  # read by static_url() when the page renders
    return app


def serve(host: str, port: int, env_path: str, say: Callable[[str], None], warn: Callable[[str], None]) -> None:
    """Serve until interrupted. Raises OSError when the address cannot be bound."""
    from tornado import ioloop

    missing = missing_assets()
    if missing:
        warn(f"visdom: {len(missing)} browser assets are missing from {static_dir()} ({', '.join(missing[:3])}"
             f"{', ...' if len(missing) > 3 else ''}), so the web page stays blank; the data API works. "
             "Reinstall nectargan-visdom to restore them")
    app = build_app(port, env_path)
    app.listen(port, address=host, max_buffer_size=1024**3)
    say(f"visdom: serving http://{host}:{port} (saved envs in {env_path}); Ctrl+C stops it")
    try:
        ioloop.IOLoop.current().start()
    except KeyboardInterrupt:
        say("visdom: stopped")
