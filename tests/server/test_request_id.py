"""Request ids: sent back in ``X-Request-Id`` and carried by the log lines of that request."""

from __future__ import annotations

import logging
import re

import httpx
import pytest

from server.request_id import RequestIdFilter


async def test_each_response_gets_a_fresh_request_id(http: httpx.AsyncClient) -> None:
    first = await http.post("/graphql", json={"query": "{ agents { id } }"})
    second = await http.post("/graphql", json={"query": "{ agents { id } }"})

    assert re.fullmatch(r"[0-9a-f]{32}", first.headers["x-request-id"])
    assert first.headers["x-request-id"] != second.headers["x-request-id"]


@pytest.mark.parametrize(
    ("sent", "kept"),
    [("trace-42.a_b", True), ("a" * 64, True), ("a" * 65, False), ("bad id", False), ("x\u00e9", False)],
)
async def test_a_client_id_is_kept_only_when_it_is_short_and_plain(
    http: httpx.AsyncClient, sent: str, kept: bool
) -> None:
    response = await http.get("/healthz", headers={"X-Request-Id": sent.encode()})

    assert (response.headers["x-request-id"] == sent) is kept
    assert re.fullmatch(r"[A-Za-z0-9._-]{1,64}", response.headers["x-request-id"])


async def test_log_lines_made_while_serving_carry_the_request_id(
    http: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.handler.addFilter(RequestIdFilter())
    with caplog.at_level(logging.INFO, logger="runsgate.graphql"):
        # a client mistake is logged as one INFO line while the request is served
        response = await http.post("/graphql", json={"query": "{ nope }"}, headers={"X-Request-Id": "req-7"})

    lines = [r for r in caplog.records if r.name == "runsgate.graphql"]
    assert response.headers["x-request-id"] == "req-7"
    assert lines
    assert all(getattr(r, "request_id", None) == "req-7" for r in lines)
    assert all(r.levelno == logging.INFO and r.exc_info is None for r in lines)
