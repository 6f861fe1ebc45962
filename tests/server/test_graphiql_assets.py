"""GraphiQL works offline: its page loads React and GraphiQL from runsgate, not from a CDN.

Strawberry's page names unpkg.com URLs with SRI hashes; runsgate serves the same files
(``server/static/graphiql``, from ``scripts/vendor-graphiql.sh``). The browser test that runs the
page in Chromium is ``tests/ecosystem/test_graphiql_browser.py``.
"""

from __future__ import annotations

import base64
import hashlib
import re

import httpx
import pytest
from starlette.applications import Starlette

from server.app import create_app
from server.settings import DEMO_AGENTS, Settings
from server.view.graphiql import GRAPHIQL_EXAMPLE_QUERY

ASSET = re.compile(r'(?:src|href)="(?P<url>[^"]+)"\s+integrity="sha384-(?P<sha384>[^"]+)"')


@pytest.fixture
def settings() -> Settings:
    """GraphiQL does not depend on the store: the memory store only."""
    return Settings(mongodb_uri=None, agents="runtime.demo:AGENTS", graphiql=True, auth=False)


async def test_the_graphiql_page_loads_every_asset_from_runsgate_with_its_integrity_hash(
    http: httpx.AsyncClient,
) -> None:
    # when a browser opens /graphql
    page = (await http.get("/graphql", headers={"accept": "text/html"})).text

    # then no URL points off the server, and each script and style sheet is served here, byte
    # for byte the file whose hash the page names
    assert "unpkg.com" not in page
    assets = [(m["url"], m["sha384"]) for m in ASSET.finditer(page)]
    assert len(assets) == 7
    for url, sha384 in assets:
        assert url.startswith("/static/graphiql/"), url
        response = await http.get(url)
        assert response.status_code == 200, url
        assert base64.b64encode(hashlib.sha384(response.content).digest()).decode() == sha384, url


async def test_no_graphiql_assets_are_served_when_graphiql_is_off() -> None:
    # given the app with RUNSGATE_GRAPHIQL=false
    app: Starlette = create_app(Settings(agents=DEMO_AGENTS, mongodb_uri=None, graphiql=False, auth=False))
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://localhost") as http,
    ):
        # when a browser asks for the page and a script
        page = await http.get("/graphql", headers={"accept": "text/html"})
        script = await http.get("/static/graphiql/graphiql@3.8.3/graphiql.min.js")

    # then neither is there
    assert page.status_code == 404
    assert script.status_code == 404


async def test_graphiql_opens_with_a_runsgate_example_query_that_runs(http: httpx.AsyncClient) -> None:
    # when a browser opens /graphql
    page = (await http.get("/graphql", headers={"accept": "text/html"})).text

    # then the editor's first content is runsgate's example, not Strawberry's welcome text
    assert "Welcome to GraphiQL" not in page
    example = re.search(r"const EXAMPLE_QUERY = `([^`]*)`;", page)
    assert example is not None
    assert example[1] == GRAPHIQL_EXAMPLE_QUERY
    assert 'suspendedRuns(agentId: "refund-agent"' in example[1]

    # and it runs as it is, without errors
    response = await http.post("/graphql", json={"query": example[1]})
    assert response.status_code == 200
    body = response.json()
    assert "errors" not in body, body
    assert body["data"]["suspendedRuns"]["totalCount"] == 0


async def test_the_graphiql_page_is_titled_runsgate(http: httpx.AsyncClient) -> None:
    # when a browser opens /graphql
    page = (await http.get("/graphql", headers={"accept": "text/html"})).text

    # then its title names runsgate, not Strawberry
    assert re.findall(r"<title>([^<]*)</title>", page) == ["runsgate GraphiQL"]
