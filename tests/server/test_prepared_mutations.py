"""Prepared mutations (``resolvers/fastpath/prepared.py``): a mutation document that executed once
runs again as a prepared operation, and runs at most once per request (the fallback's rule,
``resolvers.fastpath.schema.PreparedSchema.execute``).

Through HTTP on the memory store. Faults are injected into the fast path's own steps: before the
operation's execution began (``execute_prepared`` itself), and after (graphql-core's result
awaited, then a fault; the metrics step). The differential test
(``test_compiled_differential.py``) compares the answers of prepared mutations with the standard
path's.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette

import resolvers.fastpath.prepared
import resolvers.fastpath.schema
from resolvers.fastpath.prepared import PreparedOperations
from resolvers.metrics import OperationLabels
from server.app import create_app
from server.settings import DEMO_AGENTS, Settings

from .._graphql import APPROVE, REFUND, REFUND_PROMPT, SUSPENDED_RUNS, GraphQLClient, graphql_schema

UNKNOWN_RUN_APPROVAL = (
    'mutation { approveToolCall(input: {agentId: "refund-agent", runId: "none", toolCallId: "c_none"}) '
    "{ __typename ... on UserError { code } } }"
)


@pytest.fixture
async def app() -> AsyncIterator[Starlette]:
    application = create_app(Settings(agents=DEMO_AGENTS, mongodb_uri=None, auth=False))
    async with application.router.lifespan_context(application):
        yield application


@pytest.fixture
async def gql(app: Starlette) -> AsyncIterator[GraphQLClient]:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://localhost") as client:
        yield GraphQLClient(client)


def _prepared(app: Starlette) -> PreparedOperations:
    prepared = graphql_schema(app).prepared_operations
    assert prepared is not None
    return prepared


async def _pending_calls(gql: GraphQLClient, count: int) -> list[tuple[str, str]]:
    """``(runId, toolCallId)`` of ``count`` new suspended refund runs' pending calls."""
    runs = [await gql.suspend(REFUND, REFUND_PROMPT) for _ in range(count)]
    return [(run["runId"], run["toolCalls"][0]["toolCallId"]) for run in runs]


def _approval(run_id: str, tool_call_id: str) -> dict[str, Any]:
    return {"input": {"agentId": REFUND, "runId": run_id, "toolCallId": tool_call_id}}


async def _decisions(gql: GraphQLClient, run_id: str) -> int:
    return [event["type"] for event in await gql.run_events(REFUND, run_id)].count("decision")


async def test_a_prepared_mutation_sent_by_get_is_refused_as_before(app: Starlette, gql: GraphQLClient) -> None:
    # given an approval prepared from a POST
    posted = [await gql.http.post("/graphql", json={"query": UNKNOWN_RUN_APPROVAL}) for _ in range(2)]
    executed = _prepared(app).executed

    # when it comes as a GET
    got = await gql.http.get("/graphql", params={"query": UNKNOWN_RUN_APPROVAL})

    # then it is the GraphQL over HTTP spec's 405 (test_graphql_over_http.py), not executed
    assert posted[0].content == posted[1].content
    assert got.status_code == 405, got.text
    assert got.headers["allow"] == "POST"
    assert _prepared(app).executed == executed


_AWAIT_MAYBE = resolvers.fastpath.prepared.await_maybe


async def _awaited_then_fault(value: Awaitable[Any] | Any) -> Any:
    """``await_maybe`` that lets graphql-core's execution finish, then fails (a fault of the fast
    path's own step after the operation's execution began)."""
    await _AWAIT_MAYBE(value)
    raise RuntimeError("injected fault after execution")


def _metrics_fault(self: OperationLabels, elapsed: float, *, failed: bool) -> None:
    raise RuntimeError("injected fault after execution")


@pytest.mark.parametrize("step", ["after graphql-core's execute", "metrics"])
async def test_a_fault_after_a_prepared_approval_began_answers_once_and_decides_once(
    app: Starlette,
    gql: GraphQLClient,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    step: str,
) -> None:
    # given the approval document prepared (one run approved), and another run's call pending
    (first, second) = await _pending_calls(gql, 2)
    assert (await gql.approve(REFUND, *first))["status"] == "COMPLETED"
    prepared = _prepared(app)
    executed = prepared.executed

    # when the fast path fails once the approval's execution began
    with monkeypatch.context() as patched, caplog.at_level(logging.ERROR, logger="runsgate.graphql"):
        if step == "metrics":
            patched.setattr(OperationLabels, "observe", _metrics_fault)
        else:
            patched.setattr(resolvers.fastpath.prepared, "await_maybe", _awaited_then_fault)
        response = await gql.post(APPROVE, **_approval(*second))

    # then it was answered once, by the prepared path, as a resolver's unexpected fault is answered
    # (masked, located at the mutation's field, data null: not a request error), logged with its
    # traceback as an ERROR
    assert prepared.executed == executed + 1
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["data"] is None
    [error] = body["errors"]
    assert (error["message"], error["path"]) == ("Unexpected error.", ["approveToolCall"])
    assert "locations" in error
    (traced,) = [r for r in caplog.records if r.exc_info and "injected fault" in str(r.exc_info[1])]
    assert traced.levelno == logging.ERROR
    assert any("not run again" in r.getMessage() for r in caplog.records)
    # and the decision was recorded exactly once: one decision event, and the call decided
    assert await _decisions(gql, second[0]) == 1
    again = await gql.approve(REFUND, *second)
    assert again["__typename"] == "ToolCallAlreadyDecided", again
    assert await _decisions(gql, second[0]) == 1


async def test_a_fault_before_a_prepared_mutation_began_runs_it_through_strawberry_once(
    app: Starlette, gql: GraphQLClient, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # given the approval prepared, and a prepared path that fails before executing anything
    (first, second) = await _pending_calls(gql, 2)
    await gql.approve(REFUND, *first)

    async def broken(*args: object, **kwargs: object) -> object:
        raise RuntimeError("injected fault before execution")

    monkeypatch.setattr(resolvers.fastpath.schema, "execute_prepared", broken)

    # when another call is approved
    with caplog.at_level(logging.ERROR, logger="runsgate.graphql"):
        outcome = await gql.approve(REFUND, *second)

    # then Strawberry's pipeline decided it, once, and the fault is logged with its traceback
    assert outcome["status"] == "COMPLETED", outcome
    assert await _decisions(gql, second[0]) == 1
    (record,) = [r for r in caplog.records if "prepared operation failed" in r.getMessage()]
    assert record.exc_info is not None


async def test_a_query_whose_prepared_execution_failed_runs_again(
    app: Starlette, gql: GraphQLClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given a prepared listing (a query: no effects)
    await _pending_calls(gql, 1)
    expected = await gql.post(SUSPENDED_RUNS, agentId=REFUND)
    prepared = _prepared(app)
    executed = prepared.executed

    # when the fast path fails after its execution began
    monkeypatch.setattr(resolvers.fastpath.prepared, "await_maybe", _awaited_then_fault)
    answer = await gql.post(SUSPENDED_RUNS, agentId=REFUND)

    # then Strawberry's pipeline answered it again, as before mutations were prepared
    assert prepared.executed == executed + 1
    assert answer.status_code == 200
    assert answer.content == expected.content
