"""The reviewer inbox: ``GET /inbox``, a page for the people who decide (docs/inbox.md).

A client of the public GraphQL API holding nothing of its own; its prebuilt script and style
sheet (``INBOX_ASSETS_DIR``, served under ``INBOX_ASSETS_PATH``) are named with SRI hashes, and
the page is served with ``INBOX_CSP`` (same origin only, no inline code, no ``eval``).
"""

from __future__ import annotations

import html
import json
import re
from functools import cache
from pathlib import Path

from starlette.requests import Request
from starlette.responses import HTMLResponse

INBOX_ASSETS_DIR = Path(__file__).resolve().parent / "static" / "inbox"
"""The built files (``inbox.js``, ``inbox.css``) and their hashes (``integrity.json``)."""
INBOX_ASSETS_PATH = "/static/inbox"
"""URL path the app serves ``INBOX_ASSETS_DIR`` under."""
INBOX_FILES = ("inbox.css", "inbox.js")

_HOST = re.compile(r"^[A-Za-z0-9.\-]+(:\d{1,5})?$|^\[[0-9A-Fa-f:.]+\](:\d{1,5})?$")
"""A ``Host`` header that may be written into the policy as is (a name or IP, and a port)."""


@cache
def integrity() -> dict[str, str]:
    """``{file name: "sha384-<base64>"}`` of the built files, from ``integrity.json``.

    Raises:
        FileNotFoundError: The built files are missing (run ``scripts/vendor-inbox.sh``).
    """
    hashes: dict[str, str] = json.loads((INBOX_ASSETS_DIR / "integrity.json").read_text())
    return hashes


def content_security_policy(host: str | None) -> str:
    """The page's Content-Security-Policy: everything from its own origin only.

    ``connect-src`` names ``ws://`` and ``wss://`` of the request's host beside ``'self'`` (for
    the subscription socket), when the ``Host`` header is a plain host and port; otherwise only
    ``'self'`` (CSP Level 3 browsers let ``'self'`` match the same host's WebSocket too).
    """
    connect = "'self'"
    if host and _HOST.match(host):
        connect += f" ws://{host} wss://{host}"
    return "; ".join(
        (
            "default-src 'none'",
            "script-src 'self'",
            "style-src 'self'",
            f"connect-src {connect}",
            "img-src 'self' data:",
            "font-src 'self'",
            "base-uri 'none'",
            "form-action 'none'",
            "frame-ancestors 'none'",
        )
    )


def inbox_html(root_path: str = "", max_reason_bytes: int | None = None) -> str:
    """The page: an empty ``#inbox`` element, the style sheet and the script, with their hashes.

    ``max_reason_bytes`` (the server's cap on a decline's ``reason``, UTF-8 bytes) is given to the
    script as ``#inbox``'s ``data-max-reason-bytes``, which bounds the reason fields' length.
    """
    hashes = integrity()
    base = html.escape(f"{root_path}{INBOX_ASSETS_PATH}", quote=True)
    limit = "" if max_reason_bytes is None else f' data-max-reason-bytes="{int(max_reason_bytes)}"'
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>runsgate inbox</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="{base}/inbox.css" integrity="{hashes["inbox.css"]}">
<script defer src="{base}/inbox.js" integrity="{hashes["inbox.js"]}"></script>
</head>
<body>
<div id="inbox"{limit}></div>
<noscript><p>The runsgate inbox needs JavaScript; the GraphQL API at /graphql works without it.</p></noscript>
</body>
</html>
"""


def _max_reason_bytes(request: Request) -> int | None:
    """The application's cap on a decline's reason (UTF-8 bytes), or None without ``state.limits``."""
    limits = getattr(request.app.state, "limits", None)
    return getattr(limits, "max_reason_bytes", None)


async def inbox(request: Request) -> HTMLResponse:
    """``GET /inbox``: the page, with ``content_security_policy`` and no caching of a stale page."""
    return HTMLResponse(
        inbox_html(request.scope.get("root_path", ""), _max_reason_bytes(request)),
        headers={
            "content-security-policy": content_security_policy(request.headers.get("host")),
            "x-content-type-options": "nosniff",
            "referrer-policy": "no-referrer",
            "cache-control": "no-cache",
        },
    )


__all__ = ["INBOX_ASSETS_DIR", "INBOX_ASSETS_PATH", "content_security_policy", "inbox", "inbox_html", "integrity"]
