"""An answer's budget in bytes (issue 42, part A), against a real secured server process.

A document within its cost limit whose answer turns out larger than ``RUNSGATE_MAX_RESPONSE_BYTES``
(what a cost cannot know before the answer is read: here, the events of runs started with long
prompts) is answered with ``RESPONSE_TOO_LARGE`` instead, over HTTP and WebSocket; the answer
sent is small, and the server answers other requests as before.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from .._graphql import data, post, ws_execute
from .._processes import scaled
from .._servers import runsgate_process
from .conftest import ADMIN, secured_env
from .test_access_matrix import START

LIMIT = 64 * 1024
"""The server's ``RUNSGATE_MAX_RESPONSE_BYTES``: 64 KiB."""
PROMPT = "Please refund order 1042. " + "Details follow. " * 1900
"""About 30 KiB: each run's `started` event holds it."""
RUNS = 5

EVENTS = 'query Events { suspendedRuns(agentId: "refund-agent") { nodes { runId events { type data } } } }'
"""Every run's events with their data: 5 prompts of 30 KiB (150 KiB), for a cost of 2,101."""
SMALL = 'query Small { suspendedRuns(agentId: "refund-agent") { totalCount nodes { runId } } }'


@dataclass(frozen=True)
class Budgeted:
    url: str
    log: Path


@pytest.fixture(scope="module")
def budgeted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Budgeted]:
    """A secured server answering at most 64 KiB, holding 5 runs started with 30 KiB prompts."""
    log = tmp_path_factory.mktemp("response-budget") / "runsgate.log"
    with runsgate_process(log, **secured_env(None, RUNSGATE_MAX_RESPONSE_BYTES=str(LIMIT))) as url:
        for _ in range(RUNS):
            outcome = data(url, ADMIN, START, input={"agentId": "refund-agent", "prompt": PROMPT})["startRun"]
            assert outcome["status"] == "SUSPENDED", outcome
        yield Budgeted(url, log)


def too_large(answer: dict[str, Any]) -> None:
    """``answer`` is the budget's refusal: no data, one error with the code and the limit."""
    assert answer["data"] is None, answer
    [error] = answer["errors"]
    assert error["extensions"] == {"code": "RESPONSE_TOO_LARGE", "maxResponseBytes": LIMIT}, error
    assert "RUNSGATE_MAX_RESPONSE_BYTES" in error["message"], error
    assert answer["extensions"]["cost"]["requestedQueryCost"] <= answer["extensions"]["cost"]["maximumAvailable"]


def test_an_answer_over_the_byte_budget_is_refused_over_http(budgeted: Budgeted) -> None:
    # given runs whose events hold 150 KiB of prompts, and a server answering at most 64 KiB
    # when a document within its cost limit asks for all of them, twice (then as a prepared query)
    answers = [post(budgeted.url, ADMIN, EVENTS) for _ in range(2)]

    # then each answer is the budget's typed error, and small
    for response in answers:
        assert response.status_code == 200, response.text[:500]
        assert len(response.content) < 1024, len(response.content)
        too_large(response.json())
    # and the server answers a smaller question as before
    assert [node["runId"] for node in data(budgeted.url, ADMIN, SMALL)["suspendedRuns"]["nodes"]]
    assert httpx.get(f"{budgeted.url}/healthz", timeout=scaled(10)).status_code == 200


def test_an_answer_over_the_byte_budget_is_refused_over_websocket(budgeted: Budgeted) -> None:
    # given the same document, sent over a WebSocket
    answer = asyncio.run(ws_execute(budgeted.url, EVENTS, init_payload={"Authorization": f"Bearer {ADMIN.key}"}))

    # then its `next` message is the budget's typed error
    too_large(answer)
