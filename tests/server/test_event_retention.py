"""``RUNSGATE_EVENT_RETENTION`` (docs/guarantees.md "Events"): checked against the idempotency
key retention and the subscription lookback at start (one line, exit status 2), and over HTTP
the server's sweeper deletes a finished run's events that long after it finished, while a run
still waiting keeps its own. On the memory, SQLite and MongoDB stores."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from .._graphql import REFUND
from .._processes import scaled
from ._cli import serve_with_only
from .conftest import Serve

RETENTION = 3.0
"""Seconds, short enough for a test; the default is 2,592,000 (30 days)."""


@pytest.mark.parametrize(
    ("variables", "expected", "shown"),
    [
        (
            {"RUNSGATE_IDEMPOTENCY_KEY_RETENTION": "100", "RUNSGATE_EVENT_RETENTION": "99"},
            "RUNSGATE_IDEMPOTENCY_KEY_RETENTION must not exceed RUNSGATE_EVENT_RETENTION",
            "(got RUNSGATE_IDEMPOTENCY_KEY_RETENTION=100.0, RUNSGATE_EVENT_RETENTION=99.0)",
        ),
        (
            {"RUNSGATE_IDEMPOTENCY_KEY_RETENTION": "1", "RUNSGATE_EVENT_RETENTION": "5"},
            "RUNSGATE_EVENT_RETENTION must exceed RUNSGATE_SUBSCRIPTION_LOOKBACK",
            "(got RUNSGATE_EVENT_RETENTION=5.0, RUNSGATE_SUBSCRIPTION_LOOKBACK=5.0)",
        ),
        ({"RUNSGATE_EVENT_RETENTION": "0"}, "RUNSGATE_EVENT_RETENTION: Input should be greater than 0", "(got '0')"),
    ],
)
def test_an_event_retention_that_would_lose_what_others_need_is_refused_at_start(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    variables: dict[str, str],
    expected: str,
    shown: str,
) -> None:
    assert serve_with_only(monkeypatch, tmp_path, {"RUNSGATE_AUTH": "off", **variables}) == 2
    err = capsys.readouterr().err
    assert expected in err
    assert shown in err  # the refused values (docs/configuration.md)
    assert len([line for line in err.splitlines() if "RUNSGATE_EVENT_RETENTION" in line]) == 1, err


async def test_a_finished_runs_events_are_deleted_after_the_period_and_a_waiting_runs_kept(serve: Serve) -> None:
    served = await serve(
        sweep_interval=0.05, event_retention=RETENTION, idempotency_key_retention=1.0, subscription_lookback=1.0
    )
    gql = served.client()
    run = await gql.suspend(REFUND, "Please refund order 1042")
    waiting = await gql.suspend(REFUND, "Please refund order 1043")
    call_id = run["toolCalls"][0]["toolCallId"]
    finished = time.monotonic()  # no later than the run finished: its period starts after this
    assert (await gql.approve(REFUND, run["runId"], call_id))["status"] == "COMPLETED"

    # the finished run's trail is readable at first
    types = [e["type"] for e in await gql.run_events(REFUND, run["runId"])]
    if time.monotonic() - finished < RETENTION:  # else the machine was too slow to tell
        assert "completed" in types, types

    # and once the period passed and the sweeper ran, it is gone
    deadline = time.monotonic() + RETENTION + scaled(30)
    while True:
        await asyncio.sleep(0.1)
        left = await gql.run_events(REFUND, run["runId"])
        if not left or time.monotonic() > deadline:
            break
    assert left == []
    assert time.monotonic() - finished >= RETENTION

    # while the run still waiting keeps its own
    assert len(await gql.run_events(REFUND, waiting["runId"])) == 2
