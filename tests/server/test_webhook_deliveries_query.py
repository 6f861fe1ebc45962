"""``webhookDeliveries`` over HTTP (the app in-process, its dispatcher sending to a real loopback
receiver): it needs ``webhooks:read``, shows only deliveries about runs of the principal's
resources, pages newest first with opaque cursors, filters by status, and never shows the
receiver's path or query string."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette

from resolvers.reads.webhooks import public_endpoint
from server.app import create_app
from server.settings import DEMO_AGENTS, ApiKeyConfig, Settings, WebhookConfig
from tests._auth import ALL, TestKey
from tests._graphql import REFUND, REFUND_PROMPT, START_RUN
from tests._receiver import new_secret, receiving
from tests.webhooks._setup import DELIVERIES

OPERATOR = TestKey("operator", "rg_operator_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", (*ALL, "webhooks:read"))
TENANT_A = TestKey(
    "tenant-a-ops", "rg_tenant_a_bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", ("webhooks:read",), ("tenant-a",)
)
READER = TestKey("reader", "rg_reader_cccccccccccccccccccccccccccccccccccccccccc", ("runs:read",))


@asynccontextmanager
async def running(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    app: Starlette = create_app(settings)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client,
    ):
        yield client


async def query(client: httpx.AsyncClient, key: TestKey, **variables: Any) -> dict[str, Any]:
    response = await client.post("/graphql", json={"query": DELIVERIES, "variables": variables}, headers=key.headers)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def test_deliveries_need_the_scope_and_show_only_runs_of_the_principals_resources() -> None:
    secret = new_secret()
    with receiving(secret) as receiver:
        url = receiver.url + "?token=receiver-token"
        settings = Settings(
            agents=DEMO_AGENTS,
            mongodb_uri=None,
            api_keys=[ApiKeyConfig.model_validate(k.entry()) for k in (OPERATOR, TENANT_A, READER)],
            webhooks=[WebhookConfig(url=url, secret=secret, events=["run.suspended"])],  # type: ignore[arg-type]
            webhook_poll_interval=0.05,
            subscription_lookback=0.5,
            sweep_interval=0,
        )
        async with running(settings) as client:
            runs = {}
            for resource in ("tenant-a", "tenant-b", "tenant-a"):
                started = await client.post(
                    "/graphql",
                    json={
                        "query": START_RUN,
                        "variables": {"input": {"agentId": REFUND, "prompt": REFUND_PROMPT, "resourceId": resource}},
                    },
                    headers=OPERATOR.headers,
                )
                run_id = started.json()["data"]["startRun"]["runId"]
                runs[run_id] = resource
            for _ in range(200):
                everything = (await query(client, OPERATOR, status="DELIVERED"))["data"]["webhookDeliveries"]["edges"]
                if len(everything) == 3:
                    break
                await asyncio.sleep(0.05)

            refused = await query(client, READER)
            mine = (await query(client, TENANT_A))["data"]["webhookDeliveries"]
            first_page = (await query(client, OPERATOR, first=2))["data"]["webhookDeliveries"]
            second_page = (await query(client, OPERATOR, first=2, after=first_page["pageInfo"]["endCursor"]))["data"][
                "webhookDeliveries"
            ]
            pending = (await query(client, OPERATOR, status="PENDING"))["data"]["webhookDeliveries"]["edges"]
            bad_cursor = await query(client, OPERATOR, after="!!")

    assert len(everything) == 3
    assert {e["node"]["runId"] for e in everything} == set(runs)
    assert refused["data"] is None
    assert refused["errors"][0]["extensions"] == {"code": "FORBIDDEN", "requiredScope": "webhooks:read"}
    assert sorted(e["node"]["runId"] for e in mine["edges"]) == sorted(
        r for r, res in runs.items() if res == "tenant-a"
    )
    assert {e["node"]["resourceId"] for e in mine["edges"]} == {"tenant-a"}
    ids = [e["node"]["id"] for e in everything]
    assert ids == sorted(ids, reverse=True)  # newest event first
    assert [e["node"]["id"] for e in first_page["edges"] + second_page["edges"]] == ids
    assert first_page["pageInfo"]["hasNextPage"] is True
    assert second_page["pageInfo"]["hasNextPage"] is False
    assert pending == []
    shown = receiver.url.rsplit("/", 1)[0] + "/…"
    assert all(e["node"]["endpoint"] == shown for e in everything)  # no path, no query string
    assert bad_cursor["errors"][0]["extensions"]["code"] == "BAD_USER_INPUT"
    assert len(receiver.received) == 3


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        pytest.param(
            "https://hooks.slack.example/services/T000/B000/XXXXsecretXXXX",
            "https://hooks.slack.example/…",
        ),
        pytest.param(
            "https://discord.example/api/webhooks/123/s3cret-token?wait=true",
            "https://discord.example/…",
        ),
        pytest.param("http://127.0.0.1:8080/hooks?token=abc", "http://127.0.0.1:8080/…"),
        ("https://receiver.example", "https://receiver.example"),
        pytest.param("https://receiver.example/", "https://receiver.example"),
    ],
)
def test_a_delivery_shows_its_receiver_by_scheme_host_and_port_only(url: str, shown: str) -> None:
    # the path and the query string may carry the receiver's credential (a Slack or Discord
    # webhook URL is one), and principals with webhooks:read are not the operator who set it
    assert public_endpoint(url) == shown
