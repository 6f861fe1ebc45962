"""``GET /inbox``: the reviewer inbox's page, its built files with their hashes, and its CSP.

The page's files are built ahead of time (``scripts/vendor-inbox.sh``) into ``server/static/inbox``
with their SRI hashes in ``integrity.json``; the browser test that uses the page in Chromium is
``tests/ecosystem/test_inbox_browser.py``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re

import httpx
import pytest

from server.app import create_app
from server.inbox import INBOX_ASSETS_DIR, content_security_policy
from server.settings import ApiKeyConfig, Settings

from .._auth import ADMIN

ASSET = re.compile(r'<(?:script|link)\b[^>]*(?:src|href)="(?P<url>[^"]+)"\s+integrity="sha384-(?P<sha384>[^"]+)"')


@pytest.fixture
def settings() -> Settings:
    """The page does not depend on the store: the memory store, authentication off."""
    return Settings(mongodb_uri=None, agents="runtime.demo:AGENTS", auth=False)


def _sha384(content: bytes) -> str:
    return base64.b64encode(hashlib.sha384(content).digest()).decode()


def _policy(header: str) -> dict[str, list[str]]:
    directives = [part.split() for part in header.split(";") if part.strip()]
    return {name: values for name, *values in directives}


async def test_the_inbox_page_loads_its_files_from_runsgate_with_their_integrity_hashes(
    http: httpx.AsyncClient,
) -> None:
    # when a browser opens /inbox
    response = await http.get("/inbox")

    # then it is an HTML page naming two files, both here, byte for byte the files it names
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    page = response.text
    assets = {m["url"]: m["sha384"] for m in ASSET.finditer(page)}
    assert sorted(assets) == ["/static/inbox/inbox.css", "/static/inbox/inbox.js"]
    for url, sha384 in assets.items():
        served = await http.get(url)
        assert served.status_code == 200, url
        assert _sha384(served.content) == sha384, url
    # and nothing comes from elsewhere, nor runs inline
    assert "http://" not in page
    assert "https://" not in page
    scripts = re.findall(r"<script\b[^>]*>", page)
    assert len(scripts) == 1
    assert 'src="/static/inbox/inbox.js"' in scripts[0]
    assert "<style" not in page
    assert "style=" not in page


def test_the_committed_files_match_their_recorded_hashes() -> None:
    # given the files scripts/vendor-inbox.sh built, and the hashes it recorded
    recorded = json.loads((INBOX_ASSETS_DIR / "integrity.json").read_text())

    # then each file is the one its hash names (a rebuilt file with a stale hash would be blocked)
    assert sorted(recorded) == ["inbox.css", "inbox.js"]
    for name, integrity in recorded.items():
        assert integrity == f"sha384-{_sha384((INBOX_ASSETS_DIR / name).read_bytes())}", name


async def test_the_inbox_is_served_with_a_policy_that_allows_only_its_own_origin(http: httpx.AsyncClient) -> None:
    # when a browser opens /inbox on host "localhost"
    response = await http.get("/inbox")

    # then scripts, styles and connections may come from the page's origin only (and its
    # WebSocket), with no inline code and no eval, and the page may not be framed
    policy = _policy(response.headers["content-security-policy"])
    assert policy["default-src"] == ["'none'"]
    assert policy["script-src"] == ["'self'"]
    assert policy["style-src"] == ["'self'"]
    assert policy["connect-src"] == ["'self'", "ws://localhost", "wss://localhost"]
    assert policy["frame-ancestors"] == ["'none'"]
    assert policy["base-uri"] == ["'none'"]
    assert "unsafe" not in response.headers["content-security-policy"]
    assert response.headers["x-content-type-options"] == "nosniff"


def test_a_host_header_that_is_not_a_plain_host_is_not_written_into_the_policy() -> None:
    # given Host headers a client could forge to inject sources or directives
    for host in ("evil.example; script-src *", "a b", "x'y", ""):
        # then the policy's connect-src is only 'self'
        assert _policy(content_security_policy(host))["connect-src"] == ["'self'"], host
    assert _policy(content_security_policy("[::1]:4000"))["connect-src"] == [
        "'self'",
        "ws://[::1]:4000",
        "wss://[::1]:4000",
    ]


async def test_the_page_needs_no_credential_but_the_api_it_calls_does() -> None:
    # given authentication on, and a client without a key
    settings = Settings(
        mongodb_uri=None, agents="runtime.demo:AGENTS", api_keys=[ApiKeyConfig.model_validate(ADMIN.entry())]
    )
    app = create_app(settings)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://localhost") as anonymous,
    ):
        # when it opens the page and its script, then asks the API for the agents
        page = await anonymous.get("/inbox")
        script = await anonymous.get("/static/inbox/inbox.js")
        agents = await anonymous.post("/graphql", json={"query": "{ agents { id } }"})

    # then the page (which holds no data) is served, and the API asks for a key
    assert page.status_code == 200
    assert script.status_code == 200
    assert agents.status_code == 401
