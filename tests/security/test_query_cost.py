"""What a request costs before it runs (issue 42, part A), against a real secured server process.

A fragment bomb (each fragment spreading the one before it twice) is checked in time that grows
with its size, not with its expansion: the server answers it at once and stays responsive. A
document whose cost (docs/api.md "Query cost") passes ``RUNSGATE_MAX_QUERY_COST`` is refused
before it runs, over HTTP and WebSocket, with ``QUERY_TOO_COSTLY``, its cost and the limit; every
answer reports its cost in ``extensions.cost``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from .._graphql import post, ws_execute
from .._processes import scaled
from .._servers import runsgate_process
from .conftest import ADMIN, secured_env


@dataclass(frozen=True)
class Costed:
    url: str
    log: Path


@pytest.fixture(scope="module")
def costed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Costed]:
    """A secured server of its own (memory store, default limits)."""
    log = tmp_path_factory.mktemp("query-cost") / "runsgate.log"
    with runsgate_process(log, **secured_env(None)) as url:
        yield Costed(url, log)


AUTHORIZED = {"Authorization": f"Bearer {ADMIN.key}"}
"""A WebSocket's ``connection_init`` payload, as the admin key."""

BIG_ANSWER = (
    '{ suspendedRuns(agentId: "refund-agent", page: {page: 0, perPage: 100}) { nodes { '
    + " ".join(f"c{i}: conversation(maxBytes: 1048576) {{ messages {{ text }} }}" for i in range(20))
    + " } } }"
)
"""Issue 42's second instance: 1,257 bytes asking for 20 conversations of up to 1 MiB for each of
100 runs (65.9 MB for 100 runs with a 32 KiB prompt)."""

PER_RUN = (
    'query Page($n: Int) { suspendedRuns(agentId: "refund-agent", first: $n) { nodes { '
    + " ".join(f"c{i}: conversation(maxBytes: 1048576) {{ messages {{ text }} }}" for i in range(3))
    + " } } }"
)
"""Three conversations of up to 1 MiB per run, for ``$n`` runs: its cost grows with ``$n``."""

SUBSCRIPTION = (
    'subscription { runUpdates(agentId: "refund-agent", runId: "r") { id run { '
    + " ".join(f"c{i}: conversation(maxBytes: 1048576) {{ messages {{ text }} }}" for i in range(20))
    + " } } }"
)
"""A subscription each of whose answers asks for 20 conversations of up to 1 MiB."""


def too_costly(errors: list[dict[str, Any]]) -> dict[str, Any]:
    """The ``extensions`` of the one error of a refusal for cost, checked."""
    assert len(errors) == 1, errors
    extensions: dict[str, Any] = errors[0]["extensions"]
    assert extensions["code"] == "QUERY_TOO_COSTLY", errors
    assert extensions["requestedQueryCost"] > extensions["maximumAvailable"] > 0, errors
    assert str(extensions["requestedQueryCost"]) in errors[0]["message"], errors
    assert "RUNSGATE_MAX_QUERY_COST" in errors[0]["message"], errors
    return extensions


def fragment_bomb(levels: int, body: str = "id", root: str = "agents") -> str:
    """``fragment F0 on Agent { <body> }``, then ``F<i>`` spreading ``F<i-1>`` twice, up to
    ``F<levels-1>``, which ``{ <root> { ... } }`` spreads: 2^(levels-1) copies of ``body``
    once inlined, in a document of about 20 bytes a level."""
    fragments = [f"fragment F0 on Agent {{ {body} }}"] + [
        f"fragment F{i} on Agent {{ ...F{i - 1} ...F{i - 1} }}" for i in range(1, levels)
    ]
    return f"query {{ {root} {{ ...F{levels - 1} }} }}\n" + "\n".join(fragments)


def test_a_fragment_bomb_is_answered_at_once_and_the_server_stays_responsive(costed: Costed) -> None:
    # given a 40-level fragment bomb (about 1.6 KB; 2^39 copies of `id` once inlined)
    document = fragment_bomb(40)
    assert len(document) < 2000

    # when it is sent (the client waits generously: before the fix, the answer never came)
    response = post(costed.url, ADMIN, document)

    # then it is answered, as its inlined form would be: `id` merged into one field per agent
    assert response.status_code == 200, response.text
    agents = response.json()["data"]["agents"]
    assert [set(agent) for agent in agents] == [{"id"}] * len(agents)
    assert agents
    # and the server still answers its health check
    assert httpx.get(f"{costed.url}/healthz", timeout=scaled(10)).status_code == 200


def test_a_document_over_the_cost_limit_is_refused_before_it_runs_over_http(costed: Costed) -> None:
    # given issue 42's big answer: 20 conversations of up to 1 MiB for each of 100 runs
    # when it is sent, by POST and by GET
    by_post = post(costed.url, ADMIN, BIG_ANSWER)
    by_get = httpx.get(f"{costed.url}/graphql", params={"query": BIG_ANSWER}, headers=ADMIN.headers)

    # then it is a request error giving its cost and the limit, and nothing ran (no `data`)
    for response in (by_post, by_get):
        assert response.status_code == 200, response.text
        body = response.json()
        assert "data" not in body, body
        extensions = too_costly(body["errors"])
        assert body["extensions"]["cost"] == {
            "requestedQueryCost": extensions["requestedQueryCost"],
            "maximumAvailable": extensions["maximumAvailable"],
        }
    # and a client of the GraphQL over HTTP media type gets 400
    strict = post(costed.url, ADMIN, BIG_ANSWER, headers={"Accept": "application/graphql-response+json"})
    assert strict.status_code == 400, strict.text


def test_a_document_over_the_cost_limit_is_refused_over_websocket(costed: Costed) -> None:
    # given the same query, and a subscription each of whose events asks as much
    # when each is sent over a WebSocket
    query = asyncio.run(ws_execute(costed.url, BIG_ANSWER, init_payload=AUTHORIZED))
    subscription = asyncio.run(ws_execute(costed.url, SUBSCRIPTION, init_payload=AUTHORIZED))

    # then each gets an `error` message with the code, its cost and the limit
    too_costly(query["errors"])
    too_costly(subscription["errors"])


def test_a_fragment_bomb_over_an_object_field_is_refused_for_its_cost(costed: Costed) -> None:
    # given a 40-level bomb whose fragment selects a connection: 2^39 of them once inlined
    document = fragment_bomb(40, body="suspendedRuns { totalCount }")

    # when it is sent over HTTP and over WebSocket
    response = post(costed.url, ADMIN, document)
    over_ws = asyncio.run(ws_execute(costed.url, document, init_payload=AUTHORIZED))

    # then it is refused for its cost, at once
    assert response.status_code == 200, response.text
    too_costly(response.json()["errors"])
    too_costly(over_ws["errors"])


def test_the_cost_counts_the_values_of_the_variables(costed: Costed) -> None:
    # given one document whose page size is a variable
    # when it asks for 1 run, then for 100
    one = post(costed.url, ADMIN, PER_RUN, n=1)
    hundred = post(costed.url, ADMIN, PER_RUN, n=100)

    # then the first runs, and reports its cost; the second is refused, costing 100 times as much
    assert one.status_code == 200, one.text
    assert one.json()["data"] == {"suspendedRuns": {"nodes": []}}
    cost = one.json()["extensions"]["cost"]
    assert cost["requestedQueryCost"] <= cost["maximumAvailable"]
    refused = too_costly(hundred.json()["errors"])
    assert refused["requestedQueryCost"] > 90 * cost["requestedQueryCost"]


def test_every_answer_reports_its_cost(costed: Costed) -> None:
    # given a small query, sent twice (the second time, the server answers it as a prepared query)
    # and the same over a WebSocket
    answers = [post(costed.url, ADMIN, "{ agents { id } }").json() for _ in range(2)]
    over_ws = asyncio.run(ws_execute(costed.url, "{ agents { id } }", init_payload=AUTHORIZED))

    # then each reports the same cost: one point per agent (docs/api.md "Query cost")
    agents = len(answers[0]["data"]["agents"])
    for answer in [*answers, over_ws]:
        assert answer["extensions"]["cost"]["requestedQueryCost"] == agents, answer
        assert answer["extensions"]["cost"]["maximumAvailable"] > 0, answer
