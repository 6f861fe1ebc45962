"""The SQLite reads one ``reviewQueue`` page with its ``totalCount`` makes, beside one
``suspendedRuns`` page with its total (issue 45 "Cost"), over HTTP.

Each read the store hands to its reader thread (``_Connection._read`` and ``_read_within``) while
one GraphQL request is answered is recorded; a run's read by key on the event loop
(``_read_point``) hands nothing off and is not. No time is measured.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from storage.sqlite.connection import _Connection

from .._graphql import REFUND, REFUND_PROMPT, WEATHER, WEATHER_PROMPT, GraphQLClient
from .conftest import Serve
from .test_queue_page_commands import LISTING_PAGE, QUEUE_PAGE, approved_once


class Reads:
    """The SQL of each read handed to the reader thread while ``recording`` is a list."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.recording: list[str] | None = None
        read, within = _Connection._read, _Connection._read_within

        async def recorded_read(store: _Connection, sql: str, params: Sequence[Any] = ()) -> Any:
            if self.recording is not None:
                self.recording.append(sql)
            return await read(store, sql, params)

        async def recorded_within(store: _Connection, sql: str, *args: Any, **kwargs: Any) -> Any:
            if self.recording is not None:
                self.recording.append(sql)
            return await within(store, sql, *args, **kwargs)

        monkeypatch.setattr(_Connection, "_read", recorded_read)
        monkeypatch.setattr(_Connection, "_read_within", recorded_within)

    async def of(self, gql: GraphQLClient, document: str, **variables: Any) -> list[str]:
        """The reads made while ``document`` was answered, in order."""
        self.recording = reads = []
        try:
            await gql.data(document, **variables)
        finally:
            self.recording = None
        return reads


@pytest.mark.parametrize("serve", ["sqlite"], indirect=True)
async def test_a_queue_page_with_its_total_reads_what_a_listing_page_does(
    serve: Serve, monkeypatch: pytest.MonkeyPatch
) -> None:
    served = await serve(tool_rules=[{"tool": "issue_refund", "agentId": REFUND, "expiresAfter": 600}])
    gql = served.client()
    # given 30 waiting runs of two agents: more than a page of 20
    for number in range(15):
        await gql.suspend(REFUND, REFUND_PROMPT, resourceId=f"customer-{number}")
        await gql.suspend(WEATHER, WEATHER_PROMPT)
    reads = Reads(monkeypatch)

    queue = await reads.of(gql, QUEUE_PAGE)
    listing = await reads.of(gql, LISTING_PAGE, agentId=REFUND)

    # the listing: its page and its kept count, one read each
    assert len(listing) == 2, listing
    # the queue: the same; its kept count's read also tells that no waiting run holds an approval
    # by the caller (``refusal_candidates``' only part here), so no candidate run is read
    assert len(queue) == 2, queue


@pytest.mark.parametrize("serve", ["sqlite"], indirect=True)
async def test_a_queue_total_reads_its_candidates_when_the_caller_approved_in_a_run(
    serve: Serve, monkeypatch: pytest.MonkeyPatch
) -> None:
    gql = await approved_once(serve)
    reads = Reads(monkeypatch)

    queue = await reads.of(gql, QUEUE_PAGE)
    total = (await gql.data("{ reviewQueue(first: 20) { totalCount nodes { runId } } }"))["reviewQueue"]

    # the page, the kept count, then the candidate runs (a walk of ``review_marks``)
    assert len(queue) == 3, queue
    assert "review_marks" in queue[-1], queue
    assert total["totalCount"] == len(total["nodes"]) == 2, total
