"""Discovery reads storage, not memory (docs/architecture.md "What runsgate reproduces"): a run survives a
restart of runsgate.

Real processes: ``python -m server serve`` is started, stopped and started again on the same
MongoDB database; the run started through the first process is found and approved through
the second. With the memory store (the default) the runs are lost instead.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette

from server.app import create_app
from server.settings import DEMO_AGENTS, Settings

from .._graphql import APPROVE, REFUND, REFUND_PROMPT, START_RUN, SUSPENDED_RUNS, GraphQLClient, data
from .._servers import runsgate_process, shared_store_env


def _listed(base_url: str) -> list[dict[str, Any]]:
    connection = data(base_url, None, SUSPENDED_RUNS, agentId=REFUND)["suspendedRuns"]
    assert connection["totalCount"] == len(connection["edges"])
    return [edge["node"] for edge in connection["edges"]]


@pytest.mark.process
def test_a_suspended_run_survives_a_restart_and_is_approved_through_the_new_process(
    request: pytest.FixtureRequest, shared_store_kind: str, tmp_path: Path
) -> None:
    """On a SQLite file, then on a MongoDB database (``shared_store_kind``)."""
    log = tmp_path / "runsgate.log"
    store = shared_store_env(request, shared_store_kind, tmp_path)
    # given a refund run started through a runsgate process on a durable store
    with runsgate_process(log, **store) as first:
        started = data(
            first, None, START_RUN, input={"agentId": REFUND, "prompt": REFUND_PROMPT, "idempotencyKey": "start-1042"}
        )["startRun"]
        assert started["__typename"] == "RunOutcome"
        assert started["status"] == "SUSPENDED"
        run = started["run"]
        assert _listed(first) == [run]

    # when that process is stopped and a new one starts on the same database
    with runsgate_process(log, **store) as second:
        # then the run is listed by the new process, unchanged
        assert _listed(second) == [run]

        # when the start is repeated with the same idempotency key after the restart
        replayed = data(
            second, None, START_RUN, input={"agentId": REFUND, "prompt": REFUND_PROMPT, "idempotencyKey": "start-1042"}
        )["startRun"]

        # then the first answer comes back and no second run was started
        assert (replayed["runId"], replayed["status"]) == (run["runId"], "SUSPENDED")
        assert _listed(second) == [run]

        # when it is approved through the new process
        outcome = data(
            second,
            None,
            APPROVE,
            input={"agentId": REFUND, "runId": run["runId"], "toolCallId": run["toolCalls"][0]["toolCallId"]},
        )["approveToolCall"]

        # then the run completes and is gone
        assert outcome["__typename"] == "RunOutcome", outcome
        assert outcome["status"] == "COMPLETED"
        assert "Refund of $49.90 for order 1042 issued" in outcome["output"]
        assert _listed(second) == []


async def test_with_the_memory_store_a_restart_loses_the_suspended_runs() -> None:
    settings = Settings(agents=DEMO_AGENTS, mongodb_uri=None, auth=False)  # loopback: auth may be off
    # given a refund run suspended in an app on the memory store
    app = create_app(settings)
    async with app.router.lifespan_context(app), _client(app) as http:
        run = await GraphQLClient(http).suspend(REFUND, REFUND_PROMPT)
        assert await GraphQLClient(http).listed_ids(REFUND) == [run["runId"]]

    # when the app is started again (a new process would do the same)
    restarted = create_app(settings)
    async with restarted.router.lifespan_context(restarted), _client(restarted) as http:
        # then nothing is listed: the default memory storage is lost on restart
        assert await GraphQLClient(http).listed_ids(REFUND) == []
        assert await GraphQLClient(http).suspended_run(REFUND, run["runId"]) is None


def _client(app: Starlette) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://localhost")
