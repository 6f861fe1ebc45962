"""A store that goes down and comes back (docs/guarantees.md).

Real processes: FerretDB 2 on PostgreSQL with DocumentDB in a folder of its own, and ``python -m
server serve`` on it. One of the two is stopped while runsgate runs: FerretDB (the MongoDB server
runsgate connects to), or PostgreSQL behind a FerretDB that keeps answering. Every field that
needs the store gets a ``STORE_UNAVAILABLE`` error, ``/readyz`` answers 503, ``/healthz`` still 200
and the process lives on. The stopped server is started again on the same data and port:
runsgate recovers by itself and the run stored before the outage is still there and can be approved.
"""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest

from .._documentdb import documentdb
from .._graphql import APPROVE, REFUND, REFUND_PROMPT, START_RUN, SUSPENDED_RUNS
from .._graphql import body as response_body
from .._servers import runsgate_process, with_database

pytestmark = [pytest.mark.mongo, pytest.mark.process]


def _until_ready(base_url: str, seconds: float) -> float:
    """Poll ``/readyz`` until it answers 200; returns the seconds it took."""
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        if httpx.get(f"{base_url}/readyz", timeout=10).status_code == 200:
            return time.monotonic() - started
        time.sleep(0.2)
    raise AssertionError(f"/readyz not 200 within {seconds} s")


@pytest.mark.parametrize("down", ["ferretdb", "postgresql"])
def test_a_store_outage_is_a_clear_error_and_the_server_recovers_by_itself(tmp_path: Path, down: str) -> None:
    with (
        documentdb() as database,
        runsgate_process(
            tmp_path / "runsgate.log", MONGODB_URI=with_database(database.uri), RUNSGATE_MONGODB_TIMEOUT="1"
        ) as server,
    ):
        # given a suspended run stored before the outage
        run = response_body(server, None, START_RUN, input={"agentId": REFUND, "prompt": REFUND_PROMPT})["data"][
            "startRun"
        ]["run"]
        call_id = run["toolCalls"][0]["toolCallId"]
        # and listed once: the listing is now a prepared operation (resolvers/fastpath/prepared.py)
        assert "errors" not in response_body(server, None, SUSPENDED_RUNS, agentId=REFUND)

        # when the store goes down
        if down == "ferretdb":
            database.stop_ferretdb()
        else:
            database.stop_postgres()

        # then reads and writes get a clear, typed error; nothing internal leaks
        listing = response_body(server, None, SUSPENDED_RUNS, agentId=REFUND)
        approval = response_body(
            server, None, APPROVE, input={"agentId": REFUND, "runId": run["runId"], "toolCallId": call_id}
        )
        for body, field in ((listing, "suspendedRuns"), (approval, "approveToolCall")):
            assert body["data"] is None, body
            (error,) = body["errors"]
            assert error["message"] == "The run store is unavailable; try again shortly.", error
            assert error["extensions"] == {"code": "STORE_UNAVAILABLE"}, error
            assert error["path"] == [field]
        ready = httpx.get(f"{server}/readyz", timeout=30)
        assert ready.status_code == 503
        assert ready.json()["status"] == "unavailable"
        assert httpx.get(f"{server}/healthz", timeout=10).status_code == 200

        # when it comes back on the same data and port
        if down == "ferretdb":
            database.start_ferretdb()
        else:
            database.start_postgres()

        # then runsgate recovers without a restart, and the run is still there, undecided
        _until_ready(server, 60)
        listed = response_body(server, None, SUSPENDED_RUNS, agentId=REFUND)
        assert "errors" not in listed, listed
        assert [edge["node"] for edge in listed["data"]["suspendedRuns"]["edges"]] == [run]
        approved = response_body(
            server, None, APPROVE, input={"agentId": REFUND, "runId": run["runId"], "toolCallId": call_id}
        )
        assert "errors" not in approved, approved
        assert approved["data"]["approveToolCall"]["status"] == "COMPLETED"
