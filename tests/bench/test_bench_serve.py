"""The benchmark's raw endpoint is the benchmark's: ``python -m bench.serve``'s app mounts
``POST /bench/raw-page`` and answers there the JSON ``/graphql`` answers for the same page; the
product's app (``server.app.create_app``) does not mount it."""

from __future__ import annotations

import httpx
from pydantic_ai import models
from starlette.applications import Starlette

from bench.queries import PAGE_SIZE, page_body
from bench.serve import RAW_PAGE_PATH, create_bench_app
from server.app import create_app
from server.settings import DEMO_AGENTS, Settings

models.ALLOW_MODEL_REQUESTS = False

SETTINGS = Settings(agents=DEMO_AGENTS, mongodb_uri=None, seed_runs=30, seed_threads=3, auth=False, sweep_interval=0)


async def _answers(app: Starlette, path: str) -> httpx.Response:
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://localhost") as client,
    ):
        body = page_body(first=PAGE_SIZE)
        headers = {"content-type": "application/json"}
        graphql = await client.post("/graphql", content=body, headers=headers)
        assert graphql.status_code == 200
        raw = await client.post(path, content=body, headers=headers)
        if raw.status_code == 200:
            assert raw.json()["data"] == graphql.json()["data"]  # GraphQL also reports its cost
        return raw


async def test_the_bench_app_mounts_the_raw_page_and_the_product_does_not() -> None:
    assert (await _answers(create_bench_app(SETTINGS), RAW_PAGE_PATH)).status_code == 200
    assert (await _answers(create_app(SETTINGS), RAW_PAGE_PATH)).status_code == 404
