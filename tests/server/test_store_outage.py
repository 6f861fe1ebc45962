"""A store that goes down and comes back (docs/guarantees.md).

Real processes: FerretDB with its files in a test folder, and ``python -m server serve`` on it.
FerretDB is stopped while runsgate runs: every field that needs the store gets a
``STORE_UNAVAILABLE`` error, ``/readyz`` answers 503, ``/healthz`` still 200 and the process
lives on. FerretDB is started again on the same folder and port: runsgate recovers by itself
and the run stored before the outage is still there and can be approved.
"""

from __future__ import annotations

import time
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest

from .._graphql import APPROVE, REFUND, REFUND_PROMPT, START_RUN, SUSPENDED_RUNS
from .._graphql import body as response_body
from .._servers import ferretdb_process, free_port, runsgate_process, with_database

pytestmark = [pytest.mark.mongo, pytest.mark.process]


def _until_ready(base_url: str, seconds: float) -> float:
    """Poll ``/readyz`` until it answers 200; returns the seconds it took."""
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        if httpx.get(f"{base_url}/readyz", timeout=10).status_code == 200:
            return time.monotonic() - started
        time.sleep(0.2)
    raise AssertionError(f"/readyz not 200 within {seconds} s")


def test_a_store_outage_is_a_clear_error_and_the_server_recovers_by_itself(tmp_path: Path) -> None:
    data, port = tmp_path / "ferretdb", free_port()
    data.mkdir()
    with ExitStack() as everything:
        database = everything.enter_context(ExitStack())  # FerretDB's own lifetime, closed mid-test
        uri = with_database(database.enter_context(ferretdb_process(data, port)))
        server = everything.enter_context(
            runsgate_process(tmp_path / "runsgate.log", MONGODB_URI=uri, RUNSGATE_MONGODB_TIMEOUT="1")
        )
        # given a suspended run stored before the outage
        run = response_body(server, None, START_RUN, input={"agentId": REFUND, "prompt": REFUND_PROMPT})["data"][
            "startRun"
        ]["run"]
        call_id = run["toolCalls"][0]["toolCallId"]
        # and listed once: the listing is now a prepared operation (resolvers/fastpath/prepared.py)
        assert "errors" not in response_body(server, None, SUSPENDED_RUNS, agentId=REFUND)

        # when the store goes down
        database.close()

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

        # when the store comes back on the same files and port
        database.enter_context(ferretdb_process(data, port))

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
        database.close()
